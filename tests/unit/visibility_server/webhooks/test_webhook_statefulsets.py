"""The `statefulset` integration's admission through the app (docs/cluster.md#statefulsets):
the pod template of a StatefulSet that names a LocalQueue is marked as a Deployment's
is, the `default` LocalQueue on creation, another integration's StatefulSet left alone,
Kueue v0.19.2's update rules with its messages (the labels, the pod template's role
shape, the replicas only to and from zero), the Workload lookup they read, and nothing
at all while the integration is off."""

from __future__ import annotations

import copy
from types import MappingProxyType
from typing import Any

import pytest

from scheduler.api.integrations import NO_INTEGRATIONS, Integrations
from scheduler.api.workload_names import workload_name
from scheduler.core.workload import Admission
from scheduler.runtime.snapshot import Snapshot
from scheduler.runtime.workload_records import RunningWorkload, WorkloadFacts
from tests.unit.test_webhook_rules import review
from tests.unit.visibility_server.http.support import ADMIN, Holder, app_for, client, make_snapshot
from tests.unit.visibility_server.webhooks.test_webhook_admission import apply_patch
from tests.unit.visibility_server.webhooks.test_webhook_deployments import (
    MANAGED,
    NS,
    PARENT,
    PRIORITY,
    QUEUE,
    answer,
    causes,
    post,
    template,
    with_default_queue,
)
from visibility_server.webhooks.default_queue import NotSyncedError
from visibility_server.webhooks.workload_in_use import workload_in_use_lookup

STATEFULSETS = Integrations(statefulsets=True)
UID = "5b1c0c4e-sts"
WORKLOAD = workload_name("StatefulSet", "apps", "db", UID)
ALLOWED = {"uid": "0b7f6e2a-rules", "allowed": True}
SPEC = "spec.template.spec"


def statefulset(replicas: int | None = 3, **labels: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "serviceName": "db",
        "selector": {"matchLabels": {"app": "db"}},
        "template": {
            "metadata": {"labels": {"app": "db"}},
            "spec": {
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]
            },
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": NS, "uid": UID, "labels": {"app": "db", **labels}},
        "spec": spec,
    }


def queued(replicas: int | None = 3, **labels: str) -> dict[str, Any]:
    return statefulset(replicas, **{QUEUE: "user-queue", **labels})


def by_another(obj: dict[str, Any], framework: str = "leaderworkerset") -> dict[str, Any]:
    """`obj` whose template another integration's webhook marked."""
    out = copy.deepcopy(obj)
    out["spec"]["template"]["metadata"]["annotations"] = {PARENT: framework}
    return out


def with_status(obj: dict[str, Any], **status: int) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["status"] = status
    return out


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return spec


async def mutate(body: bytes, **kwargs: Any) -> dict[str, Any]:
    kwargs.setdefault("integrations", STATEFULSETS)
    return await post("/mutate-statefulset", body, **kwargs)


async def validate(body: bytes, **kwargs: Any) -> dict[str, Any]:
    kwargs.setdefault("integrations", STATEFULSETS)
    return await post("/validate", body, **kwargs)


async def denied(new: dict[str, Any], old: dict[str, Any], **kwargs: Any) -> list[str]:
    return causes(await validate(review(new, "UPDATE", old), **kwargs))


async def allowed(new: dict[str, Any], old: dict[str, Any], **kwargs: Any) -> bool:
    return bool((await validate(review(new, "UPDATE", old), **kwargs))["allowed"])


# -- mutation -------------------------------------------------------------------------
@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
async def test_the_pod_template_of_a_queued_statefulset_is_marked(operation: str) -> None:
    obj = queued(**{PRIORITY: "high"})
    old = copy.deepcopy(obj) if operation == "UPDATE" else None
    out = apply_patch(obj, await mutate(review(obj, operation, old)))
    # The template's metadata and nothing else.
    expected = copy.deepcopy(obj)
    labels = {"app": "db", MANAGED: "true", QUEUE: "user-queue", PRIORITY: "high"}
    expected["spec"]["template"]["metadata"] = {
        "labels": labels,
        "annotations": {PARENT: "statefulset"},
    }
    assert out == expected
    # Marked already (its own framework's annotation): nothing to change.
    assert await mutate(review(out, operation, old)) == ALLOWED


async def test_the_default_local_queue_is_named_on_creation_only() -> None:
    obj = statefulset()
    out = apply_patch(obj, await mutate(review(obj), holder=with_default_queue()))
    assert out["metadata"]["labels"][QUEUE] == "default"
    assert template(out)["labels"] == {"app": "db", MANAGED: "true", QUEUE: "default"}
    assert template(out)["annotations"] == {PARENT: "statefulset"}
    update = review(obj, "UPDATE", copy.deepcopy(obj))
    assert await mutate(update, holder=with_default_queue()) == ALLOWED
    assert await mutate(review(obj)) == ALLOWED  # no `default` LocalQueue


async def test_before_the_sync_the_defaulting_is_503() -> None:
    unsynced = with_default_queue(synced=False)
    reply = await answer(
        "/mutate-statefulset", review(statefulset()), integrations=STATEFULSETS, holder=unsynced
    )
    assert reply.status_code == 503
    assert "cannot default the LocalQueue yet" in reply.json()["message"]
    assert (await mutate(review(queued()), holder=unsynced))["allowed"] is True


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
async def test_a_statefulset_another_integration_marked_is_left_alone(operation: str) -> None:
    """Kueue's managedByAnotherFramework: a LeaderWorkerSet's StatefulSet is its own."""
    obj = by_another(queued())
    old = copy.deepcopy(obj) if operation == "UPDATE" else None
    assert await mutate(review(obj, operation, old)) == ALLOWED
    # Nor given the `default` LocalQueue, and the LocalQueues are not even read.
    unqueued = by_another(statefulset())
    for holder in (with_default_queue(), with_default_queue(synced=False)):
        assert await mutate(review(unqueued), holder=holder) == ALLOWED


@pytest.mark.parametrize(
    "integrations",
    [NO_INTEGRATIONS, Integrations(plain=True, deployments=True)],
    ids=["all off", "pod and deployment only"],
)
async def test_statefulsets_left_unchanged_while_the_integration_is_off(
    integrations: Integrations,
) -> None:
    obj = queued()
    assert await mutate(review(obj), integrations=integrations) == ALLOWED
    bad = queued(**{QUEUE: "Not_A_Name"})
    assert (await validate(review(bad), integrations=integrations))["allowed"] is True
    grown = queued(4)
    assert await allowed(grown, obj, integrations=integrations)


async def test_a_statefulset_being_deleted_is_left_unchanged() -> None:
    obj = queued()
    obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert await mutate(review(obj, "UPDATE", obj)) == ALLOWED
    assert await allowed(queued(7), obj)


async def test_other_kinds_and_templateless_statefulsets_are_bad_requests() -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}
    reply = await answer("/mutate-statefulset", review(deployment), integrations=STATEFULSETS)
    assert reply.status_code == 400
    assert "only apps/v1 StatefulSets are mutated here, not Deployment" in reply.json()["message"]
    obj = queued()
    del obj["spec"]["template"]
    reply = await answer("/mutate-statefulset", review(obj), integrations=STATEFULSETS)
    assert reply.status_code == 400
    assert "a StatefulSet needs a pod template" in reply.json()["message"]


async def test_the_route_is_counted_under_its_own_endpoint() -> None:
    async with client(app_for(integrations=STATEFULSETS), headers={}) as c:
        assert (await c.post("/mutate-statefulset", content=b"nope")).status_code == 400
        metrics = (await c.get("/metrics", headers=ADMIN)).text
    expected = 'requests_total{code="400",endpoint="mutating-webhook-statefulset",version="v1"} 1.0'
    assert expected in metrics


async def test_a_statefulsets_pod_is_held_without_a_finalizer() -> None:
    """With `statefulset` alone, the Pods its template marks are managed (Kueue turns
    its Pod integration on for them); its controller replaces a deleted one."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "db-0",
            "namespace": NS,
            "labels": {QUEUE: "user-queue", MANAGED: "true"},
            "annotations": {PARENT: "statefulset"},
        },
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }
    out = apply_patch(pod, await post("/mutate-pod", review(pod), integrations=STATEFULSETS))
    assert out["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}]
    assert "finalizers" not in out["metadata"]


# -- validation: the labels -----------------------------------------------------------
async def test_the_queue_name_must_be_a_name() -> None:
    found = causes(await validate(review(queued(**{QUEUE: "Not_A_Name"}))))
    assert len(found) == 1
    assert found[0].startswith(
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "Not_A_Name": '
        "a lowercase RFC 1123 subdomain"
    )
    assert (await validate(review(queued())))["allowed"] is True


async def test_the_queue_moves_only_while_no_replica_is_ready() -> None:
    old, moved = queued(), statefulset(**{QUEUE: "other"})
    assert await allowed(moved, with_status(old, readyReplicas=0))
    assert await denied(moved, with_status(old, replicas=3, readyReplicas=2)) == [
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "other": field is immutable'
    ]
    # Never removed, ready replicas or not; nor do the other rules hold once it is gone.
    gone = statefulset(5)
    pod_spec(gone)["containers"][0]["resources"]["requests"] = {"cpu": "9"}
    assert await denied(gone, old) == [
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "": field is immutable'
    ]


async def test_priority_class_rules() -> None:
    old, added = queued(), queued(**{PRIORITY: "high"})
    assert await allowed(added, old)
    assert await denied(added, with_status(old, readyReplicas=1)) == [
        'metadata.labels[kueue.x-k8s.io/priority-class]: Invalid value: "high": '
        "WorkloadPriorityClass cannot be added to a non-suspended workload"
    ]
    assert await denied(old, added) == [
        'metadata.labels[kueue.x-k8s.io/priority-class]: Invalid value: "": '
        "WorkloadPriorityClass cannot be removed from a workload"
    ]


async def test_another_integrations_statefulset_breaks_no_rule() -> None:
    bad = by_another(queued(**{QUEUE: "Not_A_Name"}))
    assert (await validate(review(bad)))["allowed"] is True
    old = with_status(by_another(queued()), readyReplicas=3)
    assert await allowed(by_another(statefulset(5, **{QUEUE: "x"})), old)


async def test_an_unqueued_statefulset_passes() -> None:
    plain = statefulset()
    assert (await validate(review(plain)))["allowed"] is True
    assert await allowed(statefulset(5), plain)


@pytest.mark.parametrize("integrations", [STATEFULSETS, NO_INTEGRATIONS], ids=["on", "off"])
async def test_the_offline_rules_are_not_the_webhooks(integrations: Integrations) -> None:
    """A StatefulSet is an input kind offline (docs/simulate.md#statefulsets), checked
    there for its replicas and pod template; here it stays judged by Kueue's rules on
    the raw object, the rest being kube-apiserver's to check."""
    bad = queued(-1)
    pod_spec(bad)["containers"][0]["resources"]["requests"]["cpu"] = "-1"
    bad["spec"]["volumeClaimTemplates"] = [{"metadata": {"name": "data"}}]
    bad["status"] = {"replicas": 0, "availableReplicas": 0}
    assert (await validate(review(bad), integrations=integrations))["allowed"] is True


# -- validation: the pod template's role shape ----------------------------------------
async def test_each_changed_leaf_of_the_role_shape_is_named() -> None:
    old, new = queued(), queued()
    spec = pod_spec(new)
    spec["containers"][0]["resources"]["requests"] = {"cpu": "2", "memory": "1Gi"}
    spec["containers"][0]["ports"] = [{"containerPort": 80, "protocol": "TCP"}]
    spec["nodeSelector"] = {"pool": "gpu"}
    spec["tolerations"] = [{"key": "k", "operator": "Exists"}]
    spec["priority"] = 7
    assert await denied(new, old) == [
        f"{SPEC}.containers[0].ports: Invalid value: "
        '[{"containerPort":80,"protocol":"TCP"}]: field is immutable',
        f'{SPEC}.containers[0].resources.requests: Invalid value: {{"cpu":"2","memory":"1Gi"}}: '
        "field is immutable",
        f'{SPEC}.nodeSelector: Invalid value: {{"pool":"gpu"}}: field is immutable',
        f"{SPEC}.priority: Invalid value: 7: field is immutable",
        f'{SPEC}.tolerations: Invalid value: [{{"key":"k","operator":"Exists"}}]: '
        "field is immutable",
    ]


async def test_a_container_list_of_another_length_is_named_whole() -> None:
    old, new = queued(), queued()
    pod_spec(new)["containers"].append({"name": "side", "image": "y"})
    pod_spec(new)["initContainers"] = [{"name": "init", "image": "z"}]
    assert await denied(new, old) == [
        f"{SPEC}.containers: Invalid value: "
        '[{"ports":null,"resources":{"requests":{"cpu":"1"}}},'
        '{"ports":null,"resources":{"requests":null}}]: field is immutable',
        f"{SPEC}.initContainers: Invalid value: "
        '[{"ports":null,"resources":{"requests":null}}]: field is immutable',
    ]


async def test_removed_values_and_pod_level_requests() -> None:
    old, new = queued(), queued()
    pod_spec(old)["nodeSelector"] = {"pool": "cpu"}
    pod_spec(new)["resources"] = {"requests": {"cpu": "1"}}
    assert await denied(new, old) == [
        f"{SPEC}.nodeSelector: Invalid value: null: field is immutable",
        f'{SPEC}.resources: Invalid value: {{"cpu":"1"}}: field is immutable',
    ]
    # Set on one side only, even empty, is a change; set alike on both is none.
    assert await denied(old, new) == [
        f'{SPEC}.nodeSelector: Invalid value: {{"pool":"cpu"}}: field is immutable',
        f"{SPEC}.resources: Invalid value: null: field is immutable",
    ]
    assert await allowed(new, copy.deepcopy(new))


async def test_what_is_not_the_role_shape_may_change() -> None:
    """Images, commands, env, labels; an empty list for none; a quantity written
    otherwise (apimachinery's semantic equality)."""
    old, new = queued(), queued()
    container = pod_spec(new)["containers"][0]
    container.update(image="x:2", command=["run"], env=[{"name": "A", "value": "1"}])
    container["resources"] = {"requests": {"cpu": "1000m"}, "limits": {"cpu": "2"}}
    container["ports"] = []
    pod_spec(new)["tolerations"] = []
    template(new)["labels"]["version"] = "2"
    assert await allowed(new, old)


async def test_the_role_shape_is_fixed_only_while_managed() -> None:
    old, new = queued(), queued()
    pod_spec(new)["containers"][0]["resources"]["requests"] = {"cpu": "2"}
    assert not await allowed(new, old)
    assert await allowed(by_another(new), old)
    assert await allowed(new, old, integrations=NO_INTEGRATIONS)


# -- validation: the replicas ---------------------------------------------------------
@pytest.mark.parametrize(
    ("before", "after", "message"),
    [
        (3, 4, "spec.replicas: Invalid value: 4: field is immutable"),
        (3, 1, "spec.replicas: Invalid value: 1: field is immutable"),
        (None, 3, "spec.replicas: Invalid value: 3: field is immutable"),  # absent is 1
        (3, None, "spec.replicas: Invalid value: 1: field is immutable"),
        (3, 0, ""),
        (None, 0, ""),
        (0, 0, ""),
        (None, 1, ""),
        (0, 5, ""),  # no Pod left, no Workload
    ],
)
async def test_replicas_change_only_to_and_from_zero(
    before: int | None, after: int | None, message: str
) -> None:
    old, new = queued(before), queued(after)
    if message:
        assert await denied(new, old) == [message]
    else:
        assert await allowed(new, old)


async def test_scaling_up_while_pods_of_the_scale_down_remain() -> None:
    old = with_status(queued(0), replicas=2)
    new = with_status(queued(3), replicas=1)
    assert await denied(new, old) == ["spec.replicas: Forbidden: scaling down is still in progress"]
    # The NEW object's count decides (the old one may lag).
    assert await allowed(with_status(queued(3), replicas=0), old)


def running(namespace: str, name: str) -> RunningWorkload:
    facts = WorkloadFacts("u", "user-queue", 0, 0, (), None, 0, "")
    return RunningWorkload(namespace, name, Admission("cq-a", []), 0, False, facts)


def snapshot_with(
    *, pending: tuple[str, str] | None = None, holding: tuple[str, str] | None = None
) -> Snapshot:
    base = make_snapshot({})
    workloads = MappingProxyType({pending: "cq-a"} if pending else {})
    held = (running(*holding),) if holding else ()
    return Snapshot(
        generation=base.generation,
        synced=True,
        views=base.views,
        local_queues=base.local_queues,
        workloads=workloads,
        running=held,
    )


@pytest.mark.parametrize("state", ["pending", "holding quota"])
async def test_scaling_up_while_the_previous_workload_remains(state: str) -> None:
    key = (NS, WORKLOAD)
    snap = snapshot_with(pending=key) if state == "pending" else snapshot_with(holding=key)
    old, new = queued(0), queued(2)
    assert await denied(new, old, holder=Holder(snap)) == [
        "spec.replicas: Forbidden: workload from previous scale-down is still being deleted"
    ]
    # Another StatefulSet's Workload (another uid, another namespace) is no obstacle.
    other_uid = copy.deepcopy(old)
    other_uid["metadata"]["uid"] = "another"
    assert await allowed(new, other_uid, holder=Holder(snap))
    elsewhere = snapshot_with(pending=("elsewhere", WORKLOAD))
    assert await allowed(new, old, holder=Holder(elsewhere))


async def test_before_the_sync_the_scale_up_rule_is_503() -> None:
    unsynced = Holder(make_snapshot({}, synced=False))
    body = review(queued(2), "UPDATE", queued(0))
    reply = await answer("/validate", body, integrations=STATEFULSETS, holder=unsynced)
    assert reply.status_code == 503
    assert "cannot validate yet: the Workloads are not synced yet" in reply.json()["message"]
    # The other rules do not read the Workloads.
    same = review(queued(), "UPDATE", queued())
    assert (await validate(same, holder=unsynced))["allowed"] is True


async def test_several_broken_rules_are_listed_together() -> None:
    old = with_status(queued(), readyReplicas=1)
    new = statefulset(4, **{QUEUE: "other"})
    pod_spec(new)["containers"][0]["resources"]["requests"] = {"cpu": "2"}
    response = await validate(review(new, "UPDATE", old))
    assert causes(response) == [
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "other": field is immutable',
        f'{SPEC}.containers[0].resources.requests: Invalid value: {{"cpu":"2"}}: '
        "field is immutable",
        "spec.replicas: Invalid value: 4: field is immutable",
    ]
    assert response["status"]["message"].startswith("[metadata.labels[kueue.x-k8s.io/queue-name]")


# -- the Workload lookup --------------------------------------------------------------
def test_the_lookup_finds_pending_and_quota_holding_workloads() -> None:
    in_use = workload_in_use_lookup(snapshot_with(pending=("a", "w1"), holding=("b", "w2")))
    assert in_use("a", "w1") and in_use("b", "w2")
    assert not in_use("a", "w2") and not in_use("b", "w1") and not in_use("a", "gone")


def test_the_lookup_refuses_to_guess_before_the_sync() -> None:
    in_use = workload_in_use_lookup(make_snapshot({}, synced=False))
    with pytest.raises(NotSyncedError, match="the Workloads are not synced yet"):
        in_use("a", "w1")
