"""KubeStore on the in-memory API server and a real engine: initial sync in dependency
order, Workload status on the leader and on followers, signals set by others,
undecodable objects, observe(), listeners."""

from __future__ import annotations

import asyncio
import copy
import logging

import pytest

from scheduler.kubeapi.errors import Json
from scheduler.runtime.commands import (
    ApplyObject,
    Barrier,
    DeleteObject,
    Finish,
    PodsReady,
)
from scheduler.runtime.engine import Engine
from scheduler.runtime.kube.records import Cached, WorkloadRecord, cached_version
from scheduler.runtime.kube.resources import (
    CLUSTER_QUEUES,
    JOBS,
    PRIORITY_CLASSES,
    WATCHED,
    WORKLOADS,
    Resource,
)
from scheduler.runtime.kube.store import KubeStore
from tests.unit.runtime.kube.fakes import (
    KEY,
    FakeKube,
    RecordingEngine,
    admit_in_core,
    condition,
    seed_cluster,
    status_error,
    synced_store,
    until,
)
from tests.unit.runtime.support import (
    job,
    workload,
)


def admit(engine: Engine) -> None:
    assert admit_in_core(engine) == [KEY]


def server_copy(fake: FakeKube, key: str = KEY) -> Json:
    """The server's object, as a watch event would bring it."""
    found = fake.stored(WORKLOADS, key)
    assert found is not None
    return copy.deepcopy(found)


def bump_version(raw: Json) -> Json:
    """`raw` as the server returns it after a change: with a new resourceVersion (the
    store tells objects apart by it)."""
    raw["metadata"]["resourceVersion"] = str(int(raw["metadata"]["resourceVersion"]) + 1)
    return raw


def cached(store: KubeStore, key: str = KEY) -> WorkloadRecord:
    found = store.workload(key)
    assert found is not None
    return found


# -- initial sync ---------------------------------------------------------------------
async def test_sync_lists_in_dependency_order_then_marks_synced() -> None:
    fake = FakeKube()
    seed_cluster(fake)
    fake.seed(JOBS, job("team", "j", "main"))
    engine = RecordingEngine()
    store = KubeStore(fake.rest, engine)
    await store.sync()
    assert [path for path, _ in fake.list_queries] == [r.collection() for r in WATCHED]
    kinds = [
        c.obj.kind if isinstance(c, ApplyObject) else type(c).__name__ for c in engine.submitted
    ]
    # Jobs are for listeners only: the core never sees them.
    assert kinds == [
        "Namespace",
        "ResourceFlavor",
        "ClusterQueue",
        "LocalQueue",
        "Workload",
        "MarkSynced",
    ]
    assert store.synced.is_set()
    assert not engine.synced
    engine.apply_pending()
    assert engine.synced
    assert KEY in engine.scheduler.objects.workloads
    assert store.get(JOBS, "team/j") is not None
    assert [j["metadata"]["name"] for j in store.items(JOBS)] == ["j"]


async def test_a_failed_initial_list_is_retried_before_going_on() -> None:
    fake = FakeKube()
    seed_cluster(fake)
    fake.fail("GET", CLUSTER_QUEUES.collection(), status_error(500), status_error(503))
    _, engine = await synced_store(fake, relist_backoff=0.0)
    paths = [path for path, _ in fake.list_queries]
    assert paths.count(CLUSTER_QUEUES.collection()) == 1  # the two failures were not listed
    assert fake.calls.count(("GET", CLUSTER_QUEUES.collection())) == 3
    assert "cq" in engine.scheduler.objects.cluster_queues
    assert engine.synced


async def test_run_syncs_then_feeds_watch_events_to_the_engine() -> None:
    fake = FakeKube()
    seed_cluster(fake)
    engine = RecordingEngine()
    store = KubeStore(fake.rest, engine)
    task = asyncio.create_task(store.run())
    try:
        await until(lambda: fake.waiting == len(WATCHED))
        assert store.synced.is_set()
        engine.apply_pending()
        engine.take()
        fake.seed(WORKLOADS, workload("team", "w2", "main"))
        fake.server_delete(WORKLOADS, KEY)
        await until(lambda: len(engine.submitted) == 2)
        added, deleted = engine.take()
        assert isinstance(added, ApplyObject) and added.obj.metadata.name == "w2"
        assert deleted == DeleteObject("Workload", "team", "w1")
        engine.apply_pending()
        assert set(engine.scheduler.objects.workloads) == {"team/w2"}
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


# -- Workload status: follower and leader ---------------------------------------------
async def test_a_follower_takes_the_servers_status() -> None:
    fake = FakeKube()
    seed_cluster(fake)
    store, engine = await synced_store(fake)
    raw = server_copy(fake)
    raw["status"] = {"conditions": [condition("Finished", "Succeeded")]}
    raw["metadata"]["resourceVersion"] = str(fake.rv + 1)
    store.upsert(WORKLOADS, raw, None)
    [command] = engine.take()
    assert isinstance(command, ApplyObject) and not command.keep_status
    engine.apply_pending()
    assert engine.scheduler.objects.workloads[KEY].finished


async def test_the_leader_keeps_its_status_and_reads_finished_and_pods_ready() -> None:
    fake = FakeKube()
    seed_cluster(fake)
    store, engine = await synced_store(fake)
    store.set_leading(True)
    admit(engine)
    raw = server_copy(fake)
    # The server copy still has no admission (not written yet) but a job integration
    # reported pods ready and then a failure.
    raw["status"] = {"conditions": [condition("PodsReady", "Started")]}
    store.upsert(WORKLOADS, bump_version(raw), None)
    apply, ready = engine.take()
    assert isinstance(apply, ApplyObject) and apply.keep_status
    assert ready == PodsReady(KEY)
    engine.apply_pending()
    wl = engine.scheduler.objects.workloads[KEY]
    assert wl.is_admitted  # the leader's decision survived the older server copy
    assert wl.conditions.is_true("PodsReady")
    raw["status"]["conditions"].append(condition("Finished", "Failed"))
    store.upsert(WORKLOADS, bump_version(raw), None)
    # PodsReady is already true; the condition's own words are kept.
    assert engine.take()[1:] == [Finish(KEY, True, "Failed", "set by someone else")]
    engine.apply_pending()
    finished = engine.scheduler.objects.workloads[KEY]
    assert finished.finished
    written = finished.conditions.get("Finished")
    assert written is not None and written.message == "set by someone else"
    # Seen again: nothing more to signal.
    store.upsert(WORKLOADS, raw, None)
    assert [type(c) for c in engine.take()] == [ApplyObject]


async def test_a_succeeded_finish_is_not_a_failure() -> None:
    fake = FakeKube()
    seed_cluster(fake)
    store, engine = await synced_store(fake)
    store.set_leading(True)
    raw = server_copy(fake)
    raw["status"] = {"conditions": [condition("Finished", "Succeeded")]}
    store.upsert(WORKLOADS, bump_version(raw), None)
    assert engine.take()[1:] == [Finish(KEY, False, "Succeeded", "set by someone else")]
    # A False condition is no signal.
    raw["status"] = {"conditions": [condition("PodsReady", "WaitForStart", "False")]}
    engine.apply_pending()
    store.upsert(WORKLOADS, bump_version(raw), None)
    assert [type(c) for c in engine.take()] == [ApplyObject]


async def test_stepping_down_takes_the_servers_status_again() -> None:
    fake = FakeKube()
    seed_cluster(fake)
    store, engine = await synced_store(fake)
    store.set_leading(True)
    admit(engine)
    store.set_leading(True)  # no change: nothing re-applied
    assert engine.take() == []
    store.set_leading(False)
    assert engine.take() == []  # the flag alone re-applies nothing (shutdown)
    assert await store.take_server_status() == 1
    # The server copy carries no status, which alone would keep the core's: the
    # workload is forgotten first, then taken as the server has it.
    forget, apply = engine.take()
    assert forget == DeleteObject("Workload", "team", "w1")
    assert isinstance(apply, ApplyObject) and not apply.keep_status
    engine.apply_pending()
    # The admission was never written: the follower does not hold it.
    wl = engine.scheduler.objects.workloads[KEY]
    assert not wl.is_admitted
    assert not engine.scheduler.holders.all_keys()
    assert engine.scheduler.queues.locate(KEY) == "cq"  # pending again


async def test_stepping_down_with_a_server_status_applies_it_over_the_core() -> None:
    fake = FakeKube()
    seed_cluster(fake)
    store, engine = await synced_store(fake)
    store.set_leading(True)
    admit(engine)
    fake.server_update(
        WORKLOADS, KEY, {"status": {"conditions": [condition("Finished", "Succeeded")]}}
    )
    store.observe(WORKLOADS, fake.stored(WORKLOADS, KEY) or {})
    engine.apply_pending()
    assert engine.scheduler.objects.workloads[KEY].is_admitted  # the leader keeps its own
    engine.take()
    store.set_leading(False)
    assert await store.take_server_status() == 1
    [apply] = engine.take()
    assert isinstance(apply, ApplyObject) and not apply.keep_status
    engine.apply_pending()
    wl = engine.scheduler.objects.workloads[KEY]
    assert wl.finished and not wl.is_admitted


async def test_the_echo_of_a_status_write_is_not_reapplied_on_the_leader() -> None:
    fake = FakeKube()
    seed_cluster(fake)
    store, engine = await synced_store(fake)
    store.set_leading(True)
    old = server_copy(fake)
    assert cached(store).resource_version == old["metadata"]["resourceVersion"]
    echo = {
        **old,
        "metadata": {**old["metadata"], "resourceVersion": "900", "generation": 2},
        "status": {"conditions": [condition("PodsReady", "Started")]},
    }
    store.upsert(WORKLOADS, echo, cached(store))
    assert engine.take() == [PodsReady(KEY)]  # signals are still read
    engine.apply_pending()
    changed = {**echo, "spec": {**echo["spec"], "priority": 7}}
    store.upsert(WORKLOADS, changed, WorkloadRecord.of(echo))
    assert [type(c) for c in engine.take()] == [ApplyObject]  # a spec change is applied
    store.set_leading(False)
    engine.take()
    store.upsert(WORKLOADS, echo, WorkloadRecord.of(changed))  # a follower mirrors every status
    assert [type(c) for c in engine.take()] == [ApplyObject]


# -- bad objects ----------------------------------------------------------------------
async def test_an_undecodable_object_is_logged_once_per_resource_version(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeKube()
    seed_cluster(fake)
    store, engine = await synced_store(fake)
    bad = workload("team", "bad", "main")
    bad["spec"]["podSets"][0]["count"] = "many"
    bad["metadata"]["resourceVersion"] = "500"
    caplog.set_level(logging.ERROR, logger="scheduler.runtime.kube.store")

    def rejections() -> int:
        return sum("event=object-rejected" in r.getMessage() for r in caplog.records)

    store.upsert(WORKLOADS, bad, None)
    store.upsert(WORKLOADS, bad, None)
    assert rejections() == 1
    assert store.stats.decode_errors == 2
    assert engine.take() == []
    bad["metadata"]["resourceVersion"] = "501"
    store.upsert(WORKLOADS, bad, None)
    assert rejections() == 2
    # Fixed: applied, and a later breakage is reported again even at an old version.
    good = workload("team", "bad", "main")
    good["metadata"]["resourceVersion"] = "502"
    store.upsert(WORKLOADS, good, None)
    assert [type(c) for c in engine.take()] == [ApplyObject]
    store.upsert(WORKLOADS, bad, None)
    assert rejections() == 3


async def test_a_deleted_bad_object_leaves_no_record_behind(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeKube()
    store, _ = await synced_store(fake)
    bad = workload("team", "bad", "main")
    bad["spec"]["podSets"] = "nope"
    bad["metadata"]["resourceVersion"] = "7"
    caplog.set_level(logging.ERROR, logger="scheduler.runtime.kube.store")
    store.upsert(WORKLOADS, bad, None)
    store.delete(WORKLOADS, bad)
    # Recreated with the same contents and (say, after a restore) the same version:
    # it is reported again, because the first report was about an object now gone.
    store.upsert(WORKLOADS, bad, None)
    assert sum("event=object-rejected" in r.getMessage() for r in caplog.records) == 2


# -- observe and listeners ------------------------------------------------------------
async def test_observe_ignores_older_versions_and_notifies_on_newer() -> None:
    fake = FakeKube()
    seed_cluster(fake)
    store, engine = await synced_store(fake)
    seen: list[tuple[str, str | None, str | None]] = []

    def listener(resource: Resource, new: Cached | None, old: Cached | None) -> None:
        def rv(o: Cached | None) -> str | None:
            return cached_version(o) if o is not None else None

        seen.append((resource.kind, rv(new), rv(old)))

    store.subscribe(listener)
    current = server_copy(fake)
    rv = int(current["metadata"]["resourceVersion"])
    older = {**current, "metadata": {**current["metadata"], "resourceVersion": str(rv - 1)}}
    store.observe(WORKLOADS, older)
    store.observe(WORKLOADS, dict(current))  # the same version: nothing new
    assert seen == []
    assert engine.take() == []
    newer = {**current, "metadata": {**current["metadata"], "resourceVersion": str(rv + 5)}}
    del newer["kind"]  # a write response may lack it; observe restores it
    store.observe(WORKLOADS, newer)
    assert seen == [("Workload", str(rv + 5), str(rv))]
    assert cached(store).resource_version == str(rv + 5)
    assert [type(c) for c in engine.take()] == [ApplyObject]
    # A resource the store does not watch is ignored.
    store.observe(Resource("x", "v1", "things", "Thing", False), {"metadata": {"name": "t"}})


async def test_observe_keeps_a_write_response_without_its_managed_fields() -> None:
    fake = FakeKube()
    seed_cluster(fake)
    store, _ = await synced_store(fake)
    current = fake.stored(CLUSTER_QUEUES, "cq")
    assert current is not None
    rv = int(current["metadata"]["resourceVersion"])
    response = {
        **current,
        "metadata": {
            **current["metadata"],
            "resourceVersion": str(rv + 1),
            "managedFields": [{"manager": "queuescope", "operation": "Update"}],
        },
    }
    store.observe(CLUSTER_QUEUES, response)
    kept = store.get(CLUSTER_QUEUES, "cq")
    assert kept is not None
    assert kept["metadata"]["resourceVersion"] == str(rv + 1)
    assert "managedFields" not in kept["metadata"]


async def test_listeners_see_every_kind_and_a_failing_one_does_not_stop_the_rest() -> None:
    fake = FakeKube()
    store, engine = await synced_store(fake)
    calls: list[tuple[str, bool, bool]] = []

    def broken(resource: Resource, new: Cached | None, old: Cached | None) -> None:
        raise RuntimeError("listener bug")

    def recording(resource: Resource, new: Cached | None, old: Cached | None) -> None:
        calls.append((resource.kind, new is not None, old is not None))

    store.subscribe(broken)
    store.subscribe(recording)
    pc = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "hi"},
        "value": 5,
    }
    store.upsert(PRIORITY_CLASSES, pc, None)
    store.delete(PRIORITY_CLASSES, pc)
    raw_job = job("team", "j", "main")
    store.upsert(JOBS, raw_job, None)
    assert calls == [
        ("PriorityClass", True, False),
        ("PriorityClass", False, True),
        ("Job", True, False),
    ]
    assert engine.take() == []  # none of these are the core's


async def test_stepping_down_takes_only_the_workloads_the_core_sees_otherwise() -> None:
    fake = FakeKube()
    seed_cluster(fake, workloads=3)
    store, engine = await synced_store(fake)
    store.set_leading(True)
    admit(engine)  # one admission, never written; the two others agree with the server
    engine.take()
    store.set_leading(False)
    assert await store.take_server_status(budget=0.0) == 1  # one key per stretch
    applied = [c for c in engine.take() if isinstance(c, ApplyObject)]
    assert [c.obj.metadata.name for c in applied] == ["w1"]


def _paged_store(workloads: int, page_size: int) -> tuple[KubeStore, RecordingEngine]:
    """A store over a seeded cluster whose lists come `page_size` objects a page."""
    fake = FakeKube()
    seed_cluster(fake, workloads=workloads)
    engine = RecordingEngine()
    store = KubeStore(fake.rest, engine)
    for reflector in store.reflectors.values():
        reflector.page_size = page_size
    return store, engine


async def test_with_a_running_engine_the_initial_list_waits_for_it_page_by_page() -> None:
    store, engine = _paged_store(workloads=5, page_size=2)
    task = asyncio.create_task(engine.run())
    try:
        await until(lambda: engine.running)
        await store.sync()
        # Every page of Workloads was applied before the next was handed over: a
        # barrier after each, resolved by the engine (5 Workloads: 3 pages).
        barriers = [c for c in engine.take() if isinstance(c, Barrier)]
        assert len(barriers) >= 3 and all(b.done.done() for b in barriers)
        assert len(engine.scheduler.objects.workloads) == 5
    finally:
        await engine.stop()
        await task


async def test_pages_handed_over_are_in_the_core_but_it_is_synced_after_the_last() -> None:
    # The initial list reaches the engine page by page; the sync point (MarkSynced,
    # after which the core may schedule) stays at the end of every list.
    store, engine = _paged_store(workloads=5, page_size=2)
    seen: list[tuple[int, bool, bool]] = []  # (workloads in the core, synced, store synced)

    def listener(resource: Resource, new: Cached | None, old: Cached | None) -> None:
        if resource is WORKLOADS:
            count = len(engine.scheduler.objects.workloads)
            seen.append((count, engine.synced, store.synced.is_set()))

    store.subscribe(listener)
    task = asyncio.create_task(engine.run())
    try:
        await until(lambda: engine.running)
        await store.sync()
        # At the first Workload of page 2 and of page 3 the pages before were applied.
        assert seen[2][0] >= 2 and seen[4][0] >= 4
        assert not any(synced or store_synced for _, synced, store_synced in seen)
        await until(lambda: engine.synced)
        assert len(engine.scheduler.objects.workloads) == 5
        assert store.synced.is_set()
    finally:
        await engine.stop()
        await task
