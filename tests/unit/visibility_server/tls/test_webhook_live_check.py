"""`certs verify --kubeconfig` on the admission webhook configurations: each webhook must
call our Service and trust the serving certificate (the same caBundle rule as the
APIServices; docs/operations.md, "Admission webhooks")."""

from __future__ import annotations

import base64
import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from visibility_server.certs import check_live_webhooks, create_ca, issue_serving_cert

NOW = datetime.now(UTC)
CA = create_ca(now=NOW)
OTHER_CA = create_ca(now=NOW, common_name="other")
LEAF = issue_serving_cert(
    CA, namespace="queuescope-system", service="queuescope-visibility", now=NOW
).cert
WEBHOOKS = Path(__file__).resolve().parents[4] / "manifests" / "webhooks"


def live(bundle: bytes | None) -> dict[str, dict[str, Any] | None]:
    """The manifests as kube-apiserver would hold them after the caBundle patch."""
    found: dict[str, dict[str, Any] | None] = {}
    for name in ("mutating.yaml", "validating.yaml"):
        doc = yaml.safe_load((WEBHOOKS / name).read_text())
        for webhook in doc["webhooks"]:
            if bundle is not None:
                webhook["clientConfig"]["caBundle"] = base64.b64encode(bundle).decode()
        found[doc["metadata"]["name"]] = doc
    return found


def test_the_installed_webhooks_trusting_our_ca_pass() -> None:
    found = check_live_webhooks(LEAF, live(CA.cert_pem), now=NOW)
    assert found.errors == [] and found.warnings == []


def test_a_rotation_bundle_passes() -> None:
    found = check_live_webhooks(LEAF, live(OTHER_CA.cert_pem + CA.cert_pem), now=NOW)
    assert found.ok


def test_another_ca_fails_for_every_webhook() -> None:
    found = check_live_webhooks(LEAF, live(OTHER_CA.cert_pem), now=NOW)
    assert len(found.errors) == 15  # every webhook of both configurations
    assert all("does not validate tls.crt" in error for error in found.errors)
    assert any(
        "webhook vjob.queuescope.io of ValidatingWebhookConfiguration" in e for e in found.errors
    )


def test_no_bundle_fails() -> None:
    found = check_live_webhooks(LEAF, live(None), now=NOW)
    assert len(found.errors) == 15  # every webhook of both configurations
    assert all("has no caBundle" in error for error in found.errors)


def test_missing_configurations_and_webhooks_are_warnings() -> None:
    configs = live(CA.cert_pem)
    configs["queuescope-mutating"] = None
    validating = copy.deepcopy(configs["queuescope-validating"])
    assert validating is not None
    validating["webhooks"] = validating["webhooks"][:1]
    configs["queuescope-validating"] = validating
    found = check_live_webhooks(LEAF, configs, now=NOW)
    assert found.ok
    assert found.warnings == [
        "MutatingWebhookConfiguration queuescope-mutating does not exist: Jobs are not stored "
        "suspended and invalid Kueue objects are accepted (apply manifests/webhooks)",
        "webhook vjob.queuescope.io of ValidatingWebhookConfiguration queuescope-validating "
        "does not exist",
        "webhook vpod.queuescope.io of ValidatingWebhookConfiguration queuescope-validating "
        "does not exist",
        "webhook vdeployment.queuescope.io of ValidatingWebhookConfiguration "
        "queuescope-validating does not exist",
        "webhook vstatefulset.queuescope.io of ValidatingWebhookConfiguration "
        "queuescope-validating does not exist",
        "webhook vjobset.queuescope.io of ValidatingWebhookConfiguration "
        "queuescope-validating does not exist",
    ]


def test_a_webhook_calling_another_service_fails() -> None:
    configs = live(CA.cert_pem)
    validating = configs["queuescope-validating"]
    assert validating is not None
    validating["webhooks"][0]["clientConfig"]["service"]["name"] = "kueue-webhook-service"
    found = check_live_webhooks(LEAF, configs, now=NOW)
    assert found.errors == [
        "webhook vkueue.queuescope.io of ValidatingWebhookConfiguration queuescope-validating "
        "calls Service queuescope-system/kueue-webhook-service, not "
        "queuescope-system/queuescope-visibility"
    ]
