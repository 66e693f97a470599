"""The `pod` integration's admission through the app (docs/cluster.md#plain-pods): a
managed Pod is held behind the gate with the label, role hash and finalizer, Kueue's
rules for it and for pod groups (docs/cluster.md#pod-groups), and nothing at all while
the integration is off."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scheduler.api.integrations import NO_INTEGRATIONS, PLAIN_PODS, Integrations
from tests.unit.test_webhook_rules import review
from tests.unit.visibility_server.http.support import app_for, client
from tests.unit.visibility_server.webhooks.test_webhook_admission import apply_patch

GATE = {"name": "kueue.x-k8s.io/admission"}
FINALIZER = "kueue.x-k8s.io/managed"


def pod(**labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "team",
            "labels": {"kueue.x-k8s.io/queue-name": "main", **labels},
        },
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }


DEPLOYMENTS_ONLY = Integrations(deployments=True)


async def post(path: str, body: bytes, *, pods: Integrations = PLAIN_PODS) -> dict[str, Any]:
    async with client(app_for(integrations=pods), headers={}) as c:
        answer = await c.post(path, content=body)
    assert answer.status_code == 200, answer.text
    response: dict[str, Any] = answer.json()["response"]
    return response


async def test_a_pod_with_a_queue_is_held_behind_the_gate() -> None:
    obj = pod()
    response = await post("/mutate-pod", review(obj))
    assert response["allowed"] is True
    out = apply_patch(obj, response)
    assert out["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true"
    assert out["metadata"]["finalizers"] == [FINALIZER]
    assert out["spec"]["schedulingGates"] == [GATE]


async def test_existing_gates_and_finalizers_are_kept() -> None:
    obj = pod()
    obj["metadata"]["finalizers"] = ["example.com/mine"]
    obj["spec"]["schedulingGates"] = [{"name": "example.com/other"}]
    out = apply_patch(obj, await post("/mutate-pod", review(obj)))
    assert out["metadata"]["finalizers"] == ["example.com/mine", FINALIZER]
    assert out["spec"]["schedulingGates"] == [{"name": "example.com/other"}, GATE]
    # Already held: nothing to add.
    again = await post("/mutate-pod", review(out))
    assert "patch" not in again and again["allowed"] is True


@pytest.mark.parametrize(
    "change",
    ["integration off", "only Deployments' Pods", "empty queue name", "a Job's Pod", "an update"],
)
async def test_pods_left_unchanged(change: str) -> None:
    obj, operation, pods = pod(), "CREATE", PLAIN_PODS
    if change == "integration off":
        pods = NO_INTEGRATIONS
    elif change == "only Deployments' Pods":
        pods = DEPLOYMENTS_ONLY
    elif change == "empty queue name":
        obj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = ""
    elif change == "a Job's Pod":
        obj["metadata"]["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}
        ]
    else:
        operation = "UPDATE"
    old = copy.deepcopy(obj) if operation == "UPDATE" else None
    response = await post("/mutate-pod", review(obj, operation, old), pods=pods)
    assert response == {"uid": "0b7f6e2a-rules", "allowed": True}


@pytest.mark.parametrize("pods", [DEPLOYMENTS_ONLY, PLAIN_PODS], ids=["deployment", "pod"])
async def test_a_deployments_pod_is_held_without_a_finalizer(pods: Integrations) -> None:
    """Its ReplicaSet replaces it once deleted: nothing to hold it for (as in Kueue)."""
    obj = pod(**{"kueue.x-k8s.io/managed": "true"})
    obj["metadata"]["annotations"] = {"kueue.x-k8s.io/pod-suspending-parent": "deployment"}
    out = apply_patch(obj, await post("/mutate-pod", review(obj), pods=pods))
    assert out["spec"]["schedulingGates"] == [GATE]
    assert "finalizers" not in out["metadata"]
    assert out["metadata"]["labels"] == obj["metadata"]["labels"]
    # Kueue's rules hold for it too.
    obj["metadata"]["labels"]["kueue.x-k8s.io/managed"] = "yes"
    assert causes(await post("/validate", review(obj), pods=pods)) == [
        "metadata.labels[kueue.x-k8s.io/managed]: Forbidden: managed label value can only be 'true'"
    ]
    assert (await post("/validate", review(obj), pods=NO_INTEGRATIONS))["allowed"] is True


async def test_a_job_sent_to_the_pod_path_is_a_bad_request() -> None:
    body = review({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}})
    async with client(app_for(integrations=PLAIN_PODS), headers={}) as c:
        answer = await c.post("/mutate-pod", content=body)
    assert answer.status_code == 400
    assert "only v1 Pods are mutated here" in answer.json()["message"]


# -- validation -----------------------------------------------------------------------
def causes(response: dict[str, Any]) -> list[str]:
    assert response["allowed"] is False and response["status"]["code"] == 403
    return [f"{c['field']}: {c['message']}" for c in response["status"]["details"]["causes"]]


GROUP = "kueue.x-k8s.io/pod-group-name"
COUNT = "kueue.x-k8s.io/pod-group-total-count"
DETAIL = f"both the '{COUNT}' annotation and the '{GROUP}' label should be set"


def group_pod(name: str | None = "g", count: str | None = "2") -> dict[str, Any]:
    obj = pod(**({GROUP: name} if name is not None else {}))
    obj["metadata"]["annotations"] = {COUNT: count} if count is not None else {}
    return obj


async def test_a_well_formed_group_pod_is_admitted() -> None:
    assert (await post("/validate", review(group_pod())))["allowed"] is True
    # The name may be an annotation too (Kueue's WorkloadIdentifierAnnotations, on).
    obj = group_pod(name=None)
    obj["metadata"]["annotations"][GROUP] = "g"
    assert (await post("/validate", review(obj)))["allowed"] is True


@pytest.mark.parametrize(
    ("name", "count", "expected"),
    [
        ("g", None, f"metadata.annotations[{COUNT}]: Required value: {DETAIL}"),
        (None, "2", f"metadata.labels[{GROUP}]: Required value: {DETAIL}"),
        (
            "g",
            "two",
            f'metadata.annotations[{COUNT}]: Invalid value: "two": '
            'strconv.Atoi: parsing "two": invalid syntax',
        ),
        (
            "g",
            "0",
            f'metadata.annotations[{COUNT}]: Invalid value: "0": incorrect annotation value '
            f"'{COUNT}=0': group total count should be greater than zero",
        ),
        ("G_1", "2", f'metadata.labels[{GROUP}]: Invalid value: "G_1": a lowercase RFC 1123'),
    ],
    ids=["no count", "no name", "count not a number", "count zero", "name not a subdomain"],
)
async def test_kueues_rules_for_a_groups_keys(
    name: str | None, count: str | None, expected: str
) -> None:
    (found,) = causes(await post("/validate", review(group_pod(name, count))))
    assert found.startswith(expected)
    # Off, Kueue's webhook does nothing: allowed.
    answer = await post("/validate", review(group_pod(name, count)), pods=NO_INTEGRATIONS)
    assert answer["allowed"] is True


async def test_a_pods_group_is_fixed_and_unretriable_stays_so() -> None:
    stored = group_pod()
    moved = group_pod("h")
    assert causes(await post("/validate", review(moved, "UPDATE", stored))) == [
        f'metadata.labels[{GROUP}]: Invalid value: "h": field is immutable'
    ]
    stored["metadata"]["annotations"]["kueue.x-k8s.io/retriable-in-group"] = "false"
    retried = group_pod()
    assert causes(await post("/validate", review(retried, "UPDATE", stored))) == [
        "metadata.annotations[kueue.x-k8s.io/retriable-in-group]: Forbidden: "
        "unretriable pod group can't be converted to retriable"
    ]
    # Any other change is allowed; so is joining a group while gated.
    relabelled = copy.deepcopy(stored)
    relabelled["metadata"]["labels"]["team"] = "a"
    assert (await post("/validate", review(relabelled, "UPDATE", stored)))["allowed"] is True
    assert (await post("/validate", review(group_pod(), "UPDATE", pod())))["allowed"] is True


async def test_every_managed_pod_gets_its_role_hash() -> None:
    """Kueue's webhook names each managed Pod's role; equal shapes, equal roles."""
    one, two = group_pod(), group_pod()
    two["metadata"]["name"] = "other"
    two["spec"]["containers"][0]["image"] = "y"  # not part of the shape
    hashes = []
    for obj in (one, two, pod()):
        out = apply_patch(obj, await post("/mutate-pod", review(obj)))
        hashes.append(out["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"])
    assert len(set(hashes)) == 1 and len(hashes[0]) == 8
    wider = group_pod()
    wider["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "2"}}
    out = apply_patch(wider, await post("/mutate-pod", review(wider)))
    assert out["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] != hashes[0]


async def test_kueues_rules_for_a_managed_pod() -> None:
    bad = pod(**{"kueue.x-k8s.io/managed": "yes"})
    bad["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "Not_A_Name"
    found = causes(await post("/validate", review(bad)))
    assert found[-1] == (
        "metadata.labels[kueue.x-k8s.io/managed]: Forbidden: managed label value can only be 'true'"
    )
    assert found[0].startswith(
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "Not_A_Name"'
    )


async def test_the_queue_name_is_fixed_once_past_the_gate() -> None:
    gated = pod(**{"kueue.x-k8s.io/managed": "true"})
    gated["spec"]["schedulingGates"] = [GATE]
    moved = copy.deepcopy(gated)
    moved["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "other"
    # Behind the gate it may move.
    assert (await post("/validate", review(moved, "UPDATE", gated)))["allowed"] is True
    running, moved_running = copy.deepcopy(gated), copy.deepcopy(moved)
    del running["spec"]["schedulingGates"], moved_running["spec"]["schedulingGates"]
    found = causes(await post("/validate", review(moved_running, "UPDATE", running)))
    assert found == [
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "other": field is immutable'
    ]
    # Ended: Kueue counts it as suspended again.
    moved_running["status"] = {"phase": "Succeeded"}
    assert (await post("/validate", review(moved_running, "UPDATE", running)))["allowed"] is True
    # Being deleted: always allowed (finalizers must go).
    running["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    del moved_running["status"]
    assert (await post("/validate", review(moved_running, "UPDATE", running)))["allowed"] is True
