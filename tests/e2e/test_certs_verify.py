"""`queuescope certs verify --kubeconfig` against the real kube-apiserver
(docs/cluster.md#tls-and-certificates).

The admin creates our two APIServices with a caBundle that does or does not trust the
folder's tls.crt (or with insecureSkipTLSVerify, or not at all), and the command, run as
a subprocess with the admin's kubeconfig, reads them back through kube-apiserver. No
server of ours runs: the APIServices stay unavailable (ServiceNotFound), which verify
reports as a warning. They are deleted at the end, because the other modules share this
kube-apiserver and a dangling APIService makes its discovery stale.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.e2e.harness import ControlPlane, User
from visibility_server.certs import APISERVICE_NAMES, generate_cert_dir

V1BETA1, V1BETA2 = APISERVICE_NAMES
SERVICE = {"name": "queuescope-visibility", "namespace": "queuescope-system", "port": 443}


@dataclass(frozen=True)
class Verified:
    code: int
    out: str
    err: str


@dataclass(frozen=True)
class Setup:
    plane: ControlPlane
    certs: Path  # the folder verify checks
    other_ca_pem: bytes  # a CA that did not sign its tls.crt

    @property
    def ca_pem(self) -> bytes:
        return (self.certs / "ca.crt").read_bytes()

    def register(self, bundle: bytes | None, *, names: tuple[str, ...] = APISERVICE_NAMES) -> None:
        """Create or replace our APIServices as the admin, with `bundle` as caBundle, or
        with insecureSkipTLSVerify when `bundle` is None (validation forbids both)."""
        self.delete()  # a replace would keep fields of the previous variant
        docs = []
        for name in names:
            version = name.partition(".")[0]
            spec: dict[str, object] = {
                "group": "visibility.kueue.x-k8s.io",
                "version": version,
                "groupPriorityMinimum": 100,
                "versionPriority": 100 if version == "v1beta2" else 90,
                "service": SERVICE,
            }
            if bundle is None:
                spec["insecureSkipTLSVerify"] = True
            else:
                spec["caBundle"] = base64.b64encode(bundle).decode()
            docs.append(
                {
                    "apiVersion": "apiregistration.k8s.io/v1",
                    "kind": "APIService",
                    "metadata": {"name": name},
                    "spec": spec,
                }
            )
        self.plane.apply("\n---\n".join(json.dumps(d) for d in docs))

    def delete(self) -> None:
        self.plane.kubectl("delete", "apiservice", *APISERVICE_NAMES, "--ignore-not-found")

    def verify(self, user: User | None = None) -> Verified:
        kubeconfig = (user or self.plane.admin).kubeconfig
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "queuescope.cli",
                "certs",
                "verify",
                "--dir",
                str(self.certs),
                "--kubeconfig",
                str(kubeconfig),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return Verified(result.returncode, result.stdout, result.stderr)


@pytest.fixture(scope="module")
def setup(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    root = tmp_path_factory.mktemp("certs-verify")
    now = datetime.now(UTC)
    generate_cert_dir(root / "certs", now=now)
    other = generate_cert_dir(root / "other", now=now)
    found = Setup(control_plane, root / "certs", other.ca_cert.read_bytes())
    try:
        yield found
    finally:
        found.delete()


def test_matching_cabundle_passes(setup: Setup) -> None:
    setup.register(setup.ca_pem)
    result = setup.verify()
    assert result.code == 0, result.err
    assert f"ok: {setup.certs / 'tls.crt'} is valid for" in result.out
    assert f"ok: the caBundle of {V1BETA1} and {V1BETA2} trusts it" in result.out
    assert "error:" not in result.err
    # Nothing serves them here: kube-apiserver says so, and verify passes it on.
    for name in APISERVICE_NAMES:
        assert f"warning: APIService {name} is not Available" in result.err or (
            f"warning: APIService {name} has no Available condition yet" in result.err
        )


def test_a_rotation_bundle_passes(setup: Setup) -> None:
    setup.register(setup.other_ca_pem + setup.ca_pem)
    result = setup.verify()
    assert result.code == 0, result.err


def test_another_ca_fails_for_both(setup: Setup) -> None:
    setup.register(setup.other_ca_pem)
    result = setup.verify()
    assert result.code == 1
    for name in APISERVICE_NAMES:
        assert f"error: the caBundle of APIService {name} does not validate tls.crt" in result.err
    assert "ok:" not in result.out


def test_a_missing_apiservice_fails(setup: Setup) -> None:
    setup.register(setup.ca_pem, names=(V1BETA2,))
    result = setup.verify()
    assert result.code == 1
    assert f"error: APIService {V1BETA1} does not exist" in result.err
    assert V1BETA2 not in "".join(line for line in result.err.splitlines() if "error" in line)


def test_insecure_skip_tls_verify_fails(setup: Setup) -> None:
    setup.register(None)
    result = setup.verify()
    assert result.code == 1
    for name in APISERVICE_NAMES:
        assert f"error: APIService {name} sets insecureSkipTLSVerify" in result.err
        assert f"error: APIService {name} has no caBundle" in result.err


def test_a_user_who_may_not_read_apiservices_fails_with_the_403(setup: Setup) -> None:
    setup.register(setup.ca_pem)
    result = setup.verify(setup.plane.user("certs-verify-nobody"))
    assert result.code == 1
    assert "kube-apiserver answered 403" in result.err
    assert 'cannot get resource "apiservices"' in result.err
