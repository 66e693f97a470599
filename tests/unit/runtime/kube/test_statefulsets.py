"""StatefulSets on the in-memory API server, a real engine and the real status writer
(docs/cluster.md#statefulsets): the prebuilt Workload made from the StatefulSet, its
Pods marked into its group and started on admission through the group path, the hold
on scale to zero and its lifting, the queue followed."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from scheduler.api.integrations import Integrations
from scheduler.api.plain_pod import ADMISSION_GATE, MANAGED_LABEL
from scheduler.kubeapi.errors import Json
from scheduler.runtime.commands import SetOnHold
from scheduler.runtime.kube.pod_groups import GROUP_KEY_PREFIX
from scheduler.runtime.kube.pods import PodController
from scheduler.runtime.kube.resources import PODS, STATEFULSETS, WATCHED, WORKLOADS, Resource
from scheduler.runtime.kube.statefulsets import StatefulSetController
from scheduler.runtime.kube.status_writer import WorkloadStatusWriter
from scheduler.runtime.kube.store import KubeStore
from tests.unit.runtime.kube.fakes import (
    Events,
    FakeKube,
    RecordingEngine,
    admit_in_core,
    delivered,
    leading,
    seed_cluster,
)

QUEUE = "kueue.x-k8s.io/queue-name"
SCALED_TO_ZERO = "StatefulSet scaled to zero; workload on hold"  # Kueue's message
PARENT = "kueue.x-k8s.io/pod-suspending-parent"
UID = "5e7a1f00-0000-4000-8000-000000000001"
# Kueue's name for the StatefulSet's Workload, written out: kind, group, name, uid.
WL_NAME = (
    "statefulset-web-" + hashlib.sha1(f"StatefulSet\napps\nweb\n{UID}".encode()).hexdigest()[:5]
)
WL_KEY = f"team/{WL_NAME}"
STS_KEY = "team/web"


def sts(
    replicas: int = 2, *, queue: str = "main", marked: bool = True, generation: int = 1
) -> Json:
    template_meta: Json = {"labels": {"app": "web", QUEUE: queue, MANAGED_LABEL: "true"}}
    if marked:
        template_meta["annotations"] = {PARENT: "statefulset"}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": "web",
            "namespace": "team",
            "uid": UID,
            "generation": generation,
            "labels": {QUEUE: queue},
        },
        "spec": {
            "replicas": replicas,
            "serviceName": "web",
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": template_meta,
                "spec": {
                    "containers": [
                        {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}
                    ]
                },
            },
        },
    }


def sts_pod(index: int, *, owner_uid: str = UID) -> Json:
    """A Pod of the StatefulSet as the Pod webhook leaves it: managed, gated, no
    finalizer, a role hash of its own."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"web-{index}",
            "namespace": "team",
            "labels": {"app": "web", QUEUE: "main", MANAGED_LABEL: "true"},
            "annotations": {PARENT: "statefulset", "kueue.x-k8s.io/role-hash": "0123abcd"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "StatefulSet",
                    "name": "web",
                    "uid": owner_uid,
                    "controller": True,
                }
            ],
        },
        "spec": {
            "schedulingGates": [{"name": ADMISSION_GATE}],
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
        },
        "status": {"phase": "Pending"},
    }


@dataclass
class World:
    fake: FakeKube
    store: KubeStore
    engine: RecordingEngine
    sets: StatefulSetController
    pods: PodController
    writer: WorkloadStatusWriter
    events: Events

    def put(self, obj: Json) -> None:
        resource = STATEFULSETS if obj["kind"] == "StatefulSet" else PODS
        key = f"team/{obj['metadata']['name']}"
        if self.fake.stored(resource, key) is None:
            self.fake.seed(resource, obj)
        else:
            self.fake.server_update(resource, key, obj)
        self.see(resource, key)

    def see(self, resource: Resource, key: str) -> None:
        delivered(self.fake, self.store, resource, key)

    def workload(self) -> Json | None:
        return self.fake.stored(WORKLOADS, WL_KEY)

    async def reconcile(self) -> None:
        """Both controllers, as their queues would run them after the changes (the
        engine having taken what the store fed it)."""
        self.engine.apply_pending()
        await self.sets.reconcile(STS_KEY)
        for pod in list(self.store.items(PODS)):
            self.see(PODS, f"team/{pod['metadata']['name']}")
        await self.pods.reconcile(GROUP_KEY_PREFIX + WL_KEY)

    async def admit(self) -> None:
        self.see(WORKLOADS, WL_KEY)
        assert admit_in_core(self.engine) == [WL_KEY]
        assert await self.writer.write(WL_KEY)
        self.see(WORKLOADS, WL_KEY)


async def world(*objects: Json) -> World:
    fake = FakeKube()
    seed_cluster(fake, workloads=0)
    store, engine, io, events = await leading(fake, (*WATCHED, PODS, STATEFULSETS))
    w = World(
        fake,
        store,
        engine,
        StatefulSetController(io, retry_delay=0.0),
        PodController(io, Integrations(statefulsets=True), retry_delay=0.0),
        WorkloadStatusWriter(io),
        events,
    )
    for obj in objects:
        w.put(obj)
    return w


async def test_the_workload_is_made_from_the_statefulset_before_its_pods() -> None:
    w = await world(sts(2))
    await w.reconcile()
    raw = w.workload()
    assert raw is not None
    meta = raw["metadata"]
    assert meta["labels"] == {"kueue.x-k8s.io/job-uid": UID}
    assert meta["annotations"] == {
        "kueue.x-k8s.io/is-group-workload": "true",
        "kueue.x-k8s.io/job-owner-gvk": "apps/v1, Kind=StatefulSet",
        "kueue.x-k8s.io/job-owner-name": "web",
    }
    # Owned, not controlled, as Kueue's SetOwnerReference leaves it.
    assert meta["ownerReferences"] == [
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": UID}
    ]
    [pod_set] = raw["spec"]["podSets"]
    assert (pod_set["name"], pod_set["count"]) == ("main", 2)
    assert pod_set["template"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1"}}
    assert raw["spec"]["queueName"] == "main"
    assert w.events.reasons() == [("web", "CreatedWorkload", f"Created Workload: {WL_KEY}")]


async def test_an_unmarked_or_empty_statefulset_gets_no_workload() -> None:
    w = await world(sts(2, marked=False))
    await w.reconcile()
    assert w.workload() is None
    w.put(sts(0))
    await w.reconcile()
    assert w.workload() is None


async def test_its_pods_join_the_group_and_start_once_admitted() -> None:
    w = await world(sts(2), sts_pod(0))
    await w.reconcile()
    pod = w.fake.stored(PODS, "team/web-0")
    assert pod is not None
    annotations = pod["metadata"]["annotations"]
    assert annotations["kueue.x-k8s.io/pod-group-name"] == WL_NAME
    assert annotations["kueue.x-k8s.io/prebuilt-workload-name"] == WL_NAME
    assert annotations["kueue.x-k8s.io/pod-group-total-count"] == "2"
    assert annotations["kueue.x-k8s.io/pod-group-fast-admission"] == "true"
    assert annotations["kueue.x-k8s.io/pod-group-serving"] == "true"
    assert annotations["kueue.x-k8s.io/pod-group-pod-index-label"] == "apps.kubernetes.io/pod-index"
    assert annotations["kueue.x-k8s.io/role-hash"] == "main"
    # No Workload of its own: the StatefulSet's is its group's.
    assert [r.key for r in w.store.workloads()] == [WL_KEY]
    assert pod["spec"]["schedulingGates"] == [{"name": ADMISSION_GATE}]  # waits for quota

    await w.admit()
    await w.reconcile()
    started = w.fake.stored(PODS, "team/web-0")
    assert started is not None and not started["spec"].get("schedulingGates")
    # The second Pod, made once the first runs, starts at once.
    w.put(sts_pod(1))
    await w.reconcile()
    second = w.fake.stored(PODS, "team/web-1")
    assert second is not None and not second["spec"].get("schedulingGates")
    raw = w.workload()
    assert raw is not None
    assert [o["name"] for o in raw["metadata"]["ownerReferences"]] == ["web", "web-0", "web-1"]


async def test_a_pod_of_an_earlier_statefulset_of_the_name_is_left_alone() -> None:
    w = await world(sts(2), sts_pod(0, owner_uid="another"))
    await w.reconcile()
    await w.pods.reconcile("team/web-0")  # not a plain Pod either
    pod = w.fake.stored(PODS, "team/web-0")
    assert pod is not None
    assert "kueue.x-k8s.io/pod-group-name" not in pod["metadata"]["annotations"]
    assert [r.key for r in w.store.workloads()] == [WL_KEY]  # and no Workload of its own


async def test_scaled_to_zero_it_is_held_and_scaled_up_the_hold_is_lifted() -> None:
    w = await world(sts(2))
    await w.reconcile()
    await w.admit()
    w.engine.take()
    w.put(sts(0))
    await w.reconcile()
    assert w.engine.take() == [SetOnHold(WL_KEY, SCALED_TO_ZERO)]
    w.engine.apply_pending()
    assert await w.writer.write(WL_KEY)
    w.see(WORKLOADS, WL_KEY)
    raw = w.workload()
    assert raw is not None and not raw["status"].get("admission")
    reserved = next(c for c in raw["status"]["conditions"] if c["type"] == "QuotaReserved")
    assert (reserved["status"], reserved["reason"], reserved["message"]) == (
        "False",
        "OnHold",
        SCALED_TO_ZERO,
    )
    await w.reconcile()
    assert w.engine.take() == []  # held already
    w.put(sts(2))
    await w.reconcile()
    assert w.engine.take() == [SetOnHold(WL_KEY, None)]
    assert admit_in_core(w.engine) == [WL_KEY]


async def test_the_workload_follows_the_queue_while_it_waits() -> None:
    w = await world(sts(2))
    await w.reconcile()
    w.see(WORKLOADS, WL_KEY)
    w.put(sts(2, queue="other"))
    await w.reconcile()
    raw = w.workload()
    assert raw is not None and raw["spec"]["queueName"] == "other"


async def test_scaled_up_from_zero_to_another_count_its_pod_set_follows() -> None:
    """Kueue keeps the old count (its group then finishes `OutOfSync`); ours follows
    the replicas while the Workload holds no quota (docs/cluster.md#statefulsets)."""
    w = await world(sts(2))
    await w.reconcile()
    await w.admit()
    w.put(sts(0, generation=2))
    await w.reconcile()
    w.engine.apply_pending()
    assert await w.writer.write(WL_KEY)
    w.see(WORKLOADS, WL_KEY)
    w.engine.take()
    w.put(sts(3, generation=3))
    await w.reconcile()
    raw = w.workload()
    assert raw is not None
    assert [ps["count"] for ps in raw["spec"]["podSets"]] == [3]
    assert w.engine.take()[-1] == SetOnHold(WL_KEY, None)
    assert (
        "web",
        "UpdatedWorkload",
        f"Updated not matching Workload for suspended job: {WL_KEY}",
    ) in (w.events.reasons())
    assert admit_in_core(w.engine) == [WL_KEY]
    held = w.engine.scheduler.workload(WL_KEY)
    assert held is not None and [ps.count for ps in held.pod_sets] == [3]


async def test_while_it_holds_quota_its_pod_set_keeps_its_count() -> None:
    w = await world(sts(2))
    await w.reconcile()
    await w.admit()
    w.put(sts(3, generation=2))  # through the scale subresource: no webhook
    await w.reconcile()
    raw = w.workload()
    assert raw is not None and [ps["count"] for ps in raw["spec"]["podSets"]] == [2]
