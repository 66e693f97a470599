"""Events (docs/cluster.md#events): the recorder's Event objects, series, drops and
errors; the Events of a Workload status write; the Job integration's. On the in-memory
API server; with the real one in tests/e2e/test_pods_lifecycle.py."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from scheduler.kubeapi.errors import Json
from scheduler.runtime.kube import events as events_module
from scheduler.runtime.kube.events import (
    NOTE_LIMIT,
    Event,
    EventRecorder,
    Regarding,
    truncated,
)
from scheduler.runtime.kube.resources import EVENTS, JOBS, WORKLOADS
from scheduler.runtime.kube.workload_events import Preemption, workload_events
from tests.unit.runtime.kube.fakes import FakeKube, FreeBucket, status_error, until
from tests.unit.runtime.kube.test_jobs import JOB_KEY, cluster, started

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
ADMITTED = "Admitted by ClusterQueue cq, wait time since reservation was 0s"
JOB = Regarding("batch/v1", "Job", "team", "j", "job-uid")


class Wall:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def stored_events(fake: FakeKube) -> list[Json]:
    return [obj for (plural, _, _), obj in sorted(fake.objects.items()) if plural == "events"]


@pytest.fixture
async def recorder() -> AsyncIterator[tuple[FakeKube, EventRecorder, Wall]]:
    fake, wall = FakeKube(), Wall()
    rec = EventRecorder(fake.rest, "pod-0_1234", limiter=FreeBucket(), wall=wall)
    task = asyncio.create_task(rec.run())
    await asyncio.sleep(0)
    yield fake, rec, wall
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_an_event_as_events_k8s_io_v1_has_it(
    recorder: tuple[FakeKube, EventRecorder, Wall],
) -> None:
    fake, rec, _ = recorder
    rec.record(Event(JOB, "Started", "Admitted by clusterQueue cq"))
    await until(lambda: rec.stats.written == 1)
    [(_, path, body)] = fake.writes("POST")
    assert path == EVENTS.collection("team")
    assert body == {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"j.{int(T0.timestamp() * 1e9):x}", "namespace": "team"},
        "eventTime": "2026-01-01T12:00:00.000000Z",
        "reportingController": "queuescope",
        "reportingInstance": "pod-0_1234",
        "action": "Started",
        "reason": "Started",
        "type": "Normal",
        "note": "Admitted by clusterQueue cq",
        "regarding": {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "namespace": "team",
            "name": "j",
            "uid": "job-uid",
        },
    }


async def test_nothing_is_recorded_unless_running() -> None:
    fake = FakeKube()
    rec = EventRecorder(fake.rest, "pod-0", limiter=FreeBucket())
    rec.record(Event(JOB, "Started", "x"))
    assert rec.backlog == 0
    task = asyncio.create_task(rec.run())
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    rec.record(Event(JOB, "Started", "x"))
    assert rec.backlog == 0 and fake.writes() == []


async def test_the_same_event_again_is_counted_in_a_series(
    recorder: tuple[FakeKube, EventRecorder, Wall],
) -> None:
    fake, rec, wall = recorder
    event = Event(JOB, "Stopped", "Preempted")
    rec.record(event)
    await until(lambda: rec.stats.written == 1)
    wall.now = T0 + timedelta(minutes=1)
    rec.record(event, event)
    rec.record(Event(JOB, "Stopped", "another note"))  # not the same: its own Event
    await until(lambda: rec.stats.written == 2)
    assert rec.stats.repeated == 2
    await rec.write_series()
    [first, _] = stored_events(fake)
    assert first["note"] == "Preempted"
    assert first["series"] == {"count": 3, "lastObservedTime": "2026-01-01T12:01:00.000000Z"}
    assert rec.stats.series_update == 1
    await rec.write_series()  # nothing grew: no patch
    assert rec.stats.series_update == 1

    # Six minutes quiet: the series is over, the next one is a new Event.
    wall.now = T0 + timedelta(minutes=8)
    await rec.write_series()
    rec.record(event)
    await until(lambda: rec.stats.written == 3)
    assert len(stored_events(fake)) == 3


async def test_a_full_queue_drops_and_counts(
    recorder: tuple[FakeKube, EventRecorder, Wall], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, rec, _ = recorder
    monkeypatch.setattr(events_module, "QUEUE_LIMIT", 2)
    rec.record(*(Event(JOB, "Started", f"n{i}") for i in range(5)))
    assert rec.stats.dropped == 3
    await until(lambda: rec.stats.written == 2)


async def test_a_failed_write_is_counted_and_the_next_ones_go_on(
    recorder: tuple[FakeKube, EventRecorder, Wall],
) -> None:
    fake, rec, _ = recorder
    path = EVENTS.collection("team")
    fake.fail("POST", path, status_error(500), status_error(404))
    rec.record(*(Event(JOB, "Started", f"n{i}") for i in range(3)))
    await until(lambda: rec.stats.written == 1)
    assert rec.stats.error == 2
    assert [e["note"] for e in stored_events(fake)] == ["n2"]


def test_a_long_note_is_cut_to_the_apis_limit() -> None:
    assert truncated("short") == "short"
    cut = truncated("é" * 1000)  # 2000 bytes
    assert len(cut.encode()) <= NOTE_LIMIT
    assert cut.endswith("...")
    assert cut.startswith("éé")


# -- the Events of a status write -----------------------------------------------------
def cond(type_: str, reason: str, at: str, status: str = "True", message: str = "") -> Json:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": at,
    }


def written(*conditions: Json, admitted: bool = True, owner: bool = True) -> Json:
    meta: Json = {
        "name": "w",
        "namespace": "team",
        "uid": "wl-uid",
        "creationTimestamp": "2026-01-01T12:00:00Z",
    }
    if owner:
        meta["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "job-uid"}
        ]
    status: Json = {"conditions": list(conditions)}
    if admitted:
        status["admission"] = {"clusterQueue": "cq"}
    return {"metadata": meta, "status": status}


def reasons_notes(events: list[Event]) -> list[tuple[str, str, str]]:
    return [(e.regarding.kind, e.reason, e.note) for e in events]


def test_quota_reserved_and_admitted_with_the_wait_since_creation() -> None:
    after = written(
        cond("QuotaReserved", "QuotaReserved", "2026-01-01T12:01:30Z"),
        cond("Admitted", "Admitted", "2026-01-01T12:01:30Z"),
    )
    assert reasons_notes(workload_events(None, after)) == [
        (
            "Workload",
            "QuotaReserved",
            "Quota reserved in ClusterQueue cq, wait time since queued was 90s",
        ),
        ("Workload", "Admitted", ADMITTED),
    ]
    [first, _] = workload_events(None, after)
    assert first.regarding == Regarding(WORKLOADS.api_version, "Workload", "team", "w", "wl-uid")


def test_the_wait_counts_from_the_last_requeue() -> None:
    after = written(
        cond("Requeued", "BackoffFinished", "2026-01-01T12:05:00Z"),
        cond("QuotaReserved", "QuotaReserved", "2026-01-01T12:05:07Z"),
    )
    [event] = workload_events(None, after)
    assert event.note.endswith("wait time since queued was 7s")


def test_only_what_the_write_turned_true() -> None:
    reserved = cond("QuotaReserved", "QuotaReserved", "2026-01-01T12:01:00Z")
    before = {"conditions": [reserved]}
    after = written(reserved, cond("Admitted", "Admitted", "2026-01-01T12:01:05Z"))
    assert [e.reason for e in workload_events(before, after)] == ["Admitted"]
    # A condition that went False and True again is news again.
    again = cond("QuotaReserved", "QuotaReserved", "2026-01-01T12:09:00Z")
    assert [e.reason for e in workload_events(before, written(again))] == ["QuotaReserved"]
    assert workload_events(before, written(cond("Admitted", "x", "t", status="False"))) == []


def test_a_pending_reason_written_is_a_warning_each_time_it_changes() -> None:
    quota = "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default"
    first = cond("QuotaReserved", "Pending", "2026-01-01T12:00:05Z", "False", quota)
    [event] = workload_events(None, written(first, admitted=False))
    assert (event.type, event.reason, event.note) == ("Warning", "Pending", quota)
    # Written again with the same reason and message: no news, no Event.
    before = {"conditions": [first]}
    assert workload_events(before, written(first, admitted=False)) == []
    not_ready = "the check c is not Ready"
    other = cond("QuotaReserved", "Pending", "2026-01-01T12:00:05Z", "False", not_ready)
    [event] = workload_events(before, written(other, admitted=False))
    assert event.note == not_ready
    # An eviction's pending condition is told by the eviction's Events, and an inactive
    # Workload waits for nobody.
    message = "Preempted to accommodate a workload"
    requeued = cond("QuotaReserved", "Pending", "2026-01-01T12:00:09Z", "False", message)
    evicted = cond("Evicted", "Preempted", "2026-01-01T12:00:09Z", message=message)
    admitted_before = {"admission": {"clusterQueue": "cq"}, "conditions": []}
    assert [e.reason for e in workload_events(admitted_before, written(requeued, evicted))] == [
        "Preempted",
        "EvictedDueToPreempted",
    ]
    inactive = written(requeued, admitted=False)
    inactive["spec"] = {"active": False}
    assert workload_events(before, inactive) == []


def test_an_eviction_of_an_admitted_workload() -> None:
    before = {"admission": {"clusterQueue": "cq"}, "conditions": []}
    message = "Preempted to accommodate a workload (UID: u, JobUID: UNKNOWN) due to prioritization"
    preempted = written(cond("Evicted", "Preempted", "2026-01-01T12:02:00Z", message=message))
    assert reasons_notes(workload_events(before, preempted)) == [
        ("Workload", "Preempted", message),
        ("Workload", "EvictedDueToPreempted", message),
    ]
    limit = written(
        cond(
            "Evicted",
            "DeactivatedDueToRequeuingLimitExceeded",
            "2026-01-01T12:02:00Z",
            message="The workload is deactivated due to exceeding the maximum number of retries",
        )
    )
    assert [e.reason for e in workload_events(before, limit)] == [
        "EvictedDueToDeactivatedDueToRequeuingLimitExceeded"
    ]
    # Never admitted (no admission before): no eviction event, as Kueue.
    assert workload_events({"conditions": []}, limit) == []


def test_a_preemption_names_both_workloads_with_their_priorities() -> None:
    """Kueue's preemptor records `Preempted` on the victim with both priorities appended,
    and `PreemptedWorkload` on the preemptor."""
    before = {"admission": {"clusterQueue": "cq-b"}, "conditions": []}
    message = "Preempted to accommodate a workload (UID: p-uid, JobUID: UNKNOWN) due to x"
    preempted = written(cond("Evicted", "Preempted", "2026-01-01T12:02:00Z", message=message))
    preemptor = Regarding.of(WORKLOADS, "team", "urgent", "p-uid")
    events = workload_events(before, preempted, Preemption(preemptor, 1000, 5))
    priorities = (
        "preemptor effective priority: 1000 (base: 1000, boost: 0); "
        "preemptee effective priority: 5 (base: 5, boost: 0)"
    )
    assert reasons_notes(events) == [
        ("Workload", "Preempted", f"{message}; {priorities}"),
        (
            "Workload",
            "PreemptedWorkload",
            f"Preempted workload team/w (UID: wl-uid) in ClusterQueue cq-b; {priorities}",
        ),
        ("Workload", "EvictedDueToPreempted", message),
    ]
    assert events[1].regarding == preemptor
    assert events[0].regarding.name == "w"


def test_a_finished_workload_tells_its_job() -> None:
    after = written(cond("Finished", "Succeeded", "2026-01-01T12:03:00Z"))
    assert reasons_notes(workload_events(None, after)) == [
        ("Job", "FinishedWorkload", "Workload 'team/w' is declared finished")
    ]
    assert workload_events(None, written(cond("Finished", "Succeeded", "t"), owner=False)) == []


# -- the Job integration's and the status writer's, together --------------------------
async def test_a_jobs_life_in_events() -> None:
    fake = FakeKube()
    rec = EventRecorder(fake.rest, "pod-0", limiter=FreeBucket())
    task = asyncio.create_task(rec.run())
    await asyncio.sleep(0)
    try:
        c, wl_key = await started(fake=fake, events=rec)
        # The leader evicts (the Workload is deactivated) and writes it; the Job stops.
        c.fake.server_update(WORKLOADS, wl_key, {"spec": {"active": False}})
        c.refresh(WORKLOADS, wl_key)
        c.engine.apply_pending()
        assert await c.writer.write(wl_key)
        await c.jobs.reconcile(JOB_KEY)
        await until(lambda: rec.backlog == 0 and rec.stats.written == 7)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    found = [(e["regarding"]["kind"], e["reason"], e["note"]) for e in stored_events(fake)]
    # The in-memory server stamps every object created in 2025: a long wait.
    waited = re.compile(r"Quota reserved in ClusterQueue cq, wait time since queued was \d+s")
    assert [f for f in found if f[1] == "QuotaReserved" and waited.fullmatch(f[2])] == [
        f for f in found if f[1] == "QuotaReserved"
    ]
    assert sorted(f for f in found if f[1] != "QuotaReserved") == sorted(
        [
            ("Job", "Stopped", "missing workload"),  # created running: suspended at once
            ("Job", "CreatedWorkload", f"Created Workload: {wl_key}"),
            ("Workload", "Admitted", ADMITTED),
            ("Job", "Started", "Admitted by clusterQueue cq"),
            ("Workload", "EvictedDueToDeactivated", "The workload is deactivated"),
            ("Job", "Stopped", "The workload is deactivated"),
        ]
    ), found
    assert len(found) == 7
    job_uid = c.job()["metadata"]["uid"]
    job_events = [e for e in stored_events(fake) if e["regarding"]["kind"] == JOBS.kind]
    assert {e["regarding"]["uid"] for e in job_events} == {job_uid}


async def test_a_job_that_cannot_have_a_workload_says_why_in_a_warning() -> None:
    fake = FakeKube()
    rec = EventRecorder(fake.rest, "pod-0", limiter=FreeBucket())
    task = asyncio.create_task(rec.run())
    try:
        c = await cluster(fake=fake, events=rec, suspend=True)
        c.fake.server_update(
            JOBS, JOB_KEY, {"metadata": {"labels": {"kueue.x-k8s.io/priority-class": "gone"}}}
        )
        c.refresh(JOBS, JOB_KEY)
        await c.jobs.reconcile(JOB_KEY)
        await until(lambda: rec.backlog == 0 and rec.stats.written == 1)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    [event] = stored_events(fake)
    assert (event["type"], event["reason"], event["regarding"]["kind"]) == (
        "Warning",
        "ErrWorkloadCompose",
        "Job",
    )
    assert event["note"] == (
        'metadata.labels[kueue.x-k8s.io/priority-class]: WorkloadPriorityClass "gone" not found'
    )


async def test_a_waiting_jobs_new_maximum_execution_time_updates_its_workload() -> None:
    """Kueue updates the Workload of a suspended Job whose maximum execution time label
    changed, saying so on the Job (docs/cluster.md#maximum-execution-time)."""
    fake = FakeKube()
    rec = EventRecorder(fake.rest, "pod-0", limiter=FreeBucket())
    task = asyncio.create_task(rec.run())
    try:
        c = await cluster(fake=fake, events=rec, suspend=True)
        await c.jobs.reconcile(JOB_KEY)
        key = c.workload_key()
        c.engine.apply_pending()
        label = {"kueue.x-k8s.io/max-exec-time-seconds": "600"}
        c.fake.server_update(JOBS, JOB_KEY, {"metadata": {"labels": label}})
        c.refresh(JOBS, JOB_KEY)
        await c.jobs.reconcile(JOB_KEY)
        stored = c.fake.stored(WORKLOADS, key)
        assert stored is not None and stored["spec"]["maximumExecutionTimeSeconds"] == 600
        c.engine.apply_pending()
        core = c.engine.scheduler.workload(key)
        assert core is not None and core.maximum_execution_time_seconds == 600
        # Dropped again: the Workload's goes too.
        gone = {"kueue.x-k8s.io/max-exec-time-seconds": None}
        c.fake.server_update(JOBS, JOB_KEY, {"metadata": {"labels": gone}})
        c.refresh(JOBS, JOB_KEY)
        c.refresh(WORKLOADS, key)
        await c.jobs.reconcile(JOB_KEY)
        stored = c.fake.stored(WORKLOADS, key)
        assert stored is not None and "maximumExecutionTimeSeconds" not in stored["spec"]
        # The second update repeats the first Event: its series counts it.
        await until(lambda: rec.backlog == 0 and rec.stats.written == 2)
        assert rec.stats.repeated == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    updates = [e for e in stored_events(fake) if e["reason"] == "UpdatedWorkload"]
    assert [(e["regarding"]["kind"], e["note"]) for e in updates] == [
        ("Job", f"Updated not matching Workload for suspended job: {key}")
    ]
