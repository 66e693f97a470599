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


# Each StatefulSet webhook is the twin of a Deployment one, each JobSet webhook of a
# Job one: (webhook, twin, its rule's group, version and resource, its mutating path).
TWINS = {
    "mstatefulset.queuescope.io": "mdeployment.queuescope.io",
    "mstatefulset-default-queue.queuescope.io": "mdeployment-default-queue.queuescope.io",
    "vstatefulset.queuescope.io": "vdeployment.queuescope.io",
    "mjobset.queuescope.io": "mjob.queuescope.io",
    "mjobset-default-queue.queuescope.io": "mjob-default-queue.queuescope.io",
    "vjobset.queuescope.io": "vjob.queuescope.io",
}
RULES = {
    "statefulset": ("apps", "v1", "statefulsets", MUTATE_STATEFULSET_PATH),
    "jobset": ("jobset.x-k8s.io", "v1alpha2", "jobsets", MUTATE_JOBSET_PATH),
}


@pytest.mark.parametrize("name", TWINS)
def test_the_statefulset_and_jobset_webhooks_are_twins(name: str) -> None:
    """The same selectors, operations, failure policy and timeout as the Deployment's
    (the Job's); only the resource, the name and (for the mutating ones) the path
    differ."""
    kind = (
        "MutatingWebhookConfiguration" if name.startswith("m") else "ValidatingWebhookConfiguration"
    )
    group, version, resource, path = RULES[
        name[1:].split(".", maxsplit=1)[0].split("-", maxsplit=1)[0]
    ]
    webhooks = _webhooks(kind)
    twin = copy.deepcopy(webhooks[TWINS[name]])
    twin["name"] = name
    twin["rules"][0].update(apiGroups=[group], apiVersions=[version], resources=[resource])
    if kind.startswith("Mutating"):
        twin["clientConfig"]["service"]["path"] = path
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
