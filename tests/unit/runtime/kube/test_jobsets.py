"""The `jobset.x-k8s.io/jobset` integration on the in-memory API server, a real engine and
the real status writer (docs/cluster.md#jobsets): one Workload of one pod set per
replicated Job, owned by the JobSet and made from the whole object; the placement
written into every replicated Job's pod template when admitted and taken back after an
eviction; PodsReady, reclaimable Pods and Finish from the JobSet's status; its Jobs left
to it; and a cluster without JobSet's CRD still syncs."""

from __future__ import annotations

import copy
from dataclasses import dataclass

from scheduler.api.integrations import Integrations
from scheduler.api.job import JOB_UID_LABEL
from scheduler.kubeapi.errors import Json
from scheduler.runtime.commands import Finish, PodsReady, SetReclaimable
from scheduler.runtime.kube.jobs import JobController
from scheduler.runtime.kube.jobsets import JobSetController
from scheduler.runtime.kube.resources import (
    JOBS,
    JOBSETS,
    RESOURCE_FLAVORS,
    WATCHED,
    WORKLOADS,
    Resource,
)
from scheduler.runtime.kube.status_writer import WorkloadStatusWriter
from scheduler.runtime.kube.store import KubeStore
from tests.unit.runtime.kube.fakes import (
    Events,
    FakeKube,
    RecordingEngine,
    admit_in_core,
    condition,
    delivered,
    leading,
    seed_cluster,
    status_error,
    synced_store,
)
from tests.unit.runtime.support import job

KEY = "team/train"
PATH = JOBSETS.item("train", "team")
GPU_TOLERATION = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}


def replicated(name: str, replicas: int, parallelism: int) -> Json:
    pod_template = copy.deepcopy(job("team", name, None)["spec"]["template"])
    pod_template["metadata"] = {"labels": {"role": name}}
    return {
        "name": name,
        "replicas": replicas,
        "template": {"spec": {"parallelism": parallelism, "template": pod_template}},
    }


def jobset(*, suspend: bool) -> Json:
    return {
        "apiVersion": JOBSETS.api_version,
        "kind": "JobSet",
        "metadata": {
            "name": "train",
            "namespace": "team",
            "labels": {"kueue.x-k8s.io/queue-name": "main"},
        },
        "spec": {
            "suspend": suspend,
            "replicatedJobs": [replicated("workers", 2, 1), replicated("driver", 1, 1)],
        },
    }


@dataclass
class World:
    fake: FakeKube
    store: KubeStore
    engine: RecordingEngine
    jobsets: JobSetController
    jobs: JobController
    writer: WorkloadStatusWriter
    events: Events

    def see(self, resource: Resource, key: str) -> Json:
        return delivered(self.fake, self.store, resource, key)

    def workload_key(self) -> str:
        [wl] = list(self.store.workloads())
        return wl.key

    def jobset(self) -> Json:
        return self.see(JOBSETS, KEY)

    def status(self, **status: object) -> None:
        self.fake.server_update(JOBSETS, KEY, {"status": status})
        self.see(JOBSETS, KEY)

    def patches(self) -> list[Json]:
        return [body for method, path, body in self.fake.writes("PATCH") if path == PATH]

    async def admit(self) -> str:
        key = self.workload_key()
        assert admit_in_core(self.engine) == [key]
        assert await self.writer.write(key)
        self.see(WORKLOADS, key)
        return key


async def world(*, suspend: bool = False) -> World:
    fake = FakeKube()
    seed_cluster(fake, workloads=0)
    fake.server_update(
        RESOURCE_FLAVORS,
        "default",
        {"spec": {"nodeLabels": {"pool": "a"}, "tolerations": [GPU_TOLERATION]}},
    )
    store, engine, io, events = await leading(fake, (*WATCHED, JOBSETS))
    w = World(
        fake,
        store,
        engine,
        JobSetController(io, retry_delay=0.0),
        JobController(io, retry_delay=0.0, integrations=Integrations(jobsets=True)),
        WorkloadStatusWriter(io),
        events,
    )
    fake.seed(JOBSETS, jobset(suspend=suspend))
    w.see(JOBSETS, KEY)
    return w


async def started() -> tuple[World, str]:
    """A JobSet whose Workload is admitted and which runs."""
    w = await world()
    await w.jobsets.reconcile(KEY)
    w.jobset()
    key = await w.admit()
    await w.jobsets.reconcile(KEY)
    assert w.jobset()["spec"]["suspend"] is False
    w.engine.apply_pending()
    w.engine.take()
    return w, key


async def test_a_jobset_is_suspended_and_gets_one_workload_of_a_pod_set_per_replicated_job() -> (
    None
):
    w = await world()
    cached = w.store.get(JOBSETS, KEY)
    assert cached is not None
    pod = cached["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert "containers" not in pod.get("spec", {})  # slim: read whole to make the Workload
    await w.jobsets.reconcile(KEY)
    [suspend] = w.patches()
    assert suspend["spec"] == {"suspend": True}
    assert ("GET", PATH) in w.fake.calls
    [(_, path, body)] = w.fake.writes("POST")
    assert path == WORKLOADS.collection("team")
    uid = w.jobset()["metadata"]["uid"]
    assert body["metadata"]["name"].startswith("jobset-train-")
    assert body["metadata"]["labels"] == {JOB_UID_LABEL: uid}
    assert body["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "name": "train",
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert [(p["name"], p["count"]) for p in body["spec"]["podSets"]] == [
        ("workers", 2),
        ("driver", 1),
    ]
    assert body["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "1"}
    }
    assert ("train", "CreatedWorkload") in [(n, r) for n, r, _ in w.events.reasons()]


async def test_admitted_it_starts_with_each_pod_sets_placement_in_its_template() -> None:
    w, key = await started()
    start = w.patches()[-1]
    assert start["spec"]["suspend"] is False
    # A merge patch replaces a list whole: every replicated Job is sent, read with its
    # resourceVersion as the precondition.
    assert start["metadata"]["resourceVersion"]
    jobs = start["spec"]["replicatedJobs"]
    assert [j["name"] for j in jobs] == ["workers", "driver"]
    for entry in jobs:
        template = entry["template"]["spec"]["template"]
        assert template["spec"]["nodeSelector"] == {"pool": "a"}
        assert template["spec"]["tolerations"] == [GPU_TOLERATION]
        assert template["metadata"]["labels"] == {
            "role": entry["name"],
            "kueue.x-k8s.io/podset": entry["name"],
            "kueue.x-k8s.io/local-queue-name": "main",
            "kueue.x-k8s.io/cluster-queue-name": "cq",
        }
        assert template["spec"]["containers"][0]["name"] == "c"  # the rest kept as it was
    assert ("train", "Started", "Admitted by clusterQueue cq") in w.events.reasons()
    # Started: nothing more to write until its status says something.
    writes = len(w.fake.writes())
    await w.jobsets.reconcile(KEY)
    assert len(w.fake.writes()) == writes
    assert w.workload_key() == key


async def test_pods_ready_and_reclaimable_pods_come_from_the_replicated_jobs_status() -> None:
    w, key = await started()
    w.status(replicatedJobsStatus=[{"name": "workers", "ready": 2}, {"name": "driver", "ready": 0}])
    await w.jobsets.reconcile(KEY)
    assert w.engine.take() == []  # 2 of its 3 replicas ready
    w.status(
        replicatedJobsStatus=[
            {"name": "workers", "ready": 1, "succeeded": 1},
            {"name": "driver", "ready": 1},
        ]
    )
    await w.jobsets.reconcile(KEY)
    assert w.engine.take() == [PodsReady(key), SetReclaimable(key, (("workers", 1),))]


async def test_evicted_it_is_suspended_then_its_templates_are_restored() -> None:
    w, key = await started()
    # The leader evicts (here: the Workload is deactivated) and writes it.
    w.fake.server_update(WORKLOADS, key, {"spec": {"active": False}})
    w.see(WORKLOADS, key)
    w.engine.apply_pending()
    assert await w.writer.write(key)
    await w.jobsets.reconcile(KEY)
    # Step one: only suspend (JobSet's webhook lets the templates change once it is).
    stop = w.patches()[-1]
    assert stop["spec"] == {"suspend": True}
    stopped = [note for _, reason, note in w.events.reasons() if reason == "Stopped"]
    assert stopped == ["missing workload", "The workload is deactivated"]
    w.jobset()
    await w.jobsets.reconcile(KEY)
    restore = w.patches()[-1]
    for entry in restore["spec"]["replicatedJobs"]:
        template = entry["template"]["spec"]["template"]
        assert "nodeSelector" not in template["spec"]
        assert "tolerations" not in template["spec"]
        assert template["metadata"]["labels"] == {"role": entry["name"]}
    w.jobset()
    writes = len(w.fake.writes())
    await w.jobsets.reconcile(KEY)
    assert len(w.fake.writes()) == writes  # restored: it waits


async def test_completed_it_finishes_its_workload() -> None:
    w, key = await started()
    w.status(conditions=[condition("Completed", "jobset completed successfully")])
    await w.jobsets.reconcile(KEY)
    assert w.engine.take() == [Finish(key, failed=False)]
    w2, key2 = await started()
    w2.status(conditions=[condition("Failed", "jobset failed")])
    await w2.jobsets.reconcile(KEY)
    assert w2.engine.take() == [Finish(key2, failed=True)]


async def test_a_deleted_jobset_takes_its_workload_along() -> None:
    w, key = await started()
    w.fake.server_delete(JOBSETS, KEY)
    await w.store.reflectors[JOBSETS.kind].list_all()  # the store learns of the deletion
    assert KEY in w.jobsets.queue
    await w.jobsets.reconcile(KEY)
    assert ("DELETE", WORKLOADS.item(key.partition("/")[2], "team")) in w.fake.calls


async def test_its_jobs_are_left_to_it() -> None:
    """A Job the JobSet controller made, even one naming a queue, is the JobSet's."""
    w = await world()
    child = job("team", "train-workers-0", "main")
    child["metadata"]["ownerReferences"] = [
        {
            "apiVersion": JOBSETS.api_version,
            "kind": "JobSet",
            "name": "train",
            "uid": "9d3c",
            "controller": True,
        }
    ]
    w.fake.seed(JOBS, child)
    w.see(JOBS, "team/train-workers-0")
    cached = w.store.get(JOBS, "team/train-workers-0")
    assert cached is not None and cached["metadata"]["ownerReferences"][0]["kind"] == "JobSet"
    await w.jobs.reconcile("team/train-workers-0")
    assert w.fake.writes() == []


async def test_a_cluster_without_the_jobset_crd_still_syncs() -> None:
    fake = FakeKube()
    seed_cluster(fake)
    fake.fail("GET", JOBSETS.collection(), status_error(404, "the server could not find it"))
    store, _ = await synced_store(fake, resources=(*WATCHED, JOBSETS))
    assert store.synced.is_set()
    assert store.items(JOBSETS) is not None and list(store.items(JOBSETS)) == []
    assert [w.key for w in store.workloads()] == ["team/w1"]
