"""The running server's caBundle self-check: gauge and log follow what kube-apiserver
holds; an unreadable APIService keeps the last verdict."""

from __future__ import annotations

import base64
import logging

import pytest
from prometheus_client import CollectorRegistry

from tests.unit.visibility_server.kube.support import FakeTransport, response, status_error
from tests.unit.visibility_server.tls.support import NOW
from visibility_server.certs import APISERVICE_NAMES, ServiceName, create_ca, issue_serving_cert
from visibility_server.kube.apiservices import APISERVICE_PATH
from visibility_server.kube.cabundle import CaBundleCheck

CA = create_ca(now=NOW)
OTHER = create_ca(now=NOW, common_name="other-ca")
SERVING = issue_serving_cert(
    CA, namespace="queuescope-system", service="queuescope-visibility", now=NOW
)
SERVICE = {"name": "queuescope-visibility", "namespace": "queuescope-system", "port": 443}


def script(transport: FakeTransport, bundle: bytes) -> None:
    for name in APISERVICE_NAMES:
        doc = {
            "kind": "APIService",
            "metadata": {"name": name},
            "spec": {"service": SERVICE, "caBundle": base64.b64encode(bundle).decode()},
        }
        transport.script("GET", APISERVICE_PATH.format(name=name), response(200, doc))


def check(transport: FakeTransport, registry: CollectorRegistry) -> CaBundleCheck:
    return CaBundleCheck(
        transport,
        lambda: SERVING.cert_pem,
        registry=registry,
        service=ServiceName("queuescope-system", "queuescope-visibility"),
    )


def gauge(registry: CollectorRegistry) -> float | None:
    return registry.get_sample_value("queuescope_apiservice_cabundle_trusted")


async def test_a_matching_bundle_is_trusted() -> None:
    transport, registry = FakeTransport(), CollectorRegistry()
    script(transport, CA.cert_pem)
    assert await check(transport, registry).check_once() is True
    assert gauge(registry) == 1.0


async def test_a_bundle_of_another_ca_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    transport, registry = FakeTransport(), CollectorRegistry()
    script(transport, OTHER.cert_pem)
    caplog.set_level(logging.ERROR, logger="visibility_server.kube.cabundle")
    assert await check(transport, registry).check_once() is False
    assert gauge(registry) == 0.0
    assert any("event=apiservice-untrusted" in r.getMessage() for r in caplog.records)


async def test_an_unreadable_apiservice_keeps_the_last_verdict() -> None:
    transport, registry = FakeTransport(), CollectorRegistry()
    script(transport, CA.cert_pem)
    checker = check(transport, registry)
    assert await checker.check_once() is True
    forbidden = status_error(403, "apiservices is forbidden")
    for name in APISERVICE_NAMES:
        transport.script("GET", APISERVICE_PATH.format(name=name), forbidden)
    assert await checker.check_once() is True
    assert gauge(registry) == 1.0
