"""The `deployment` integration's admission through the app (docs/cluster.md#deployments):
the pod template of a Deployment that names a LocalQueue is marked so that its Pods are
queued, the `default` LocalQueue on creation, Kueue's update rules, and nothing at all
while the integration is off."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scheduler.api.integrations import NO_INTEGRATIONS, Integrations
from tests.unit.test_webhook_rules import review
from tests.unit.visibility_server.http.support import Holder, app_for, client, make_snapshot
from tests.unit.visibility_server.webhooks.test_webhook_admission import apply_patch

QUEUE = "kueue.x-k8s.io/queue-name"
PRIORITY = "kueue.x-k8s.io/priority-class"
MANAGED = "kueue.x-k8s.io/managed"
PARENT = "kueue.x-k8s.io/pod-suspending-parent"
DEPLOYMENTS = Integrations(deployments=True)
NS = "serving"


def deployment(**labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": NS, "labels": {"app": "web", **labels}},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }


def with_default_queue(*, synced: bool = True) -> Holder:
    return Holder(make_snapshot({}, {(NS, "default"): "cq-a"}, synced=synced))


async def answer(
    path: str,
    body: bytes,
    *,
    integrations: Integrations = DEPLOYMENTS,
    holder: Holder | None = None,
) -> Any:
    app = app_for(holder, integrations=integrations)
    async with client(app, headers={}) as c:
        return await c.post(path, content=body)


async def post(path: str, body: bytes, **kwargs: Any) -> dict[str, Any]:
    reply = await answer(path, body, **kwargs)
    assert reply.status_code == 200, reply.text
    response: dict[str, Any] = reply.json()["response"]
    assert response["uid"] == "0b7f6e2a-rules"
    return response


def template(obj: dict[str, Any]) -> dict[str, Any]:
    metadata: dict[str, Any] = obj["spec"]["template"]["metadata"]
    return metadata


# -- mutation -------------------------------------------------------------------------
@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
async def test_the_pod_template_of_a_queued_deployment_is_marked(operation: str) -> None:
    obj = deployment(**{QUEUE: "user-queue", PRIORITY: "high"})
    old = copy.deepcopy(obj) if operation == "UPDATE" else None
    response = await post("/mutate-deployment", review(obj, operation, old))
    assert response["allowed"] is True
    out = apply_patch(obj, response)
    assert template(out)["labels"] == {
        "app": "web",
        MANAGED: "true",
        QUEUE: "user-queue",
        PRIORITY: "high",
    }
    assert template(out)["annotations"] == {PARENT: "deployment"}
    assert out["metadata"] == obj["metadata"]
    # Marked already: nothing to change.
    again = await post("/mutate-deployment", review(out, operation, old))
    assert again == {"uid": "0b7f6e2a-rules", "allowed": True}


async def test_a_template_without_metadata_gets_it_whole() -> None:
    obj = deployment(**{QUEUE: "user-queue"})
    del obj["spec"]["template"]["metadata"]
    out = apply_patch(obj, await post("/mutate-deployment", review(obj)))
    assert template(out) == {
        "labels": {MANAGED: "true", QUEUE: "user-queue"},
        "annotations": {PARENT: "deployment"},
    }


async def test_a_new_queue_name_is_carried_to_the_template() -> None:
    marked = apply_patch(
        deployment(**{QUEUE: "a"}),
        await post("/mutate-deployment", review(deployment(**{QUEUE: "a"}))),
    )
    moved = copy.deepcopy(marked)
    moved["metadata"]["labels"][QUEUE] = "b"
    out = apply_patch(moved, await post("/mutate-deployment", review(moved, "UPDATE", marked)))
    assert template(out)["labels"][QUEUE] == "b"


async def test_the_default_local_queue_is_named_on_creation_only() -> None:
    obj = deployment()
    out = apply_patch(
        obj, await post("/mutate-deployment", review(obj), holder=with_default_queue())
    )
    assert out["metadata"]["labels"][QUEUE] == "default"
    assert template(out)["labels"][QUEUE] == "default"
    assert template(out)["annotations"] == {PARENT: "deployment"}
    # An existing Deployment is not pulled into the queue by an update.
    update = await post(
        "/mutate-deployment", review(obj, "UPDATE", copy.deepcopy(obj)), holder=with_default_queue()
    )
    assert update == {"uid": "0b7f6e2a-rules", "allowed": True}
    # No `default` LocalQueue: left alone.
    assert await post("/mutate-deployment", review(obj)) == {
        "uid": "0b7f6e2a-rules",
        "allowed": True,
    }


async def test_before_the_sync_the_defaulting_is_503() -> None:
    unsynced = with_default_queue(synced=False)
    reply = await answer("/mutate-deployment", review(deployment()), holder=unsynced)
    assert reply.status_code == 503
    assert "cannot default the LocalQueue yet" in reply.json()["message"]
    # A Deployment that names its queue needs no LocalQueue to be read.
    named = deployment(**{QUEUE: "user-queue"})
    assert (await post("/mutate-deployment", review(named), holder=unsynced))["allowed"] is True


@pytest.mark.parametrize("change", ["integration off", "being deleted"])
async def test_deployments_left_unchanged(change: str) -> None:
    obj, integrations = deployment(**{QUEUE: "user-queue"}), DEPLOYMENTS
    if change == "integration off":
        integrations = Integrations(plain=True)
    else:
        obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    response = await post(
        "/mutate-deployment", review(obj, "UPDATE", obj), integrations=integrations
    )
    assert response == {"uid": "0b7f6e2a-rules", "allowed": True}


async def test_other_kinds_and_templateless_deployments_are_bad_requests() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}}
    reply = await answer("/mutate-deployment", review(job))
    assert reply.status_code == 400
    assert "only apps/v1 Deployments are mutated here" in reply.json()["message"]
    obj = deployment(**{QUEUE: "user-queue"})
    del obj["spec"]["template"]
    reply = await answer("/mutate-deployment", review(obj))
    assert reply.status_code == 400
    assert "a Deployment needs a pod template" in reply.json()["message"]


# -- validation -----------------------------------------------------------------------
def causes(response: dict[str, Any]) -> list[str]:
    assert response["allowed"] is False and response["status"]["code"] == 403
    return [f"{c['field']}: {c['message']}" for c in response["status"]["details"]["causes"]]


def running(obj: dict[str, Any], ready: int) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["status"] = {"replicas": 3, "readyReplicas": ready}
    return out


async def test_the_queue_name_must_be_a_name() -> None:
    bad = deployment(**{QUEUE: "Not_A_Name"})
    found = causes(await post("/validate", review(bad)))
    assert len(found) == 1
    assert found[0].startswith(
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "Not_A_Name"'
    )
    assert (await post("/validate", review(bad), integrations=NO_INTEGRATIONS))["allowed"]


async def test_the_queue_moves_only_while_no_replica_is_ready() -> None:
    old = deployment(**{QUEUE: "a"})
    moved = deployment(**{QUEUE: "b"})
    assert (await post("/validate", review(moved, "UPDATE", running(old, 0))))["allowed"] is True
    assert causes(await post("/validate", review(moved, "UPDATE", running(old, 2)))) == [
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "b": field is immutable'
    ]
    # Never removed, ready replicas or not.
    gone = deployment()
    assert causes(await post("/validate", review(gone, "UPDATE", old))) == [
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "": field is immutable'
    ]


async def test_priority_class_rules() -> None:
    old = deployment(**{QUEUE: "a"})
    added = deployment(**{QUEUE: "a", PRIORITY: "high"})
    assert (await post("/validate", review(added, "UPDATE", old)))["allowed"] is True
    assert causes(await post("/validate", review(added, "UPDATE", running(old, 1)))) == [
        'metadata.labels[kueue.x-k8s.io/priority-class]: Invalid value: "high": '
        "WorkloadPriorityClass cannot be added to a non-suspended workload"
    ]
    assert causes(await post("/validate", review(old, "UPDATE", added))) == [
        'metadata.labels[kueue.x-k8s.io/priority-class]: Invalid value: "": '
        "WorkloadPriorityClass cannot be removed from a workload"
    ]


async def test_an_unqueued_deployment_and_a_deleted_one_pass() -> None:
    plain = deployment()
    assert (await post("/validate", review(plain, "UPDATE", plain)))["allowed"] is True
    old = running(deployment(**{QUEUE: "a"}), 3)
    old["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert (await post("/validate", review(deployment(), "UPDATE", old)))["allowed"] is True
