"""The Job integration on the in-memory API server, a real engine and the real status
writer: the Workload owned by the Job, suspend first and restore the template later,
unsuspend with the flavor's placement, PodsReady, Finish, orphan deletion."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import pytest

from scheduler.api.job import JOB_UID_LABEL, QUEUE_NAME_LABEL
from scheduler.kubeapi.errors import Json
from scheduler.runtime.commands import Finish, PodsReady, SetReclaimable
from scheduler.runtime.kube.events import EventRecorder
from scheduler.runtime.kube.jobs import JobController
from scheduler.runtime.kube.leader_io import LeaderIO
from scheduler.runtime.kube.resources import (
    JOBS,
    LOCAL_QUEUES,
    RESOURCE_FLAVORS,
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
    condition,
    delivered,
    seed_cluster,
    status_error,
    synced_store,
    until,
)
from tests.unit.runtime.support import job, local_queue, workload

JOB_KEY = "team/j"
JOB_PATH = JOBS.item("j", "team")
GPU_TOLERATION = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}
OWN_TOLERATION = {"key": "mine", "operator": "Exists"}


@dataclass
class Cluster:
    fake: FakeKube
    store: KubeStore
    engine: RecordingEngine
    jobs: JobController
    writer: WorkloadStatusWriter

    def refresh(self, resource: Resource, key: str) -> Json:
        """What the watch would deliver next: the server's current object."""
        return delivered(self.fake, self.store, resource, key)

    def workload_key(self) -> str:
        [wl] = list(self.store.workloads())
        return wl.key

    def job(self) -> Json:
        obj = self.fake.stored(JOBS, JOB_KEY)
        assert obj is not None
        return obj

    async def stop(self, key: str) -> Json:
        """The leader deactivates the running Job's Workload `key` and writes it; the Job
        is suspended, then restored: the restoring patch."""
        self.refresh(JOBS, JOB_KEY)
        self.fake.server_update(WORKLOADS, key, {"spec": {"active": False}})
        self.refresh(WORKLOADS, key)
        self.engine.apply_pending()
        assert await self.writer.write(key)
        await self.jobs.reconcile(JOB_KEY)
        self.refresh(JOBS, JOB_KEY)
        await self.jobs.reconcile(JOB_KEY)
        return patches(self)[-1]

    async def admit(self) -> str:
        """The leader admits the Job's Workload and writes it."""
        key = self.workload_key()
        assert admit_in_core(self.engine) == [key]
        assert await self.writer.write(key)
        return key


async def cluster(
    *, fake: FakeKube | None = None, events: EventRecorder | None = None, **job_spec: Any
) -> Cluster:
    """The Job `team/j` on a seeded in-memory server (`fake`, or a new one), its controller
    and the status writer, recording Events with `events` if given."""
    fake = fake or FakeKube()
    seed_cluster(fake, workloads=0)
    fake.server_update(
        RESOURCE_FLAVORS,
        "default",
        {"spec": {"nodeLabels": {"pool": "a", "zone": "z1"}, "tolerations": [GPU_TOLERATION]}},
    )
    store, engine = await synced_store(fake)
    store.set_leading(True)
    limiter = FreeBucket()
    io = LeaderIO(fake.rest, engine, store, limiter, events)
    controller = JobController(io, retry_delay=0.0)
    writer = WorkloadStatusWriter(io)
    raw = job("team", "j", "main")
    pod = raw["spec"]["template"]["spec"]
    pod["nodeSelector"] = {"own": "x"}
    pod["tolerations"] = [OWN_TOLERATION]
    raw["spec"].update(job_spec)
    fake.seed(JOBS, raw)
    c = Cluster(fake, store, engine, controller, writer)
    c.refresh(JOBS, JOB_KEY)
    return c


async def started(
    *, fake: FakeKube | None = None, events: EventRecorder | None = None, **job_spec: Any
) -> tuple[Cluster, str]:
    """A Job whose Workload is admitted and which runs (unsuspended)."""
    c = await cluster(fake=fake, events=events, **job_spec)
    await c.jobs.reconcile(JOB_KEY)
    c.refresh(JOBS, JOB_KEY)
    wl_key = await c.admit()
    await c.jobs.reconcile(JOB_KEY)
    c.refresh(JOBS, JOB_KEY)
    assert c.job()["spec"]["suspend"] is False
    c.engine.apply_pending()
    c.engine.take()
    return c, wl_key


def patches(c: Cluster) -> list[Json]:
    return [body for method, path, body in c.fake.writes("PATCH") if path == JOB_PATH]


# -- creating the Workload ------------------------------------------------------------
async def test_an_unsuspended_job_is_suspended_and_gets_a_workload_it_owns() -> None:
    c = await cluster()
    job_rv = c.job()["metadata"]["resourceVersion"]
    await c.jobs.reconcile(JOB_KEY)
    [patch] = patches(c)
    assert patch == {"metadata": {"resourceVersion": job_rv}, "spec": {"suspend": True}}
    [(_, path, body)] = c.fake.writes("POST")
    assert path == WORKLOADS.collection("team")
    meta = body["metadata"]
    uid = c.job()["metadata"]["uid"]
    assert meta["name"].startswith("job-j-")
    assert meta["labels"] == {JOB_UID_LABEL: uid}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "j",
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert "creationTimestamp" not in meta
    assert "status" not in body
    assert body["spec"]["queueName"] == "main"
    assert body["spec"]["podSets"][0]["count"] == 1
    assert c.jobs.stats.workloads_created == 1
    assert c.jobs.stats.stopped == 1
    # The response was observed: the store, the engine and the uid map know it.
    wl_key = c.workload_key()
    c.engine.apply_pending()
    assert wl_key in c.engine.scheduler.objects.workloads
    # Seen again with its Workload: nothing more to do while it is not admitted.
    c.refresh(JOBS, JOB_KEY)
    await c.jobs.reconcile(JOB_KEY)
    assert len(c.fake.writes()) == 2


async def test_the_cache_keeps_a_slim_job_and_the_workload_is_made_from_the_whole_one() -> None:
    c = await cluster(suspend=True)
    cached = c.store.get(JOBS, JOB_KEY)
    assert cached is not None
    assert "containers" not in cached["spec"]["template"]["spec"]
    await c.jobs.reconcile(JOB_KEY)
    assert ("GET", JOB_PATH) in c.fake.calls  # read once, whole, to make the Workload
    [(_, _, body)] = c.fake.writes("POST")
    [container] = body["spec"]["podSets"][0]["template"]["spec"]["containers"]
    assert container["resources"]["requests"] == {"cpu": "1"}


async def test_a_job_deleted_before_its_workload_is_made_gets_none() -> None:
    c = await cluster(suspend=True)
    c.fake.fail("GET", JOB_PATH, status_error(404, "not found", "NotFound"))
    await c.jobs.reconcile(JOB_KEY)
    assert c.fake.writes() == []
    assert c.jobs.stats.errors == 0


async def test_a_suspended_job_only_gets_its_workload() -> None:
    c = await cluster(suspend=True)
    await c.jobs.reconcile(JOB_KEY)
    assert [m for m, _, _ in c.fake.writes()] == ["POST"]


async def test_jobs_without_a_queue_and_finished_jobs_are_left_alone() -> None:
    c = await cluster()
    unlabelled = job("team", "free", None)
    c.fake.seed(JOBS, unlabelled)
    c.refresh(JOBS, "team/free")
    await c.jobs.reconcile("team/free")
    c.fake.server_update(JOBS, JOB_KEY, {"status": {"conditions": [condition("Complete", "Done")]}})
    c.refresh(JOBS, JOB_KEY)
    await c.jobs.reconcile(JOB_KEY)
    assert c.fake.writes() == []


async def test_an_existing_workload_409_is_not_an_error() -> None:
    c = await cluster(suspend=True)
    c.fake.fail("POST", WORKLOADS.collection("team"), status_error(409, reason="AlreadyExists"))
    await c.jobs.reconcile(JOB_KEY)
    assert c.jobs.stats.workloads_created == 0
    assert c.jobs.stats.errors == 0


async def test_the_priority_class_label_resolves_through_the_store() -> None:
    c = await cluster(suspend=True)
    c.fake.seed(
        WORKLOAD_PRIORITY_CLASSES,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "high"},
            "value": 1000,
        },
    )
    c.refresh(WORKLOAD_PRIORITY_CLASSES, "high")
    c.fake.server_update(
        JOBS, JOB_KEY, {"metadata": {"labels": {"kueue.x-k8s.io/priority-class": "high"}}}
    )
    c.refresh(JOBS, JOB_KEY)
    await c.jobs.reconcile(JOB_KEY)
    [(_, _, body)] = c.fake.writes("POST")
    assert body["spec"]["priority"] == 1000
    assert body["spec"]["priorityClassName"] == "high"


async def test_a_job_naming_a_missing_priority_class_is_rejected_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    c = await cluster(suspend=True)
    c.fake.server_update(
        JOBS, JOB_KEY, {"metadata": {"labels": {"kueue.x-k8s.io/priority-class": "nope"}}}
    )
    c.refresh(JOBS, JOB_KEY)
    caplog.set_level(logging.ERROR, logger="scheduler.runtime.kube.jobs")
    await c.jobs.reconcile(JOB_KEY)
    assert c.fake.writes("POST") == []
    assert c.jobs.stats.errors == 1
    assert any("event=job-rejected" in r.getMessage() for r in caplog.records)


# -- admission and eviction -----------------------------------------------------------
async def test_an_admitted_workload_unsuspends_the_job_with_the_flavor_placement() -> None:
    c, _ = await started()
    unsuspend = patches(c)[-1]
    assert unsuspend["spec"]["suspend"] is False
    template = unsuspend["spec"]["template"]["spec"]
    assert template["nodeSelector"] == {"own": "x", "zone": "z1", "pool": "a"}
    assert template["tolerations"] == [OWN_TOLERATION, GPU_TOLERATION]
    pod = c.job()["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"own": "x", "zone": "z1", "pool": "a"}
    assert pod["tolerations"] == [OWN_TOLERATION, GPU_TOLERATION]
    assert c.jobs.stats.started == 1


async def test_an_evicted_workload_suspends_first_then_restores_the_template() -> None:
    c, wl_key = await started()
    # The leader evicts (here: the Workload is deactivated) and writes it.
    c.fake.server_update(WORKLOADS, wl_key, {"spec": {"active": False}})
    c.refresh(WORKLOADS, wl_key)
    c.engine.apply_pending()
    assert not c.engine.scheduler.objects.workloads[wl_key].is_admitted
    assert await c.writer.write(wl_key)
    before = len(patches(c))
    await c.jobs.reconcile(JOB_KEY)
    # Step one: a running Job's template is immutable, so only suspend.
    [suspend] = patches(c)[before:]
    assert suspend["spec"] == {"suspend": True}
    c.refresh(JOBS, JOB_KEY)
    await c.jobs.reconcile(JOB_KEY)
    # Step two, once suspended: the template goes back to what the Workload recorded.
    [restore] = patches(c)[before + 1 :]
    assert restore["spec"]["suspend"] is True
    # A merge patch merges maps: the flavor's keys are removed with nulls.
    assert restore["spec"]["template"]["spec"]["nodeSelector"] == {
        "pool": None,
        "zone": None,
        "own": "x",
    }
    assert restore["spec"]["template"]["spec"]["tolerations"] == [OWN_TOLERATION]
    pod = c.job()["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"own": "x"}
    assert pod["tolerations"] == [OWN_TOLERATION]
    # Restored: nothing more to do.
    c.refresh(JOBS, JOB_KEY)
    await c.jobs.reconcile(JOB_KEY)
    assert len(patches(c)) == before + 2


async def test_a_job_that_ran_gets_its_start_time_reset_before_its_template_changes() -> None:
    # kube-apiserver lets a suspended Job's placement change only without status.startTime,
    # which the Job controller keeps from the last run (docs/cluster.md#nodes-and-pods).
    c, wl_key = await started()
    c.fake.server_update(JOBS, JOB_KEY, {"status": {"startTime": "2026-01-01T00:00:00Z"}})
    c.refresh(JOBS, JOB_KEY)
    c.fake.server_update(WORKLOADS, wl_key, {"spec": {"active": False}})
    c.refresh(WORKLOADS, wl_key)
    c.engine.apply_pending()
    assert await c.writer.write(wl_key)
    await c.jobs.reconcile(JOB_KEY)  # suspend only: no template change, no reset
    assert [b for _, path, b in c.fake.writes("PATCH") if path == f"{JOB_PATH}/status"] == []
    c.refresh(JOBS, JOB_KEY)
    await c.jobs.reconcile(JOB_KEY)
    [reset] = [b for _, path, b in c.fake.writes("PATCH") if path == f"{JOB_PATH}/status"]
    assert reset["status"] == {"startTime": None}
    job_now = c.job()
    assert not (job_now.get("status") or {}).get("startTime")
    assert job_now["spec"]["template"]["spec"]["nodeSelector"] == {"own": "x"}


async def test_a_patch_on_a_stale_job_is_a_conflict_for_the_retry() -> None:
    c = await cluster()
    c.fake.server_update(JOBS, JOB_KEY, {"metadata": {"labels": {"x": "y"}}})  # not observed
    with pytest.raises(Exception) as caught:
        await c.jobs.reconcile(JOB_KEY)
    assert getattr(caught.value, "status", None) == 409
    assert c.fake.writes("POST") == []  # no Workload for a Job still running unsuspended


# -- signals --------------------------------------------------------------------------
async def test_pods_ready_when_ready_plus_succeeded_reach_parallelism() -> None:
    c, wl_key = await started(parallelism=2)
    c.fake.server_update(JOBS, JOB_KEY, {"status": {"ready": 1}})
    c.refresh(JOBS, JOB_KEY)
    await c.jobs.reconcile(JOB_KEY)
    assert c.engine.take() == []
    c.fake.server_update(JOBS, JOB_KEY, {"status": {"ready": 1, "succeeded": 1}})
    c.refresh(JOBS, JOB_KEY)
    await c.jobs.reconcile(JOB_KEY)
    # One Pod of two left to run: the succeeded one's quota goes back too.
    assert c.engine.take() == [PodsReady(wl_key), SetReclaimable(wl_key, (("main", 1),))]
    c.engine.apply_pending()
    # Already ready and reclaimed in the core: not signalled twice.
    await c.jobs.reconcile(JOB_KEY)
    assert c.engine.take() == []


async def test_reclaimable_pods_follow_the_jobs_progress() -> None:
    """docs/cluster.md#reclaimable-pods: nothing while every parallel slot is still
    needed, then parallelism − remaining, written to the Workload's status."""
    c, wl_key = await started(parallelism=3, completions=5)
    for succeeded, expected in ((1, []), (3, [("main", 1)]), (4, [("main", 2)])):
        c.fake.server_update(JOBS, JOB_KEY, {"status": {"ready": 0, "succeeded": succeeded}})
        c.refresh(JOBS, JOB_KEY)
        await c.jobs.reconcile(JOB_KEY)
        taken = [cmd for cmd in c.engine.take() if isinstance(cmd, SetReclaimable)]
        assert [list(cmd.counts) for cmd in taken] == ([expected] if expected else [])
        c.engine.apply_pending()
    assert await c.writer.write(wl_key)
    written = c.fake.stored(WORKLOADS, wl_key)
    assert written is not None
    assert written["status"]["reclaimablePods"] == [{"name": "main", "count": 2}]


@pytest.mark.parametrize(("kind", "failed"), [("Complete", False), ("Failed", True)])
async def test_a_finished_job_finishes_its_workload(kind: str, failed: bool) -> None:
    c, wl_key = await started()
    c.fake.server_update(JOBS, JOB_KEY, {"status": {"conditions": [condition(kind, "Done")]}})
    c.refresh(JOBS, JOB_KEY)
    await c.jobs.reconcile(JOB_KEY)
    assert c.engine.take() == [Finish(wl_key, failed=failed)]
    c.engine.apply_pending()
    assert c.engine.scheduler.objects.workloads[wl_key].finished
    await c.jobs.reconcile(JOB_KEY)
    assert c.engine.take() == []
    # The leader writes Finished; seen on the server, it is not signalled again either.
    assert await c.writer.write(wl_key)
    c.refresh(WORKLOADS, wl_key)
    c.engine.take()
    await c.jobs.reconcile(JOB_KEY)
    assert c.engine.take() == []


# -- deletion -------------------------------------------------------------------------
async def test_a_deleted_job_takes_its_workload_along() -> None:
    c = await cluster(suspend=True)
    other = job("team", "other", "main")
    other["spec"]["suspend"] = True
    c.fake.seed(JOBS, other)
    c.refresh(JOBS, "team/other")
    await c.jobs.reconcile(JOB_KEY)
    await c.jobs.reconcile("team/other")
    # Another group's kind called Job, of the same name, owns a Workload: not ours to delete.
    volcano = workload("team", "volcano-j", "main")
    volcano["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j", "uid": "v-1"}
    ]
    c.fake.seed(WORKLOADS, volcano)
    c.refresh(WORKLOADS, "team/volcano-j")
    workloads = [w.key for w in c.store.workloads()]
    assert "team/volcano-j" in workloads
    [mine] = [
        w.key
        for w in c.store.workloads()
        if w.owners[0] == ("batch/v1", "Job", "j", c.job()["metadata"]["uid"])
    ]
    c.fake.server_delete(JOBS, JOB_KEY)
    await c.store.reflectors[JOBS.kind].list_all()  # the store learns of the deletion
    assert JOB_KEY in c.jobs.queue
    await c.jobs.reconcile(JOB_KEY)
    assert c.fake.writes("DELETE") == []  # deletes carry no body
    assert ("DELETE", WORKLOADS.item(mine.split("/")[1], "team")) in c.fake.calls
    assert c.fake.stored(WORKLOADS, mine) is None
    assert [k for k in workloads if c.fake.stored(WORKLOADS, k) is not None] == [
        k for k in workloads if k != mine
    ]
    # Deleted meanwhile (the garbage collector was first): a 404 is fine.
    await c.jobs.reconcile(JOB_KEY)


async def test_run_reconciles_every_known_job_and_retries_failures() -> None:
    c = await cluster(suspend=True)
    c.fake.fail("POST", WORKLOADS.collection("team"), status_error(500))
    task = asyncio.create_task(c.jobs.run())
    try:
        await until(lambda: c.jobs.stats.workloads_created == 1)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert c.jobs.stats.errors == 1
    assert [m for m, _ in c.fake.calls if m == "POST"] == ["POST", "POST"]
    assert c.fake.stored(WORKLOADS, c.workload_key()) is not None
    labels = c.job()["metadata"]["labels"]
    assert QUEUE_NAME_LABEL in labels


async def test_a_priority_class_that_appears_later_gets_the_job_its_workload() -> None:
    c = await cluster(suspend=True)
    c.fake.server_update(
        JOBS, JOB_KEY, {"metadata": {"labels": {"kueue.x-k8s.io/priority-class": "later"}}}
    )
    c.refresh(JOBS, JOB_KEY)
    await c.jobs.reconcile(JOB_KEY)
    assert c.fake.writes("POST") == []
    c.jobs.queue.forget()  # what run() would have consumed
    c.fake.seed(
        WORKLOAD_PRIORITY_CLASSES,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "later"},
            "value": 7,
        },
    )
    c.refresh(WORKLOAD_PRIORITY_CLASSES, "later")
    assert JOB_KEY in c.jobs.queue  # the class's arrival requeues the Job
    await c.jobs.reconcile(JOB_KEY)
    [(_, _, body)] = c.fake.writes("POST")
    assert body["spec"]["priority"] == 7


# -- moving a waiting Job -------------------------------------------------------------
async def test_a_waiting_job_relabelled_moves_its_workload_to_that_queue() -> None:
    c = await cluster(suspend=True)
    c.fake.seed(LOCAL_QUEUES, local_queue("team", "other", "cq"))
    c.refresh(LOCAL_QUEUES, "team/other")
    await c.jobs.reconcile(JOB_KEY)
    key = c.workload_key()
    c.engine.apply_pending()
    c.fake.server_update(JOBS, JOB_KEY, {"metadata": {"labels": {QUEUE_NAME_LABEL: "other"}}})
    c.refresh(JOBS, JOB_KEY)
    await c.jobs.reconcile(JOB_KEY)
    moved = c.fake.stored(WORKLOADS, key)
    assert moved is not None and moved["spec"]["queueName"] == "other"
    c.engine.apply_pending()
    core = c.engine.scheduler.workload(key)
    assert core is not None and core.queue_name == "other"
    # Seen again: nothing more to write.
    before = len(c.fake.writes("PATCH"))
    c.refresh(WORKLOADS, key)
    await c.jobs.reconcile(JOB_KEY)
    assert len(c.fake.writes("PATCH")) == before


async def test_a_job_holding_quota_keeps_its_queue() -> None:
    c, key = await started()
    c.fake.server_update(JOBS, JOB_KEY, {"metadata": {"labels": {QUEUE_NAME_LABEL: "other"}}})
    c.refresh(JOBS, JOB_KEY)
    await c.jobs.reconcile(JOB_KEY)
    kept = c.fake.stored(WORKLOADS, key)
    assert kept is not None and kept["spec"]["queueName"] == "main"


# -- a waiting Job edited -------------------------------------------------------------
def _pod_sets(c: Cluster, key: str) -> list[dict[str, Any]]:
    stored = c.fake.stored(WORKLOADS, key)
    assert stored is not None
    pod_sets: list[dict[str, Any]] = stored["spec"]["podSets"]
    return pod_sets


async def test_a_waiting_job_edited_updates_its_workload() -> None:
    """Kueue updates the not matching Workload of a suspended job (a new parallelism, new
    requests) and says so on the Job (docs/cluster.md#a-waiting-job-edited)."""
    c = await cluster(suspend=True)
    await c.jobs.reconcile(JOB_KEY)
    key = c.workload_key()
    c.engine.apply_pending()
    assert _pod_sets(c, key)[0]["count"] == 1
    container = {"name": "c", "image": "x", "resources": {"requests": {"cpu": "2"}}}
    edit = {"spec": {"parallelism": 3, "template": {"spec": {"containers": [container]}}}}
    c.fake.server_update(JOBS, JOB_KEY, edit)
    c.refresh(JOBS, JOB_KEY)
    await c.jobs.reconcile(JOB_KEY)
    [pod_set] = _pod_sets(c, key)
    assert pod_set["count"] == 3
    assert pod_set["template"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "2"}}
    c.engine.apply_pending()
    core = c.engine.scheduler.workload(key)
    assert core is not None and core.pod_sets[0].count == 3
    # Seen again, or edited in a way its Workload does not show: no write.
    before = len(c.fake.writes("PATCH"))
    c.refresh(WORKLOADS, key)
    await c.jobs.reconcile(JOB_KEY)
    c.fake.server_update(JOBS, JOB_KEY, {"spec": {"backoffLimit": 2}})
    c.refresh(JOBS, JOB_KEY)
    await c.jobs.reconcile(JOB_KEY)
    assert len(c.fake.writes("PATCH")) == before


async def test_a_started_job_is_not_followed_and_a_new_leader_takes_what_it_finds() -> None:
    c, key = await started()
    # Its own start (placement, labels: a new generation) is not an edit to follow.
    before = len(c.fake.writes("PATCH"))
    c.refresh(WORKLOADS, key)
    await c.jobs.reconcile(JOB_KEY)
    assert len(c.fake.writes("PATCH")) == before
    # A waiting Job edited while no leader watched: a new leader has no memory of the
    # generation its Workload was made from, and takes what it finds as matching.
    waiting = await cluster(suspend=True)
    await waiting.jobs.reconcile(JOB_KEY)
    wl_key = waiting.workload_key()
    waiting.fake.server_update(JOBS, JOB_KEY, {"spec": {"parallelism": 5}})
    waiting.refresh(JOBS, JOB_KEY)
    waiting.jobs.matched.clear()  # what a new leader's integration starts with
    await waiting.jobs.reconcile(JOB_KEY)
    assert _pod_sets(waiting, wl_key)[0]["count"] == 1
    # Its next edit is followed.
    waiting.fake.server_update(JOBS, JOB_KEY, {"spec": {"parallelism": 4}})
    waiting.refresh(JOBS, JOB_KEY)
    await waiting.jobs.reconcile(JOB_KEY)
    assert _pod_sets(waiting, wl_key)[0]["count"] == 4


async def test_a_running_job_whose_parallelism_changed_gets_a_new_workload(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """docs/cluster.md#a-running-job-edited: its admitted Workload no longer matches, so,
    as Kueue does, the Job is stopped, its template restored, the Workload deleted, and a
    new one made from the Job as it now is, which waits for quota like any other."""
    caplog.set_level(logging.INFO, logger="scheduler.runtime.kube.suspendable")
    c, old = await started(parallelism=2)
    old_uid = (c.fake.stored(WORKLOADS, old) or {})["metadata"]["uid"]
    c.fake.server_update(JOBS, JOB_KEY, {"spec": {"parallelism": 3}})
    c.refresh(JOBS, JOB_KEY)
    await c.jobs.reconcile(JOB_KEY)
    stop = patches(c)[-1]
    assert stop["spec"] == {"suspend": True}
    assert any(f"event=job-not-matching workload={old}" in r.getMessage() for r in caplog.records)
    c.refresh(JOBS, JOB_KEY)
    await c.jobs.reconcile(JOB_KEY)
    restore = patches(c)[-1]
    assert restore["spec"]["template"]["spec"]["nodeSelector"] == {
        "pool": None,
        "zone": None,
        "own": "x",
    }
    assert c.fake.stored(WORKLOADS, old) is not None  # deleted only once restored
    c.refresh(JOBS, JOB_KEY)
    await c.jobs.reconcile(JOB_KEY)
    assert c.fake.stored(WORKLOADS, old) is None
    # Until the watch shows it gone, the old Workload neither starts the Job again nor
    # is deleted twice.
    writes = len(c.fake.writes())
    await c.jobs.reconcile(JOB_KEY)
    assert len(c.fake.writes()) == writes
    await c.store.reflectors[WORKLOADS.kind].list_all()  # the store learns of the deletion
    await c.jobs.reconcile(JOB_KEY)
    [new] = list(c.store.workloads())
    assert (new.key, new.uid != old_uid) == (old, True)  # Kueue's name again, a new object
    assert _pod_sets(c, new.key)[0]["count"] == 3
    assert not (new.status or {}).get("admission")
    # Its other edits while running (none changes a count) leave it running.
    c2, key2 = await started(parallelism=2)
    c2.fake.server_update(JOBS, JOB_KEY, {"spec": {"backoffLimit": 3}})
    c2.refresh(JOBS, JOB_KEY)
    before = len(patches(c2))
    await c2.jobs.reconcile(JOB_KEY)
    assert len(patches(c2)) == before
    assert c2.fake.stored(WORKLOADS, key2) is not None


async def test_a_partially_admitted_job_runs_its_admitted_count_and_gets_its_own_back() -> None:
    """docs/cluster.md#partial-admission: six Pods of 1 cpu against 4 cpus, with
    `job-min-parallelism: 2`, are admitted four; the Job runs four (its completions too,
    with `job-completions-equal-parallelism`), and stopped it gets its six back."""
    c = await cluster(parallelism=6, completions=6)
    annotations = {
        "kueue.x-k8s.io/job-min-parallelism": "2",
        "kueue.x-k8s.io/job-completions-equal-parallelism": "true",
    }
    c.fake.server_update(JOBS, JOB_KEY, {"metadata": {"annotations": annotations}})
    c.refresh(JOBS, JOB_KEY)
    await c.jobs.reconcile(JOB_KEY)
    c.refresh(JOBS, JOB_KEY)
    key = await c.admit()
    await c.jobs.reconcile(JOB_KEY)
    start = patches(c)[-1]
    assert start["spec"]["suspend"] is False
    assert (start["spec"]["parallelism"], start["spec"]["completions"]) == (4, 4)
    c.refresh(JOBS, JOB_KEY)
    c.engine.apply_pending()
    # Its own write is no edit: it keeps running on the Workload it was admitted with.
    before = len(patches(c))
    await c.jobs.reconcile(JOB_KEY)
    assert len(patches(c)) == before
    # Evicted (deactivated): suspended, then its counts and template restored.
    restore = await c.stop(key)
    assert restore["spec"]["suspend"] is True
    assert (restore["spec"]["parallelism"], restore["spec"]["completions"]) == (6, 6)
    assert c.job()["spec"]["parallelism"] == 6


async def test_its_own_write_over_an_edit_not_yet_followed_leaves_the_edit_to_follow() -> None:
    c = await cluster(suspend=True)
    await c.jobs.reconcile(JOB_KEY)
    made_from = c.jobs.matched[JOB_KEY]

    def job_at(generation: int) -> dict[str, Any]:
        return {"metadata": {"name": "j", "namespace": "team", "generation": generation}}

    # Written over the generation its Workload matches: the new one matches too.
    c.jobs.saw_write(job_at(made_from), job_at(made_from + 1))
    assert c.jobs.matched[JOB_KEY] == made_from + 1
    # Written over a user's edit (generation + 2) not yet followed: still to follow.
    c.jobs.saw_write(job_at(made_from + 2), job_at(made_from + 3))
    assert c.jobs.matched[JOB_KEY] == made_from + 1


# -- a new priority class -------------------------------------------------------------
def _priority_class(c: Cluster, name: str, value: int) -> None:
    wpc = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name},
        "value": value,
    }
    c.fake.seed(WORKLOAD_PRIORITY_CLASSES, wpc)
    c.refresh(WORKLOAD_PRIORITY_CLASSES, name)


async def test_a_running_jobs_new_priority_class_reaches_its_workload() -> None:
    """Kueue v0.19.2 updates a workload's priority when its job's WorkloadPriorityClass
    label changes, running or not (docs/cluster.md#a-new-priority-class)."""
    c, key = await started()
    label = "kueue.x-k8s.io/priority-class"
    _priority_class(c, "urgent", 1000)
    c.fake.server_update(JOBS, JOB_KEY, {"metadata": {"labels": {label: "urgent"}}})
    c.refresh(JOBS, JOB_KEY)
    # A Workload that holds quota with no class cannot take one.
    await c.jobs.reconcile(JOB_KEY)
    stored = c.fake.stored(WORKLOADS, key)
    assert stored is not None and not stored["spec"].get("priorityClassName")

    waiting = await cluster(suspend=True)
    _priority_class(waiting, "low", 1)
    waiting.fake.server_update(JOBS, JOB_KEY, {"metadata": {"labels": {label: "low"}}})
    waiting.refresh(JOBS, JOB_KEY)
    await waiting.jobs.reconcile(JOB_KEY)
    wl_key = waiting.workload_key()
    waiting.engine.apply_pending()
    # Relabelled to a class that does not exist yet: nothing until it does.
    waiting.fake.server_update(JOBS, JOB_KEY, {"metadata": {"labels": {label: "urgent"}}})
    waiting.refresh(JOBS, JOB_KEY)
    waiting.refresh(WORKLOADS, wl_key)
    await waiting.jobs.reconcile(JOB_KEY)
    stored = waiting.fake.stored(WORKLOADS, wl_key)
    assert stored is not None and stored["spec"]["priorityClassName"] == "low"
    _priority_class(waiting, "urgent", 1000)
    assert JOB_KEY in waiting.jobs.queue  # the class's arrival brings it back
    await waiting.jobs.reconcile(JOB_KEY)
    stored = waiting.fake.stored(WORKLOADS, wl_key)
    assert stored is not None
    assert (stored["spec"]["priorityClassName"], stored["spec"]["priority"]) == ("urgent", 1000)
    waiting.engine.apply_pending()
    core = waiting.engine.scheduler.workload(wl_key)
    assert core is not None and core.priority == 1000
    # Admitted (it holds quota with a class now): a new class still reaches it.
    waiting.refresh(WORKLOADS, wl_key)
    assert await waiting.admit() == wl_key
    waiting.refresh(WORKLOADS, wl_key)
    waiting.fake.server_update(JOBS, JOB_KEY, {"metadata": {"labels": {label: "low"}}})
    waiting.refresh(JOBS, JOB_KEY)
    await waiting.jobs.reconcile(JOB_KEY)
    stored = waiting.fake.stored(WORKLOADS, wl_key)
    assert stored is not None and stored["status"]["admission"]
    assert (stored["spec"]["priorityClassName"], stored["spec"]["priority"]) == ("low", 1)
