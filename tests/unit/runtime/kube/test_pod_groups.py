"""Pod groups on the in-memory API server, a real engine and the real status writer
(docs/cluster.md#pod-groups): one Workload once the whole group exists, named after it
and owned by every Pod, a pod set per role; every Pod started on admission; the group
finished when all succeeded, stopped whole when evicted; excess, failed and deleted
Pods handled as Kueue handles them."""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.api.integrations import PLAIN_PODS
from scheduler.api.plain_pod import (
    ADMISSION_GATE,
    MANAGED_LABEL,
    POD_FINALIZER,
    TERMINATION_TARGET,
)
from scheduler.api.role_hash import ROLE_HASH_ANNOTATION, role_hash
from scheduler.kubeapi.errors import Json
from scheduler.runtime.commands import (
    Finish,
    PodsReady,
    SetReclaimable,
    SetWaitingForReplacements,
)
from scheduler.runtime.kube.placement import POD_SET_LABEL
from scheduler.runtime.kube.pod_groups import GROUP_KEY_PREFIX
from scheduler.runtime.kube.pods import PodController
from scheduler.runtime.kube.resources import PODS, WATCHED, WORKLOADS
from scheduler.runtime.kube.status_writer import WorkloadStatusWriter
from scheduler.runtime.kube.store import KubeStore
from tests.unit.runtime.kube.fakes import (
    Events,
    FakeKube,
    RecordingEngine,
    admit_in_core,
    leading,
    seed_cluster,
)

GROUP = "team/g"


def group_pod(
    name: str, *, cpu: str = "1", count: int = 2, queue: str = "main", **annotations: str
) -> Json:
    """A group Pod as the mutating webhook leaves it: managed, gated, with the finalizer
    and its role hash."""
    spec: Json = {
        "schedulingGates": [{"name": ADMISSION_GATE}],
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team",
            "labels": {
                "kueue.x-k8s.io/queue-name": queue,
                MANAGED_LABEL: "true",
                "kueue.x-k8s.io/pod-group-name": "g",
            },
            "annotations": {
                "kueue.x-k8s.io/pod-group-total-count": str(count),
                ROLE_HASH_ANNOTATION: role_hash(spec),
                **annotations,
            },
            "finalizers": [POD_FINALIZER],
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }


@dataclass
class Group:
    fake: FakeKube
    store: KubeStore
    engine: RecordingEngine
    pods: PodController
    writer: WorkloadStatusWriter
    events: Events

    def add(self, pod: Json) -> None:
        self.fake.seed(PODS, pod)
        self.see(pod["metadata"]["name"])

    def see(self, name: str) -> None:
        """The watch delivers the server's current Pod."""
        obj = self.fake.stored(PODS, f"team/{name}")
        assert obj is not None
        self.store.observe(PODS, obj)

    def pod(self, name: str) -> Json | None:
        return self.fake.stored(PODS, f"team/{name}")

    async def reconcile(self) -> None:
        await self.pods.reconcile(GROUP_KEY_PREFIX + GROUP)

    def workload(self) -> Json | None:
        return self.fake.stored(WORKLOADS, GROUP)

    def refresh_workload(self) -> None:
        obj = self.fake.stored(WORKLOADS, GROUP)
        assert obj is not None
        self.store.observe(WORKLOADS, obj)

    async def admit(self) -> None:
        self.refresh_workload()
        assert admit_in_core(self.engine) == [GROUP]
        assert await self.writer.write(GROUP)
        self.refresh_workload()

    async def write_status(self) -> None:
        """The core's changes applied, the status writer writes, the watch delivers."""
        self.engine.apply_pending()
        assert await self.writer.write(GROUP)
        self.refresh_workload()

    async def server_sets(self, name: str, patch: Json) -> None:
        self.fake.server_update(PODS, f"team/{name}", patch)
        self.see(name)
        await self.reconcile()


async def group(*pods: Json) -> Group:
    fake = FakeKube()
    seed_cluster(fake, workloads=0)
    store, engine, io, events = await leading(fake, (*WATCHED, PODS))
    controller = PodController(io, PLAIN_PODS, retry_delay=0.0)
    g = Group(fake, store, engine, controller, WorkloadStatusWriter(io), events)
    for pod in pods:
        g.add(pod)
    return g


async def running(*pods: Json) -> Group:
    """A group whose Workload is admitted and whose Pods are started."""
    g = await group(*pods)
    await g.reconcile()
    await g.admit()
    await g.reconcile()
    for pod in pods:
        g.see(pod["metadata"]["name"])
    g.engine.apply_pending()
    g.engine.take()
    return g


# -- the Workload ---------------------------------------------------------------------
async def test_no_workload_until_the_whole_group_exists() -> None:
    g = await group(group_pod("a"))
    await g.reconcile()
    assert g.workload() is None
    assert g.events.reasons() == [
        ("a", "ErrWorkloadCompose", "'g' group has fewer runnable pods than expected")
    ]
    g.add(group_pod("b"))
    await g.reconcile()
    raw = g.workload()
    assert raw is not None
    assert raw["metadata"]["annotations"] == {"kueue.x-k8s.io/is-group-workload": "true"}
    assert "labels" not in raw["metadata"] or not raw["metadata"]["labels"]
    owners = raw["metadata"]["ownerReferences"]
    assert [(o["kind"], o["name"]) for o in owners] == [("Pod", "a"), ("Pod", "b")]
    assert all("controller" not in o for o in owners)  # each owns it, none controls it
    [pod_set] = raw["spec"]["podSets"]
    assert pod_set["name"] == group_pod("a")["metadata"]["annotations"][ROLE_HASH_ANNOTATION]
    assert pod_set["count"] == 2
    assert raw["spec"]["queueName"] == "main"
    assert g.events.reasons()[-1] == ("a", "CreatedWorkload", "Created Workload: team/g")


async def test_each_role_is_a_pod_set_sorted_by_its_hash() -> None:
    g = await group(
        group_pod("leader", cpu="2", count=3),
        *(group_pod(f"worker-{i}", count=3) for i in range(2)),
    )
    await g.reconcile()
    raw = g.workload()
    assert raw is not None
    found = [(ps["name"], ps["count"]) for ps in raw["spec"]["podSets"]]
    leader = group_pod("leader", cpu="2")["metadata"]["annotations"][ROLE_HASH_ANNOTATION]
    worker = group_pod("w")["metadata"]["annotations"][ROLE_HASH_ANNOTATION]
    assert found == sorted([(leader, 1), (worker, 2)])


async def test_pods_that_all_ended_get_no_new_workload() -> None:
    g = await group(group_pod("a"), group_pod("b"))
    for name in ("a", "b"):
        g.fake.server_update(PODS, f"team/{name}", {"status": {"phase": "Succeeded"}})
        g.see(name)
    await g.reconcile()
    assert g.workload() is None and g.events.reasons() == []


async def test_a_pod_without_its_role_hash_is_read_whole_for_it() -> None:
    unhashed = group_pod("b")
    del unhashed["metadata"]["annotations"][ROLE_HASH_ANNOTATION]
    g = await group(group_pod("a"), unhashed)
    await g.reconcile()
    raw = g.workload()
    assert raw is not None and [ps["count"] for ps in raw["spec"]["podSets"]] == [2]


async def test_pods_that_disagree_make_no_workload() -> None:
    g = await group(group_pod("a"), group_pod("b", queue="other"))
    await g.reconcile()
    assert g.workload() is None
    assert g.events.reasons() == [
        (
            "a",
            "ErrWorkloadCompose",
            "pods 'a' and 'b' has different queue names: main!=other",
        )
    ]


async def _third_pod_is_excess(g: Group) -> None:
    """A third Pod, the newest, joins a group of two: it is deleted, the Workload stays
    owned by the first two."""
    g.fake.seed(PODS, group_pod("c"))
    g.fake.server_update(
        PODS, "team/c", {"metadata": {"creationTimestamp": "2030-01-01T00:00:00Z"}}
    )
    g.see("c")
    await g.reconcile()
    assert g.pod("c") is None  # let go, then deleted
    assert ("c", "ExcessPodDeleted", "Excess pod deleted") in g.events.reasons()
    raw = g.workload()
    assert raw is not None
    assert [o["name"] for o in raw["metadata"]["ownerReferences"]] == ["a", "b"]


async def test_excess_pods_are_deleted_newest_first() -> None:
    await _third_pod_is_excess(await group(group_pod("a"), group_pod("b")))


async def test_a_pod_beyond_an_admitted_groups_count_is_deleted_not_started() -> None:
    """As Kueue's FindMatchingWorkloads: a group that grew after its Workload was made
    would run the extra Pod on quota nobody reserved."""
    await _third_pod_is_excess(await running(group_pod("a"), group_pod("b")))


async def test_a_name_taken_by_another_workload_is_a_conflict() -> None:
    g = await group(group_pod("a"), group_pod("b"))
    g.fake.seed(
        WORKLOADS,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": "g", "namespace": "team"},
            "spec": {"queueName": "main", "podSets": []},
        },
    )
    g.refresh_workload()
    await g.reconcile()
    [(pod, reason, note)] = g.events.reasons()
    assert (pod, reason) == ("a", "WorkloadNameConflict")
    assert note.startswith('A Workload named "g" already exists but is not a pod group')


# -- running --------------------------------------------------------------------------
async def test_admission_starts_every_pod_on_its_role() -> None:
    g = await running(group_pod("leader", cpu="2"), group_pod("worker"))
    for name, cpu in (("leader", "2"), ("worker", "1")):
        pod = g.pod(name)
        assert pod is not None and pod["spec"].get("schedulingGates") is None
        role = group_pod(name, cpu=cpu)["metadata"]["annotations"][ROLE_HASH_ANNOTATION]
        assert pod["metadata"]["labels"][POD_SET_LABEL] == role
    assert g.pods.stats.started == 2
    # Ready only once both are.
    await g.server_sets("leader", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    assert g.engine.take() == []
    await g.server_sets("worker", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    assert g.engine.take() == [PodsReady(GROUP)]


async def test_the_group_finishes_when_all_its_pods_succeeded() -> None:
    g = await running(group_pod("a"), group_pod("b"))
    await g.server_sets("a", {"status": {"phase": "Succeeded"}})
    assert not [c for c in g.engine.take() if isinstance(c, Finish)]
    await g.server_sets("b", {"status": {"phase": "Succeeded"}})
    assert g.engine.take() == [Finish(GROUP, False, "Succeeded", "Pods succeeded: 2/2.")]
    pod = g.pod("a")
    assert pod is not None and pod["metadata"]["finalizers"] == [POD_FINALIZER]
    await g.write_status()
    await g.reconcile()
    for name in ("a", "b"):
        pod = g.pod(name)
        assert pod is not None and not pod["metadata"].get("finalizers")


async def test_a_succeeded_pods_quota_goes_back_while_the_group_runs() -> None:
    g = await running(group_pod("a"), group_pod("b"))
    role = group_pod("a")["metadata"]["annotations"][ROLE_HASH_ANNOTATION]
    await g.server_sets("a", {"status": {"phase": "Succeeded"}})
    assert g.engine.take() == [SetReclaimable(GROUP, ((role, 1),))]
    g.engine.apply_pending()
    await g.write_status()
    raw = g.workload()
    assert raw is not None and raw["status"]["reclaimablePods"] == [{"name": role, "count": 1}]
    await g.reconcile()
    assert g.engine.take() == []  # said once


async def test_a_serving_groups_pods_keep_their_quota() -> None:
    serving = {"kueue.x-k8s.io/pod-group-serving": "true"}
    g = await running(group_pod("a", **serving), group_pod("b", **serving))
    await g.server_sets("a", {"status": {"phase": "Succeeded"}})
    assert g.engine.take() == []


async def test_an_unretriable_pods_failure_ends_the_group_once_none_runs() -> None:
    g = await running(
        group_pod("a", **{"kueue.x-k8s.io/retriable-in-group": "false"}), group_pod("b")
    )
    await g.server_sets("a", {"status": {"phase": "Failed"}})
    # A retriable group would wait for a's replacement (kept running meanwhile).
    assert g.engine.take() == [SetWaitingForReplacements(GROUP, True)]
    await g.server_sets("b", {"status": {"phase": "Succeeded"}})
    finishes = [c for c in g.engine.take() if isinstance(c, Finish)]
    assert finishes == [Finish(GROUP, False, "Succeeded", "Pods succeeded: 1/2.")]


async def test_a_serving_group_never_finishes() -> None:
    serving = {"kueue.x-k8s.io/pod-group-serving": "true"}
    g = await running(group_pod("a", **serving), group_pod("b", **serving))
    for name in ("a", "b"):
        await g.server_sets(name, {"status": {"phase": "Succeeded"}})
    assert [c for c in g.engine.take() if isinstance(c, Finish)] == []


async def test_a_failed_pod_is_replaced_and_let_go() -> None:
    g = await running(group_pod("a"), group_pod("b"))
    await g.server_sets("b", {"status": {"phase": "Failed"}})
    failed = g.pod("b")
    assert failed is not None and failed["metadata"]["finalizers"] == [POD_FINALIZER]
    g.add(group_pod("b2"))
    await g.reconcile()
    replacement = g.pod("b2")
    assert replacement is not None and replacement["spec"].get("schedulingGates") is None
    failed = g.pod("b")
    assert failed is not None and not failed["metadata"].get("finalizers")


async def test_an_evicted_group_is_stopped_whole_and_its_pods_let_go() -> None:
    g = await running(group_pod("a"), group_pod("b"))
    g.fake.server_update(WORKLOADS, GROUP, {"spec": {"active": False}})
    g.refresh_workload()
    await g.write_status()
    await g.reconcile()
    for name in ("a", "b"):
        pod = g.pod(name)
        assert pod is not None and pod["metadata"]["deletionTimestamp"]
        [condition] = pod["status"]["conditions"]
        assert (condition["type"], condition["reason"]) == (
            TERMINATION_TARGET,
            "WorkloadEvictedDueToDeactivated",
        )
        g.see(name)
    g.engine.take()
    await g.reconcile()
    assert g.pod("a") is None and g.pod("b") is None  # let go: deleted
    # The Workload stays for the garbage collector (its owners are gone), unfinished
    # (a controller that recreates the group's Pods gets it back, below), and out of its
    # queue meanwhile: it misses every Pod, for the eviction's reason.
    assert g.engine.take() == [SetWaitingForReplacements(GROUP, True)]
    g.engine.apply_pending()
    core = g.engine.scheduler.workload(GROUP)
    assert core is not None
    waiting = core.conditions.get("WaitingForReplacementPods")
    assert waiting is not None and (waiting.status, waiting.reason) == ("True", "Deactivated")


async def test_a_group_missing_a_pod_waits_for_its_replacement() -> None:
    g = await group(group_pod("a"), group_pod("b"))
    await g.reconcile()
    g.refresh_workload()
    g.engine.apply_pending()
    g.engine.take()
    g.fake.server_delete(PODS, "team/b")
    g.see("b")
    await g.reconcile()
    assert g.engine.take() == [SetWaitingForReplacements(GROUP, True)]
    g.engine.apply_pending()
    core = g.engine.scheduler.workload(GROUP)
    assert core is not None
    assert core.conditions.is_true("WaitingForReplacementPods")
    assert admit_in_core(g.engine) == []  # not queued while it misses a Pod
    # The replacement joins: it owns the Workload too, and the group is whole again.
    g.add(group_pod("b2"))
    await g.reconcile()
    raw = g.workload()
    assert raw is not None
    assert [o["name"] for o in raw["metadata"]["ownerReferences"]] == ["a", "b", "b2"]
    assert ("g", "OwnerReferencesAdded", "Added 1 owner reference(s)") in g.events.reasons()
    said = [c for c in g.engine.take() if isinstance(c, SetWaitingForReplacements)]
    assert said == [SetWaitingForReplacements(GROUP, False)]
    await g.admit()


async def test_a_waiting_group_follows_its_first_pods_queue() -> None:
    g = await group(group_pod("a"), group_pod("b"))
    await g.reconcile()
    g.refresh_workload()
    g.engine.apply_pending()
    for name in ("a", "b"):
        g.fake.server_update(
            PODS, f"team/{name}", {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "next"}}}
        )
        g.see(name)
    await g.reconcile()
    raw = g.workload()
    assert raw is not None and raw["spec"]["queueName"] == "next"


async def test_a_serving_group_keeps_its_queue() -> None:
    serving = {"kueue.x-k8s.io/pod-group-serving": "true"}
    g = await group(group_pod("a", **serving), group_pod("b", **serving))
    await g.reconcile()
    g.refresh_workload()
    g.engine.apply_pending()
    g.fake.server_update(
        PODS, "team/a", {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "next"}}}
    )
    g.see("a")
    await g.reconcile()
    raw = g.workload()
    assert raw is not None and raw["spec"]["queueName"] == "main"


async def test_a_running_group_pod_without_a_workload_is_stopped() -> None:
    started = group_pod("a")
    started["spec"]["schedulingGates"] = None
    g = await group(started, group_pod("b"))
    await g.reconcile()
    pod = g.pod("a")
    assert pod is not None and pod["metadata"]["deletionTimestamp"]
    assert pod["status"]["conditions"][0]["reason"] == "NoMatchingWorkload"
    assert g.workload() is None
