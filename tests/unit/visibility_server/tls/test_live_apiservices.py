"""`check_live_apiservices`: what `certs verify --kubeconfig` concludes from the two
APIServices as kube-apiserver holds them (the reading is tested in kube/test_apiservices.py,
the whole command against a real kube-apiserver in tests/e2e/test_certs_verify.py)."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from cryptography import x509

from tests.unit.visibility_server.tls.support import NOW
from visibility_server.certs import (
    APISERVICE_NAMES,
    CertifiedKey,
    CertsInputError,
    ServiceName,
    check_live_apiservices,
    create_ca,
    issue_serving_cert,
)

V1BETA1, V1BETA2 = APISERVICE_NAMES
SERVICE = {"name": "queuescope-visibility", "namespace": "queuescope-system", "port": 443}
AVAILABLE = {"type": "Available", "status": "True", "reason": "Passed", "message": "all checks"}


@dataclass(frozen=True)
class Keys:
    ca: CertifiedKey
    other_ca: CertifiedKey  # did not sign `serving`
    serving: CertifiedKey

    @property
    def leaf(self) -> x509.Certificate:
        return self.serving.cert


@pytest.fixture(scope="module")
def keys() -> Keys:
    ca = create_ca(now=NOW)
    serving = issue_serving_cert(
        ca, namespace="queuescope-system", service="queuescope-visibility", now=NOW
    )
    return Keys(ca, create_ca(now=NOW), serving)


def apiservice(
    name: str, bundle: bytes | None, *, condition: dict[str, str] | None = AVAILABLE, **spec: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {"service": SERVICE, **spec}
    if bundle is not None:
        body["caBundle"] = base64.b64encode(bundle).decode()
    status = {"conditions": [condition]} if condition else {}
    return {"kind": "APIService", "metadata": {"name": name}, "spec": body, "status": status}


def both(bundle: bytes | None, **spec: Any) -> dict[str, dict[str, Any] | None]:
    return {name: apiservice(name, bundle, **spec) for name in APISERVICE_NAMES}


def test_matching_bundles_pass(keys: Keys) -> None:
    found = check_live_apiservices(keys.leaf, both(keys.ca.cert_pem), now=NOW)
    assert found.errors == [] and found.warnings == []


def test_a_rotation_bundle_of_old_and_new_ca_passes(keys: Keys) -> None:
    bundle = keys.other_ca.cert_pem + keys.ca.cert_pem
    assert check_live_apiservices(keys.leaf, both(bundle), now=NOW).ok


def test_another_ca_is_a_mismatch_naming_each_apiservice(keys: Keys) -> None:
    found = check_live_apiservices(keys.leaf, both(keys.other_ca.cert_pem), now=NOW)
    assert len(found.errors) == 2
    for name, error in zip(APISERVICE_NAMES, found.errors, strict=True):
        assert error.startswith(f"the caBundle of APIService {name} does not validate tls.crt")
        assert "queuescope-visibility.queuescope-system.svc" in error
        assert "x509: certificate signed by unknown authority" in error


def test_a_missing_apiservice_is_reported(keys: Keys) -> None:
    live: dict[str, dict[str, Any] | None] = {
        V1BETA1: None,
        V1BETA2: apiservice(V1BETA2, keys.ca.cert_pem),
    }
    found = check_live_apiservices(keys.leaf, live, now=NOW)
    assert found.errors == [f"APIService {V1BETA1} does not exist"]
    # Absent from the mapping altogether counts the same.
    found = check_live_apiservices(keys.leaf, {V1BETA2: live[V1BETA2]}, now=NOW)
    assert found.errors == [f"APIService {V1BETA1} does not exist"]


def test_insecure_skip_tls_verify_is_an_error(keys: Keys) -> None:
    found = check_live_apiservices(keys.leaf, both(None, insecureSkipTLSVerify=True), now=NOW)
    insecure = [e for e in found.errors if "insecureSkipTLSVerify" in e]
    assert len(insecure) == 2
    assert all("does not verify the server at all" in e for e in insecure)
    assert sum("has no caBundle" in e for e in found.errors) == 2


def test_no_bundle_and_a_garbled_bundle(keys: Keys) -> None:
    live: dict[str, dict[str, Any] | None] = {
        V1BETA1: apiservice(V1BETA1, None),
        V1BETA2: apiservice(V1BETA2, None, caBundle="not base64!"),
    }
    found = check_live_apiservices(keys.leaf, live, now=NOW)
    assert found.errors[0].startswith(f"APIService {V1BETA1} has no caBundle")
    assert found.errors[1].startswith(f"the caBundle of APIService {V1BETA2} is not base64 PEM")


def test_another_service_is_an_error(keys: Keys) -> None:
    kueue = {"name": "kueue-visibility-server", "namespace": "kueue-system", "port": 443}
    live = {name: apiservice(name, keys.ca.cert_pem, service=kueue) for name in APISERVICE_NAMES}
    found = check_live_apiservices(keys.leaf, live, now=NOW)
    assert found.errors == [
        f"APIService {name} points at Service kueue-system/kueue-visibility-server, "
        "not queuescope-system/queuescope-visibility"
        for name in APISERVICE_NAMES
    ]


def test_an_expired_serving_certificate_fails_even_with_the_right_ca(keys: Keys) -> None:
    later = keys.leaf.not_valid_after_utc + timedelta(days=1)
    found = check_live_apiservices(keys.leaf, both(keys.ca.cert_pem), now=later)
    assert len(found.errors) == 2 and all("does not validate" in e for e in found.errors)


def test_not_available_is_a_warning(keys: Keys) -> None:
    failed = {
        "type": "Available",
        "status": "False",
        "reason": "FailedDiscoveryCheck",
        "message": "failing or missing response",
    }
    live = {
        V1BETA1: apiservice(V1BETA1, keys.ca.cert_pem, condition=failed),
        V1BETA2: apiservice(V1BETA2, keys.ca.cert_pem, condition=None),
    }
    found = check_live_apiservices(keys.leaf, live, now=NOW)
    assert found.ok
    assert found.warnings == [
        f"APIService {V1BETA1} is not Available "
        "(FailedDiscoveryCheck: failing or missing response)",
        f"APIService {V1BETA2} has no Available condition yet",
    ]


def test_another_service_name_is_checked_against_its_own_san(keys: Keys) -> None:
    other = issue_serving_cert(keys.ca, namespace="tools", service="vis", now=NOW)
    target = {"name": "vis", "namespace": "tools", "port": 443}
    live = {name: apiservice(name, keys.ca.cert_pem, service=target) for name in APISERVICE_NAMES}
    assert check_live_apiservices(other.cert, live, now=NOW, service=ServiceName("tools", "vis")).ok
    found = check_live_apiservices(other.cert, live, now=NOW)  # default names: wrong SAN
    assert any("queuescope-visibility.queuescope-system.svc" in e for e in found.errors)


def test_bad_names_are_input_errors(keys: Keys) -> None:
    with pytest.raises(CertsInputError):
        check_live_apiservices(
            keys.leaf,
            both(keys.ca.cert_pem),
            now=NOW,
            service=ServiceName("Not_A_NS", "queuescope-visibility"),
        )
