"""manifests/webhooks as written (the rendered overlays are test_kustomize.py's, which
needs kubectl): the webhooks the certificate tooling knows by name, each calling a path
the server serves, and the StatefulSet webhooks the twins of the Deployment ones
(docs/cluster.md#statefulsets)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.unit.manifests.support import MANIFESTS, documents
from visibility_server.webhooks.admission import (
    MUTATE_DEPLOYMENT_PATH,
    MUTATE_JOB_PATH,
    MUTATE_JOBSET_PATH,
    MUTATE_POD_PATH,
    MUTATE_STATEFULSET_PATH,
    VALIDATE_PATH,
)
from visibility_server.webhooks.registrations import WEBHOOK_CONFIGURATIONS

ADMISSION_PATHS = {
    VALIDATE_PATH,
    MUTATE_JOB_PATH,
    MUTATE_POD_PATH,
    MUTATE_DEPLOYMENT_PATH,
    MUTATE_STATEFULSET_PATH,
    MUTATE_JOBSET_PATH,
}


def _webhooks(kind: str) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for path in sorted((MANIFESTS / "webhooks").glob("*.yaml")):
        for doc in documents(path):
            if doc["kind"] == kind:
                found.update({w["name"]: w for w in doc["webhooks"]})
    return found


@pytest.mark.parametrize(("kind", "name", "names"), WEBHOOK_CONFIGURATIONS)
def test_the_registrations_name_every_webhook_in_order(
    kind: str, name: str, names: tuple[str, ...]
) -> None:
    assert list(_webhooks(kind)) == list(names), name


@pytest.mark.parametrize("kind", [k for k, _, _ in WEBHOOK_CONFIGURATIONS])
def test_every_webhook_calls_a_served_path(kind: str) -> None:
    for name, webhook in _webhooks(kind).items():
        assert webhook["clientConfig"]["service"]["path"] in ADMISSION_PATHS, name


# The Deployment webhook each StatefulSet one is the twin of.
TWINS = {
    "mstatefulset.queuescope.io": "mdeployment.queuescope.io",
    "mstatefulset-default-queue.queuescope.io": "mdeployment-default-queue.queuescope.io",
    "vstatefulset.queuescope.io": "vdeployment.queuescope.io",
}


@pytest.mark.parametrize("name", TWINS)
def test_the_statefulset_webhooks_are_the_deployment_ones_twins(name: str) -> None:
    """The same selectors, operations, failure policy and timeout; only the resource,
    the name and (for the mutating ones) the path differ."""
    kind = (
        "MutatingWebhookConfiguration" if name.startswith("m") else "ValidatingWebhookConfiguration"
    )
    webhooks = _webhooks(kind)
    twin = copy.deepcopy(webhooks[TWINS[name]])
    twin["name"] = name
    twin["rules"][0]["resources"] = ["statefulsets"]
    if kind.startswith("Mutating"):
        twin["clientConfig"]["service"]["path"] = MUTATE_STATEFULSET_PATH
    assert webhooks[twin["name"]] == twin


def test_the_statefulset_webhooks_split_on_the_queue_label() -> None:
    """Fail for a StatefulSet that names a LocalQueue (create and update); the LocalQueue
    defaulting, on create only, is Ignore with a short timeout."""
    webhooks = _webhooks("MutatingWebhookConfiguration")
    named = webhooks["mstatefulset.queuescope.io"]
    unnamed = webhooks["mstatefulset-default-queue.queuescope.io"]
    expression = named["objectSelector"]["matchExpressions"][0]
    assert expression == {"key": "kueue.x-k8s.io/queue-name", "operator": "Exists"}
    assert named["failurePolicy"] == "Fail"
    assert named["rules"][0]["operations"] == ["CREATE", "UPDATE"]
    assert named["rules"][0]["apiGroups"] == ["apps"]
    assert unnamed["objectSelector"]["matchExpressions"][0]["operator"] == "DoesNotExist"
    assert (unnamed["failurePolicy"], unnamed["timeoutSeconds"]) == ("Ignore", 3)
    assert unnamed["rules"][0]["operations"] == ["CREATE"]
    validating = _webhooks("ValidatingWebhookConfiguration")["vstatefulset.queuescope.io"]
    assert validating["clientConfig"]["service"]["path"] == VALIDATE_PATH
    assert validating["failurePolicy"] == "Fail"


# The Job webhook each JobSet one is the twin of.
JOBSET_TWINS = {
    "mjobset.queuescope.io": "mjob.queuescope.io",
    "mjobset-default-queue.queuescope.io": "mjob-default-queue.queuescope.io",
    "vjobset.queuescope.io": "vjob.queuescope.io",
}


@pytest.mark.parametrize("name", JOBSET_TWINS)
def test_the_jobset_webhooks_are_the_job_ones_twins(name: str) -> None:
    """The same selectors, operations, failure policy and timeout; only the resource (of
    its group and version), the name and (for the mutating ones) the path differ."""
    kind = (
        "MutatingWebhookConfiguration" if name.startswith("m") else "ValidatingWebhookConfiguration"
    )
    webhooks = _webhooks(kind)
    twin = copy.deepcopy(webhooks[JOBSET_TWINS[name]])
    twin["name"] = name
    twin["rules"][0].update(
        apiGroups=["jobset.x-k8s.io"], apiVersions=["v1alpha2"], resources=["jobsets"]
    )
    if kind.startswith("Mutating"):
        twin["clientConfig"]["service"]["path"] = MUTATE_JOBSET_PATH
    assert webhooks[twin["name"]] == twin
