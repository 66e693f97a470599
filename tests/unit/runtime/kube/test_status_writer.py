"""The status writers on the in-memory API server: only differences are written,
through /status with the object's resourceVersion; 409 re-reads and retries, 404 is
ignored; deactivation is a spec.active merge patch; queue status likewise."""

from __future__ import annotations

import asyncio
import logging

import pytest

from scheduler.core.cycle import run_cycle
from scheduler.core.status import workload_status
from scheduler.runtime.commands import ApplyObject, SetActive
from scheduler.runtime.kube.leader_io import LeaderIO
from scheduler.runtime.kube.ratelimit import TokenBucket
from scheduler.runtime.kube.resources import CLUSTER_QUEUES, LOCAL_QUEUES, WORKLOADS
from scheduler.runtime.kube.status_writer import (
    QueueStatusWriter,
    WorkloadStatusWriter,
    WorkloadWriteSettings,
)
from scheduler.runtime.kube.store import KubeStore
from tests.unit.runtime.kube.fakes import (
    KEY,
    FakeKube,
    FreeBucket,
    RecordingEngine,
    admit_in_core,
    seed_cluster,
    status_error,
    synced_store,
    until,
)

STATUS_PATH = WORKLOADS.item("w1", "team", "status")
ITEM_PATH = WORKLOADS.item("w1", "team")


async def admitted_cluster(
    workloads: int = 1,
) -> tuple[FakeKube, KubeStore, RecordingEngine, FreeBucket]:
    fake = FakeKube()
    seed_cluster(fake, workloads=workloads)
    store, engine = await synced_store(fake)
    store.set_leading(True)
    assert KEY in admit_in_core(engine)
    return fake, store, engine, FreeBucket()


def writer_for(
    fake: FakeKube,
    store: KubeStore,
    engine: RecordingEngine,
    limiter: TokenBucket,
    *,
    retry_delay: float = 1.0,
    sweep_interval: float = 3600.0,
) -> WorkloadStatusWriter:
    return WorkloadStatusWriter(
        LeaderIO(fake.rest, engine, store, limiter),
        WorkloadWriteSettings(retry_delay=retry_delay, sweep_interval=sweep_interval),
    )


def cached_rv(store: KubeStore) -> str:
    cached = store.workload(KEY)
    assert cached is not None
    return cached.resource_version


# -- Workloads ------------------------------------------------------------------------
async def test_writes_the_difference_once_with_the_objects_resource_version() -> None:
    fake, store, engine, limiter = await admitted_cluster()
    writer = writer_for(fake, store, engine, limiter)
    read_rv = cached_rv(store)
    assert await writer.write(KEY)
    [(method, path, body)] = fake.writes()
    assert (method, path) == ("PUT", STATUS_PATH)
    assert body["metadata"]["resourceVersion"] == read_rv
    desired = workload_status(engine.scheduler.objects.workloads[KEY])
    assert body["status"] == desired
    assert body["status"]["admission"]["clusterQueue"] == "cq"
    stored = fake.stored(WORKLOADS, KEY)
    assert stored is not None and stored["status"] == desired
    # The response went into the cache: the next round has nothing to write.
    cached = store.workload(KEY)
    assert cached is not None
    assert (cached.resource_version, cached.status) == (
        stored["metadata"]["resourceVersion"],
        desired,
    )
    assert not await writer.write(KEY)
    assert len(fake.writes()) == 1
    assert (writer.stats.writes, writer.stats.skipped) == (1, 1)
    assert limiter.taken == 1


async def test_a_conflict_rereads_observes_and_requeues() -> None:
    fake, store, engine, limiter = await admitted_cluster()
    writer = writer_for(fake, store, engine, limiter)
    # Someone else changed the object; the cache has not seen it yet.
    fake.server_update(WORKLOADS, KEY, {"metadata": {"labels": {"touched": "yes"}}})
    engine.take()
    assert not await writer.write(KEY)
    assert writer.stats.conflicts == 1
    assert fake.calls[-2:] == [("PUT", STATUS_PATH), ("GET", ITEM_PATH)]
    cached = store.workload(KEY)
    fresh = fake.stored(WORKLOADS, KEY)
    assert cached is not None and fresh is not None
    assert cached.resource_version == fresh["metadata"]["resourceVersion"]
    # The fresh copy went to the engine (a changed spec is re-decided) ...
    assert [type(c) for c in engine.take()] == [ApplyObject]
    engine.apply_pending()
    assert engine.scheduler.objects.workloads[KEY].is_admitted  # the leader keeps its decision
    # ... and the key is queued again; the retry writes against the fresh version.
    assert writer.queued() == [KEY]
    assert await writer.write(KEY)
    stored = fake.stored(WORKLOADS, KEY)
    assert stored is not None and stored["status"]["admission"]["clusterQueue"] == "cq"


async def test_a_deleted_workload_is_not_an_error() -> None:
    fake, store, engine, limiter = await admitted_cluster()
    writer = writer_for(fake, store, engine, limiter)
    fake.server_delete(WORKLOADS, KEY)
    assert not await writer.write(KEY)
    assert writer.stats.errors == 0
    assert writer.queued() == []


async def test_other_failures_are_raised_for_the_worker_to_retry() -> None:
    fake, store, engine, limiter = await admitted_cluster()
    writer = writer_for(fake, store, engine, limiter)
    fake.fail("PUT", STATUS_PATH, status_error(500))
    with pytest.raises(Exception) as caught:
        await writer.write(KEY)
    assert getattr(caught.value, "status", None) == 500


async def test_unknown_keys_write_nothing() -> None:
    fake, store, engine, limiter = await admitted_cluster()
    writer = writer_for(fake, store, engine, limiter)
    assert not await writer.write("team/nobody")
    assert fake.writes() == []


async def test_deactivation_is_a_spec_merge_patch_then_the_status() -> None:
    fake, store, engine, limiter = await admitted_cluster()
    writer = writer_for(fake, store, engine, limiter)
    assert await writer.write(KEY)
    engine.submit(SetActive(KEY, False))
    engine.apply_pending()
    assert not engine.scheduler.objects.workloads[KEY].active
    rv = cached_rv(store)
    assert await writer.write(KEY)
    patch, put = fake.writes()[1:]
    assert patch == (
        "PATCH",
        ITEM_PATH,
        {"metadata": {"resourceVersion": rv}, "spec": {"active": False}},
    )
    # The status write uses the version the patch returned.
    assert put[:2] == ("PUT", STATUS_PATH)
    assert int(put[2]["metadata"]["resourceVersion"]) == int(rv) + 1
    stored = fake.stored(WORKLOADS, KEY)
    assert stored is not None and stored["spec"]["active"] is False
    assert "admission" not in stored["status"]  # evicted by the deactivation
    assert writer.stats.writes == 2  # one per write() call
    assert not await writer.write(KEY)


async def test_a_conflicting_deactivation_patch_is_retried_like_a_status_write() -> None:
    fake, store, engine, limiter = await admitted_cluster()
    writer = writer_for(fake, store, engine, limiter)
    engine.submit(SetActive(KEY, False))
    engine.apply_pending()
    fake.server_update(WORKLOADS, KEY, {"metadata": {"labels": {"x": "y"}}})
    assert not await writer.write(KEY)
    assert writer.stats.conflicts == 1
    assert [m for m, _, _ in fake.writes()] == ["PATCH"]
    stored = fake.stored(WORKLOADS, KEY)
    assert stored is not None and stored["spec"].get("active", True) is True


async def test_run_writes_touched_workloads_and_retries_failures() -> None:
    fake, store, engine, limiter = await admitted_cluster(workloads=2)
    assert admit_in_core(engine) == ["team/w2"]  # one head per ClusterQueue and cycle
    # The cycles ran outside the engine loop: say what they touched.
    engine._touch(["team/w1", "team/w2"])
    fake.fail("PUT", STATUS_PATH, status_error(500))
    writer = writer_for(fake, store, engine, limiter, retry_delay=0.0, sweep_interval=3600)
    task = asyncio.create_task(writer.run())
    try:
        await until(lambda: writer.stats.writes == 2)
        await asyncio.wait_for(writer.drained(), 5)
        assert writer.stats.errors == 1
        assert [p for m, p, _ in fake.writes()].count(STATUS_PATH) == 2  # failed + retried
        # A new decision later is picked up through the engine's touched set.
        engine.submit(SetActive("team/w2", False))
        engine.apply_pending()
        await until(lambda: writer.stats.writes == 3)
        stored = fake.stored(WORKLOADS, "team/w2")
        assert stored is not None and stored["spec"]["active"] is False
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_the_sweep_finds_differences_nobody_announced() -> None:
    fake, store, engine, limiter = await admitted_cluster()
    engine.take_touched()  # nothing announced
    writer = writer_for(fake, store, engine, limiter, sweep_interval=0.001)
    task = asyncio.create_task(writer.run())
    try:
        await until(lambda: writer.stats.writes == 1, turns=100_000)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    stored = fake.stored(WORKLOADS, KEY)
    assert stored is not None and "admission" in stored["status"]


# -- queues ---------------------------------------------------------------------------
VISIBILITY = {"queueVisibility": {"updateIntervalSeconds": 7, "clusterQueues": {"maxCount": 10}}}


async def test_queue_status_is_written_where_it_differs() -> None:
    fake = FakeKube()
    seed_cluster(fake, cpu="1", workloads=3)
    store, engine = await synced_store(fake, VISIBILITY)
    store.set_leading(True)
    assert admit_in_core(engine) == [KEY]
    limiter = FreeBucket()
    writer = QueueStatusWriter(LeaderIO(fake.rest, engine, store, limiter))
    assert writer.interval == 7
    assert await writer.write_all() == 2
    paths = [p for _, p, _ in fake.writes()]
    assert paths == [
        CLUSTER_QUEUES.item("cq", subresource="status"),
        LOCAL_QUEUES.item("main", "team", "status"),
    ]
    cq = fake.stored(CLUSTER_QUEUES, "cq")
    assert cq is not None
    assert cq["status"]["admittedWorkloads"] == 1
    assert cq["status"]["pendingWorkloads"] == 2
    heads = cq["status"]["pendingWorkloadsStatus"]["clusterQueuePendingWorkload"]
    assert heads == [{"name": "w2", "namespace": "team"}, {"name": "w3", "namespace": "team"}]
    lq = fake.stored(LOCAL_QUEUES, "team/main")
    assert lq is not None and lq["status"]["pendingWorkloads"] == 2
    # Nothing changed: nothing written.
    assert await writer.write_all() == 0
    assert len(fake.writes()) == 2
    assert limiter.taken == 2


async def test_queue_status_conflicts_and_errors_wait_for_the_next_round(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeKube()
    seed_cluster(fake)
    store, engine = await synced_store(fake)
    writer = QueueStatusWriter(LeaderIO(fake.rest, engine, store, FreeBucket()))
    assert writer.interval == 5  # no queueVisibility configured
    caplog.set_level(logging.WARNING, logger="scheduler.runtime.kube.status_writer")
    fake.fail("PUT", CLUSTER_QUEUES.item("cq", subresource="status"), status_error(409))
    fake.fail("PUT", LOCAL_QUEUES.item("main", "team", "status"), status_error(500))
    assert await writer.write_all() == 0
    assert (writer.stats.conflicts, writer.stats.errors) == (1, 1)
    assert sum("queue-status-write-failed" in r.getMessage() for r in caplog.records) == 1
    fake.server_delete(LOCAL_QUEUES, "team/main")
    assert await writer.write_all() == 1  # the ClusterQueue; the deleted LocalQueue: 404
    assert writer.stats.errors == 2
    assert sum("queue-status-write-failed" in r.getMessage() for r in caplog.records) == 1


# -- pending conditions: only news, nearest the head first -----------------------------
async def pending_cluster(workloads: int) -> tuple[FakeKube, KubeStore, RecordingEngine]:
    """`workloads` Workloads in a ClusterQueue without quota, each examined by a cycle
    (so each carries a QuotaReserved=False condition in the core)."""
    fake = FakeKube()
    seed_cluster(fake, cpu="0", workloads=workloads)
    store, engine = await synced_store(fake)
    store.set_leading(True)
    while run_cycle(engine.scheduler).ran:
        pass
    assert all(
        wl.conditions.is_false("QuotaReserved")
        for wl in engine.scheduler.objects.workloads.values()
    )
    return fake, store, engine


async def test_pending_conditions_go_nearest_the_head_first_within_the_window() -> None:
    fake, store, engine = await pending_cluster(6)
    writer = WorkloadStatusWriter(
        LeaderIO(fake.rest, engine, store, FreeBucket()),
        WorkloadWriteSettings(pending_window=4),
    )
    # Announced in reverse order; queued in queue order; the two beyond the window wait.
    writer.enqueue([f"team/w{i}" for i in range(6, 0, -1)])
    assert writer.queued() == [f"team/w{i}" for i in range(1, 5)]
    assert writer.stats.deferred == 2
    for key in writer.queued():
        assert await writer.write(key)
    assert [p for _, p, _ in fake.writes()] == [
        WORKLOADS.item(f"w{i}", "team", "status") for i in range(1, 5)
    ]


async def test_a_restart_over_unchanged_pending_workloads_writes_nothing() -> None:
    fake, store, engine = await pending_cluster(3)
    writer = WorkloadStatusWriter(LeaderIO(fake.rest, engine, store, FreeBucket()))
    for key in sorted(engine.scheduler.objects.workloads):
        assert await writer.write(key)
    # A new leader: the core is rebuilt from what the server holds, and the cycles
    # reach the same verdicts later (another instant).
    store2, engine2 = await synced_store(fake)
    store2.set_leading(True)
    while run_cycle(engine2.scheduler).ran:
        pass
    writer2 = WorkloadStatusWriter(LeaderIO(fake.rest, engine2, store2, FreeBucket()))
    writer2.enqueue(sorted(engine2.scheduler.objects.workloads))
    assert writer2.queued() == []
    assert writer2.stats.skipped == 3
    assert len(fake.writes()) == 3


async def test_a_decision_beyond_the_window_goes_before_pending_conditions() -> None:
    fake, store, engine = await pending_cluster(5)
    writer = WorkloadStatusWriter(
        LeaderIO(fake.rest, engine, store, FreeBucket()),
        WorkloadWriteSettings(pending_window=2),
    )
    engine.submit(SetActive("team/w5", False))
    engine.apply_pending()
    writer.enqueue(sorted(engine.scheduler.objects.workloads))
    assert writer.queued() == ["team/w5", "team/w1", "team/w2"]
