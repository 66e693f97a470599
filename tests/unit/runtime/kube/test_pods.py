"""The `pod` integration on the in-memory API server, a real engine and the real status
writer: the Workload owned by the Pod, the gate lifted with the flavor's placement,
PodsReady, finishing, stopping an evicted Pod, the finalizer released."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from scheduler.api.integrations import PLAIN_PODS, Integrations
from scheduler.api.plain_pod import (
    ADMISSION_GATE,
    MANAGED_LABEL,
    POD_FINALIZER,
    SUSPENDING_PARENT,
    TERMINATION_TARGET,
)
from scheduler.kubeapi.errors import Json
from scheduler.runtime.commands import Finish, PodsReady
from scheduler.runtime.kube.leader_io import LeaderIO
from scheduler.runtime.kube.placement import POD_SET_LABEL
from scheduler.runtime.kube.pods import PodController
from scheduler.runtime.kube.resources import (
    LOCAL_QUEUES,
    PODS,
    RESOURCE_FLAVORS,
    WATCHED,
    WORKLOAD_PRIORITY_CLASSES,
    WORKLOADS,
    Resource,
)
from scheduler.runtime.kube.status_writer import WorkloadStatusWriter
from scheduler.runtime.kube.store import KubeStore
from tests.unit.runtime.kube.fakes import (
    FakeKube,
    FreeBucket,
    RecordingEngine,
    admit_in_core,
    delivered,
    seed_cluster,
    synced_store,
    until,
)
from tests.unit.runtime.support import local_queue

POD_KEY = "team/p"
POD_PATH = PODS.item("p", "team")
GPU_TOLERATION = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}
OWN_TOLERATION = {"key": "mine", "operator": "Exists"}


def pod(name: str = "p", *, cpu: str = "1", priority_class: str = "", parent: str = "") -> Json:
    """A Pod as the mutating webhook leaves it: managed, gated, with the finalizer (none
    if a `parent`'s webhook marked it: a Deployment's Pod)."""
    labels = {"kueue.x-k8s.io/queue-name": "main", MANAGED_LABEL: "true"}
    if priority_class:
        labels["kueue.x-k8s.io/priority-class"] = priority_class
    metadata: Json = {"name": name, "namespace": "team", "labels": labels}
    if parent:
        metadata["annotations"] = {SUSPENDING_PARENT: parent}
    else:
        metadata["finalizers"] = [POD_FINALIZER]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "schedulingGates": [{"name": ADMISSION_GATE}],
            "nodeSelector": {"own": "x"},
            "tolerations": [OWN_TOLERATION],
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
        },
        "status": {"phase": "Pending"},
    }


@dataclass
class Cluster:
    fake: FakeKube
    store: KubeStore
    engine: RecordingEngine
    pods: PodController
    writer: WorkloadStatusWriter

    def refresh(self, resource: Resource, key: str) -> Json:
        """What the watch would deliver next: the server's current object."""
        return delivered(self.fake, self.store, resource, key)

    def pod(self) -> Json:
        obj = self.fake.stored(PODS, POD_KEY)
        assert obj is not None
        return obj

    def workload_key(self) -> str:
        [wl] = list(self.store.workloads())
        return wl.key

    async def admit(self) -> str:
        key = self.workload_key()
        assert admit_in_core(self.engine) == [key]
        assert await self.writer.write(key)
        return key

    async def server_sets(self, patch: Json) -> None:
        """Another party (the kubelet, a user) changes the Pod; the controller looks."""
        self.fake.server_update(PODS, POD_KEY, patch)
        self.refresh(PODS, POD_KEY)
        await self.pods.reconcile(POD_KEY)

    def patches(self) -> list[Json]:
        return [b for m, path, b in self.fake.writes("PATCH") if path == POD_PATH]


async def cluster(integrations: Integrations = PLAIN_PODS, **pod_fields: Any) -> Cluster:
    fake = FakeKube()
    seed_cluster(fake, workloads=0)
    fake.server_update(
        RESOURCE_FLAVORS,
        "default",
        {"spec": {"nodeLabels": {"pool": "a", "zone": "z1"}, "tolerations": [GPU_TOLERATION]}},
    )
    store, engine = await synced_store(fake, resources=(*WATCHED, PODS))
    store.set_leading(True)
    io = LeaderIO(fake.rest, engine, store, FreeBucket())
    controller = PodController(io, integrations, retry_delay=0.0)
    writer = WorkloadStatusWriter(io)
    fake.seed(PODS, pod(**pod_fields))
    c = Cluster(fake, store, engine, controller, writer)
    c.refresh(PODS, POD_KEY)
    return c


async def with_workload() -> tuple[Cluster, str]:
    """A gated Pod whose Workload exists, in the core too; the Workload's key."""
    c = await cluster()
    await c.pods.reconcile(POD_KEY)
    c.engine.apply_pending()
    c.engine.take()
    return c, c.workload_key()


async def started() -> tuple[Cluster, str]:
    """A Pod whose Workload is admitted and whose gate is lifted."""
    c = await cluster()
    await c.pods.reconcile(POD_KEY)
    wl_key = await c.admit()
    await c.pods.reconcile(POD_KEY)
    c.refresh(PODS, POD_KEY)
    assert c.pod()["spec"].get("schedulingGates") is None
    c.engine.apply_pending()
    c.engine.take()
    return c, wl_key


# -- the Workload ---------------------------------------------------------------------
async def test_a_gated_pod_gets_a_workload_it_owns_named_as_kueue_names_it() -> None:
    c = await cluster()
    await c.pods.reconcile(POD_KEY)
    [wl] = list(c.store.workloads())
    uid = c.pod()["metadata"]["uid"]
    assert wl.name.startswith("pod-p-") and len(wl.name) == len("pod-p-") + 5
    owner = wl.owner(PODS)
    assert owner is not None and (owner.name, owner.uid) == ("p", uid)
    raw = c.fake.stored(WORKLOADS, wl.key)
    assert raw is not None
    assert raw["metadata"]["labels"] == {"kueue.x-k8s.io/job-uid": uid}
    [pod_set] = raw["spec"]["podSets"]
    assert (pod_set["name"], pod_set["count"]) == ("main", 1)
    assert pod_set["template"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1"}}
    assert raw["spec"]["queueName"] == "main"
    assert c.pods.stats.workloads_created == 1
    # Seen again: no second Workload.
    await c.pods.reconcile(POD_KEY)
    assert len(list(c.store.workloads())) == 1


async def test_a_missing_priority_class_makes_no_workload_until_it_exists() -> None:
    c = await cluster(priority_class="high")
    await c.pods.reconcile(POD_KEY)
    assert list(c.store.workloads()) == []
    assert c.pods.stats.errors == 1
    wpc = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "high"},
        "value": 100,
    }
    task = asyncio.create_task(c.pods.run())
    try:
        await until(lambda: c.pods.stats.errors == 2)  # run() looked once more: still none
        c.fake.seed(WORKLOAD_PRIORITY_CLASSES, wpc)
        c.refresh(WORKLOAD_PRIORITY_CLASSES, "high")  # the new class brings the Pod back
        await until(lambda: c.pods.stats.workloads_created == 1)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    [wl] = list(c.store.workloads())
    raw = c.fake.stored(WORKLOADS, wl.key)
    assert raw is not None and raw["spec"]["priority"] == 100


async def test_a_pod_without_the_managed_label_is_left_alone() -> None:
    c = await cluster()
    c.fake.server_update(PODS, POD_KEY, {"metadata": {"labels": {MANAGED_LABEL: "false"}}})
    c.refresh(PODS, POD_KEY)
    await c.pods.reconcile(POD_KEY)
    assert list(c.store.workloads()) == [] and c.fake.writes() == []


# -- starting -------------------------------------------------------------------------
async def test_an_admitted_workload_lifts_the_gate_with_the_flavor_placement() -> None:
    c, wl_key = await started()
    ungate = c.patches()[-1]
    assert ungate["metadata"]["resourceVersion"]  # at the version it was judged at
    spec = c.pod()["spec"]
    assert spec["nodeSelector"] == {"own": "x", "pool": "a", "zone": "z1"}
    assert spec["tolerations"] == [OWN_TOLERATION, GPU_TOLERATION]
    labels = c.pod()["metadata"]["labels"]
    assert labels[POD_SET_LABEL] == "main"
    assert labels["kueue.x-k8s.io/local-queue-name"] == "main"
    assert labels["kueue.x-k8s.io/cluster-queue-name"] == "cq"
    assert c.pods.stats.started == 1
    # Ready: the Workload's PodsReady.
    await c.server_sets({"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    assert c.engine.take() == [PodsReady(wl_key)]


async def test_other_gates_stay() -> None:
    c = await cluster()
    c.fake.server_update(
        PODS,
        POD_KEY,
        {"spec": {"schedulingGates": [{"name": ADMISSION_GATE}, {"name": "example.com/other"}]}},
    )
    c.refresh(PODS, POD_KEY)
    await c.pods.reconcile(POD_KEY)
    await c.admit()
    await c.pods.reconcile(POD_KEY)
    assert c.pod()["spec"]["schedulingGates"] == [{"name": "example.com/other"}]


async def test_a_check_update_that_conflicts_finishes_the_workload_failed_to_start() -> None:
    c, key = await with_workload()
    # Admitted, with a check asking for own=y where the Pod says own=x.
    c.fake.server_update(
        WORKLOADS,
        key,
        {
            "status": {
                "admission": {
                    "clusterQueue": "cq",
                    "podSetAssignments": [
                        {"name": "main", "flavors": {"cpu": "default"}, "count": 1}
                    ],
                },
                "conditions": [
                    {
                        "type": "Admitted",
                        "status": "True",
                        "reason": "Admitted",
                        "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ],
                "admissionChecks": [
                    {
                        "name": "check",
                        "state": "Ready",
                        "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                        "podSetUpdates": [{"name": "main", "nodeSelector": {"own": "y"}}],
                    }
                ],
            }
        },
    )
    c.refresh(WORKLOADS, key)
    await c.pods.reconcile(POD_KEY)
    [finish] = [x for x in c.engine.take() if isinstance(x, Finish)]
    assert (finish.reason, finish.failed) == ("FailedToStart", True)
    assert 'sets nodeSelector[own] to "y"' in finish.message
    assert c.pod()["spec"]["schedulingGates"] == [{"name": ADMISSION_GATE}]
    assert c.patches() == []


# -- stopping -------------------------------------------------------------------------
async def test_an_evicted_workload_stops_the_running_pod_with_a_condition_then_a_delete() -> None:
    c, wl_key = await started()
    c.fake.server_update(WORKLOADS, wl_key, {"spec": {"active": False}})
    c.refresh(WORKLOADS, wl_key)
    c.engine.apply_pending()
    assert await c.writer.write(wl_key)
    await c.pods.reconcile(POD_KEY)
    [status_patch] = [
        b for m, p, b in c.fake.writes("PATCH") if p == PODS.item("p", "team", "status")
    ]
    [condition] = status_patch["status"]["conditions"]
    assert condition["type"] == TERMINATION_TARGET
    assert condition["reason"] == "WorkloadEvictedDueToDeactivated"
    [delete] = [b for m, p, b in c.fake.writes("DELETE") if p == POD_PATH]
    assert delete == {"preconditions": {"uid": c.pod()["metadata"]["uid"]}}
    # The finalizer holds it: marked for deletion, the condition beside the kubelet's.
    held = c.pod()
    assert held["metadata"]["deletionTimestamp"]
    assert [x["type"] for x in held["status"]["conditions"]] == [TERMINATION_TARGET]
    assert c.pods.stats.stopped == 1
    # Seen deleting: the Workload is finished as its owner is gone, the Pod let go.
    c.refresh(PODS, POD_KEY)
    c.engine.take()
    await c.pods.reconcile(POD_KEY)
    [finish] = c.engine.take()
    assert finish == Finish(wl_key, False, "OwnerNotFound", "The workload's owner no longer exists")
    assert c.fake.stored(PODS, POD_KEY) is None


async def test_a_gated_pod_of_an_evicted_workload_stays_gated() -> None:
    c = await cluster()
    await c.pods.reconcile(POD_KEY)
    key = c.workload_key()
    c.fake.server_update(WORKLOADS, key, {"spec": {"active": False}})
    c.refresh(WORKLOADS, key)
    await c.pods.reconcile(POD_KEY)
    assert c.fake.writes("DELETE") == [] and c.patches() == []


async def test_a_running_pod_without_a_workload_is_stopped() -> None:
    c = await cluster()
    c.fake.server_update(PODS, POD_KEY, {"spec": {"schedulingGates": None}})
    c.refresh(PODS, POD_KEY)
    await c.pods.reconcile(POD_KEY)
    status = c.pod()["status"]["conditions"][0]
    assert (status["type"], status["reason"]) == (TERMINATION_TARGET, "NoMatchingWorkload")
    assert c.pod()["metadata"]["deletionTimestamp"]


# -- finishing ------------------------------------------------------------------------
@pytest.mark.parametrize(("phase", "failed"), [("Succeeded", False), ("Failed", True)])
async def test_an_ended_pod_finishes_its_workload_then_is_released(
    phase: str, failed: bool
) -> None:
    c, wl_key = await started()
    await c.server_sets({"status": {"phase": phase, "message": "done"}})
    assert c.engine.take() == [Finish(wl_key, failed, phase, "done")]
    # Not released before the Finished condition is written: a crash must not lose it.
    assert c.pod()["metadata"]["finalizers"] == [POD_FINALIZER]
    c.engine.apply_pending()
    assert await c.writer.write(wl_key)
    c.refresh(WORKLOADS, wl_key)
    await c.pods.reconcile(POD_KEY)
    assert c.pod()["metadata"].get("finalizers") is None
    assert c.pods.stats.released == 1
    written = c.fake.stored(WORKLOADS, wl_key)
    assert written is not None
    [finished] = [x for x in written["status"]["conditions"] if x["type"] == "Finished"]
    assert (finished["reason"], finished["message"]) == (phase, "done")
    # Seen again: nothing more.
    before = len(c.fake.writes())
    c.refresh(PODS, POD_KEY)
    await c.pods.reconcile(POD_KEY)
    assert len(c.fake.writes()) == before


async def test_a_pod_deleted_while_gated_finishes_its_workload_and_goes() -> None:
    c, key = await with_workload()
    c.fake.server_delete(PODS, POD_KEY)  # held by the finalizer
    c.refresh(PODS, POD_KEY)
    await c.pods.reconcile(POD_KEY)
    assert c.engine.take() == [
        Finish(key, False, *("OwnerNotFound", "The workload's owner no longer exists"))
    ]
    assert c.fake.stored(PODS, POD_KEY) is None


async def test_a_pod_gone_unseen_finishes_its_workload() -> None:
    c, _ = await with_workload()
    c.fake.server_update(PODS, POD_KEY, {"metadata": {"finalizers": None}})
    c.fake.server_delete(PODS, POD_KEY)
    await c.store.reflectors[PODS.kind].list_all()
    await c.pods.reconcile(POD_KEY)
    [finish] = c.engine.take()
    assert isinstance(finish, Finish) and finish.reason == "OwnerNotFound"


DEPLOYMENTS_ONLY = Integrations(deployments=True)


async def test_with_deployments_alone_a_plain_pod_is_left_alone() -> None:
    """Kueue's Pod controller, on only for Deployments, skips the Pods no parent marked."""
    c = await cluster(DEPLOYMENTS_ONLY)
    await c.pods.reconcile(POD_KEY)
    assert list(c.store.workloads()) == [] and c.fake.writes() == []


@pytest.mark.parametrize("integrations", [DEPLOYMENTS_ONLY, PLAIN_PODS], ids=["deployment", "pod"])
async def test_a_deployments_pod_runs_and_finishes_without_a_finalizer(
    integrations: Integrations,
) -> None:
    c = await cluster(integrations, parent="deployment")
    await c.pods.reconcile(POD_KEY)
    wl_key = await c.admit()
    await c.pods.reconcile(POD_KEY)
    started_pod = c.refresh(PODS, POD_KEY)
    assert started_pod["spec"].get("schedulingGates") is None
    assert started_pod["metadata"]["labels"][POD_SET_LABEL] == "main"
    c.engine.apply_pending()
    c.engine.take()
    # The kubelet evicted it: its Workload finishes all the same.
    await c.server_sets({"status": {"phase": "Failed", "message": "evicted"}})
    assert c.engine.take() == [Finish(wl_key, True, "Failed", "evicted")]
    c.engine.apply_pending()
    assert await c.writer.write(wl_key)
    c.refresh(WORKLOADS, wl_key)
    before = len(c.fake.writes())
    await c.pods.reconcile(POD_KEY)  # finished: nothing to release, nothing to say
    assert len(c.fake.writes()) == before and c.engine.take() == []
    assert c.pods.stats.released == 0


async def test_a_deployments_pod_deleted_finishes_its_workload() -> None:
    """No finalizer holds it: the ReplicaSet's delete removes it at once."""
    c = await cluster(DEPLOYMENTS_ONLY, parent="deployment")
    await c.pods.reconcile(POD_KEY)
    c.engine.apply_pending()
    c.engine.take()
    c.fake.server_delete(PODS, POD_KEY)
    assert c.fake.stored(PODS, POD_KEY) is None
    await c.store.reflectors[PODS.kind].list_all()
    await c.pods.reconcile(POD_KEY)
    [finish] = c.engine.take()
    assert isinstance(finish, Finish) and finish.reason == "OwnerNotFound"


async def test_a_gated_pod_relabelled_moves_its_workload_to_that_queue() -> None:
    c, key = await with_workload()
    c.fake.seed(LOCAL_QUEUES, local_queue("team", "other", "cq"))
    c.refresh(LOCAL_QUEUES, "team/other")
    c.engine.apply_pending()
    await c.server_sets({"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "other"}}})
    moved = c.fake.stored(WORKLOADS, key)
    assert moved is not None and moved["spec"]["queueName"] == "other"
