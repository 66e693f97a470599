"""The admission webhooks over our real TLS listener, called the way kube-apiserver calls
them: a client that verifies the Service name against the caBundle's CA, presents no
certificate and sends an AdmissionReview (docs/operations.md, "Admission webhooks")."""

from __future__ import annotations

import base64
import http.client
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.tls.support import SERVICE_SAN, TLSConnection, client_context, in_thread, running_server
from tests.unit.test_webhook_rules import job, review
from tests.unit.visibility_server.http.support import app_for
from visibility_server.certs import create_ca, issue_serving_cert, load_pair, write_certified_key
from visibility_server.tls.listener import ListenerTLS

NOW = datetime.now(UTC)
CA = create_ca(now=NOW)
CLIENT_CA = create_ca(now=NOW, common_name="client-ca")


@pytest.fixture
async def port(tmp_path: Path) -> AsyncIterator[int]:
    serving = issue_serving_cert(
        CA, namespace="queuescope-system", service="queuescope-visibility", now=NOW
    )
    write_certified_key(serving, tmp_path / "tls.crt", tmp_path / "tls.key")
    # Client certificates are optional on our listener; kube-apiserver sends none here.
    listener = ListenerTLS(load_pair(tmp_path), CLIENT_CA.cert_pem)
    async with running_server(app_for(), listener) as bound:
        yield bound


def _post(port: int, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
    connection = TLSConnection(port, client_context(CA), SERVICE_SAN)
    try:
        connection.request(
            "POST", f"{path}?timeout=10s", body=body, headers={"Content-Type": "application/json"}
        )
        response: http.client.HTTPResponse = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


async def test_a_job_is_suspended_over_tls_without_credentials(port: int) -> None:
    status, doc = await in_thread(lambda: _post(port, "/mutate-job", review(job(suspend=False))))
    assert status == 200
    patch = json.loads(base64.b64decode(doc["response"]["patch"]))
    assert patch == [{"op": "add", "path": "/spec/suspend", "value": True}]


async def test_a_denial_over_tls(port: int) -> None:
    bad = job({"kueue.x-k8s.io/queue-name": "Bad_Queue"})
    status, doc = await in_thread(lambda: _post(port, "/validate", review(bad)))
    assert status == 200
    assert doc["response"]["allowed"] is False
    assert doc["response"]["status"]["message"].startswith(
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "Bad_Queue"'
    )


async def test_a_malformed_review_over_tls_is_400(port: int) -> None:
    status, doc = await in_thread(lambda: _post(port, "/validate", b"not json"))
    assert status == 400
    assert doc["kind"] == "Status" and doc["code"] == 400
