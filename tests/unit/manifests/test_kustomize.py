"""`kubectl kustomize manifests/default` renders the whole install (e2e toolchain only).

Skipped unless QUEUESCOPE_KUBECTL names a kubectl binary (the control-plane toolchain's, see
tools/controlplane). The tree is copied and `queuescope certs generate` writes the
certificates into the copy, as an operator would before `kubectl apply -k`.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from queuescope.cli import main as queuescope
from tests.unit.manifests.support import MANIFESTS, NAMESPACE, crds

KUBECTL = os.environ.get("QUEUESCOPE_KUBECTL", "")

pytestmark = pytest.mark.skipif(
    not KUBECTL, reason="set QUEUESCOPE_KUBECTL to a kubectl binary to render the kustomizations"
)


def _kustomize(folder: Path) -> list[dict[str, Any]]:
    result = subprocess.run(
        [KUBECTL, "kustomize", str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    root = tmp_path_factory.mktemp("kustomize") / "manifests"
    shutil.copytree(MANIFESTS, root, ignore=shutil.ignore_patterns("certs"))
    assert queuescope(["certs", "generate", "--out", str(root / "default" / "certs")]) == 0
    return _kustomize(root / "default")


def _one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (match,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return match


def test_default_renders_every_object(rendered: list[dict[str, Any]]) -> None:
    kinds = {(o["kind"], o["metadata"]["name"]) for o in rendered}
    assert {
        ("Namespace", NAMESPACE),
        ("ServiceAccount", "queuescope-controller"),
        ("ClusterRole", "queuescope-controller"),
        ("RoleBinding", "queuescope-auth-reader"),
        ("ClusterRoleBinding", "queuescope-auth-delegator"),
        ("Deployment", "queuescope-controller"),
        ("PodDisruptionBudget", "queuescope-controller"),
        ("Service", "queuescope-visibility"),
        ("Secret", "queuescope-visibility-tls"),
        ("APIService", "v1beta1.visibility.kueue.x-k8s.io"),
        ("APIService", "v1beta2.visibility.kueue.x-k8s.io"),
    } <= kinds
    assert sum(o["kind"] == "CustomResourceDefinition" for o in rendered) == len(crds())


def test_namespaces_are_kept(rendered: list[dict[str, Any]]) -> None:
    reader = _one(rendered, "RoleBinding", "queuescope-auth-reader")
    assert reader["metadata"]["namespace"] == "kube-system"


def test_apiservices_carry_the_generated_ca(rendered: list[dict[str, Any]]) -> None:
    secret = _one(rendered, "Secret", "queuescope-visibility-tls")
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"]["namespace"] == NAMESPACE
    assert set(secret["data"]) == {"tls.crt", "tls.key", "ca.crt"}  # never ca.key
    for version in ("v1beta1", "v1beta2"):
        spec = _one(rendered, "APIService", f"{version}.visibility.kueue.x-k8s.io")["spec"]
        assert base64.b64decode(spec["caBundle"]) == base64.b64decode(secret["data"]["ca.crt"])
        assert "insecureSkipTLSVerify" not in spec


def test_deployment_is_highly_available_and_mounts_the_secret(
    rendered: list[dict[str, Any]],
) -> None:
    deployment = _one(rendered, "Deployment", "queuescope-controller")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["topologySpreadConstraints"][0]["topologyKey"] == "kubernetes.io/hostname"
    secrets = [v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v]
    assert secrets == ["queuescope-visibility-tls"]
    # The patch merged into the base: hardening and probes are still there.
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"


@pytest.mark.parametrize("folder", ["crds", "rbac", "deploy", "apiservice"])
def test_each_base_renders_alone(folder: str) -> None:
    assert _kustomize(MANIFESTS / folder)
