"""Cluster mode reads what an admission check's controller writes
(docs/scheduling.md#admission-checks): the AdmissionCheck's `Active` condition and the
check states of a Workload, both status-only changes that the leader otherwise ignores
(they are usually the echo of its own writes)."""

from __future__ import annotations

import copy

from scheduler.kubeapi.errors import Json
from scheduler.runtime.commands import ApplyObject
from scheduler.runtime.kube.leader_io import LeaderIO
from scheduler.runtime.kube.ratelimit import TokenBucket
from scheduler.runtime.kube.records import WorkloadRecord
from scheduler.runtime.kube.resources import ADMISSION_CHECKS, CLUSTER_QUEUES, WORKLOADS
from scheduler.runtime.kube.status_writer import WorkloadStatusWriter
from scheduler.runtime.kube.store import KubeStore
from tests.unit.runtime.kube.fakes import (
    KEY,
    FakeKube,
    RecordingEngine,
    admit_in_core,
    seed_cluster,
    synced_store,
)
from tests.unit.runtime.support import cluster_queue

CHECK = "ac-1"


def check(active: bool | None) -> Json:
    obj: Json = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": CHECK, "resourceVersion": "1"},
        "spec": {"controllerName": "example.com/ctl"},
    }
    if active is not None:
        obj["status"] = {
            "conditions": [
                {
                    "type": "Active",
                    "status": "True" if active else "False",
                    "reason": "Ready",
                    "message": "",
                    "lastTransitionTime": "2025-01-01T00:00:00Z",
                }
            ]
        }
    return obj


def seed_checked_cluster(fake: FakeKube, active: bool | None) -> None:
    seed_cluster(fake)
    fake.seed(ADMISSION_CHECKS, check(active))
    cq = cluster_queue("cq")
    cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": CHECK}]}
    fake.server_update(CLUSTER_QUEUES, "cq", {"spec": cq["spec"]})


async def leading_store() -> tuple[KubeStore, RecordingEngine, FakeKube]:
    """The leader's store over a cluster whose queue names an Active check."""
    fake = FakeKube()
    seed_checked_cluster(fake, active=True)
    store, engine = await synced_store(fake)
    store.set_leading(True)
    return store, engine, fake


def with_rv(obj: Json, rv: int) -> Json:
    new = copy.deepcopy(obj)
    new["metadata"]["resourceVersion"] = str(rv)
    return new


async def test_the_leader_reads_a_checks_active_condition_from_a_status_only_change() -> None:
    fake = FakeKube()
    seed_checked_cluster(fake, active=None)
    store, engine = await synced_store(fake)
    store.set_leading(True)
    s = engine.scheduler
    assert s.inactive_checks(s.objects.cluster_queues["cq"]) == [
        CHECK
    ]  # no controller has reported
    old = store.get(ADMISSION_CHECKS, CHECK)
    assert old is not None
    reported = with_rv({**old, "status": check(True)["status"]}, 900)
    store.upsert(ADMISSION_CHECKS, reported, old)
    [command] = engine.take()
    assert isinstance(command, ApplyObject)
    engine.apply_pending()
    assert s.inactive_checks(s.objects.cluster_queues["cq"]) == []
    # The controller pauses: the queue is gated again.
    store.upsert(ADMISSION_CHECKS, with_rv(check(False), 901), reported)
    engine.apply_pending()
    assert s.inactive_checks(s.objects.cluster_queues["cq"]) == [CHECK]


def workload_with_states(fake: FakeKube, states: list[Json], rv: int) -> tuple[Json, Json]:
    """The server's Workload with these check states (new), and as it was (old)."""
    old = fake.stored(WORKLOADS, KEY)
    assert old is not None
    new = with_rv(old, rv)
    new["status"] = {**(old.get("status") or {}), "admissionChecks": states}
    return new, old


def record(obj: Json) -> WorkloadRecord:
    """What the store's cache held of `obj` before the next event (the `old` of upsert)."""
    return WorkloadRecord.of(obj)


def state(name: str, value: str, **extra: object) -> Json:
    return {
        "name": name,
        "state": value,
        "message": "",
        "lastTransitionTime": "2025-01-01T00:00:00Z",
        **extra,
    }


async def test_the_leader_takes_a_controllers_ready_state_and_admits() -> None:
    store, engine, fake = await leading_store()
    admit_in_core(engine)
    wl = engine.scheduler.objects.workloads[KEY]
    assert wl.holds_quota and not wl.is_admitted
    assert [(c.name, c.state) for c in wl.admission_checks] == [(CHECK, "Pending")]
    # The server copy: our reservation written, then the controller's Ready.
    new, old = workload_with_states(fake, [state(CHECK, "Ready")], 900)
    store.upsert(WORKLOADS, new, record(old))
    [command] = engine.take()
    assert isinstance(command, ApplyObject) and command.keep_status
    engine.apply_pending()
    wl = engine.scheduler.objects.workloads[KEY]
    assert wl.is_admitted
    assert [(c.name, c.state) for c in wl.admission_checks] == [(CHECK, "Ready")]


async def test_the_echo_without_a_state_change_is_still_not_reapplied() -> None:
    store, engine, fake = await leading_store()
    new, old = workload_with_states(fake, [state(CHECK, "Pending")], 900)
    store.upsert(WORKLOADS, new, record(old))
    assert [type(c) for c in engine.take()] == [ApplyObject]  # the states changed
    again = with_rv(new, 901)
    again["status"]["conditions"] = [state("QuotaReserved", "True")]
    store.upsert(WORKLOADS, again, record(new))
    assert engine.take() == []  # the same states: an echo of ours, nothing to take


async def test_an_old_retry_read_back_after_the_reset_does_not_evict_twice() -> None:
    store, engine, fake = await leading_store()
    admit_in_core(engine)
    first, old = workload_with_states(fake, [state(CHECK, "Retry")], 900)
    store.upsert(WORKLOADS, first, record(old))
    engine.apply_pending()
    s = engine.scheduler
    s.finalize_evictions()
    wl = s.objects.workloads[KEY]
    assert not wl.holds_quota
    assert [(c.state, c.retry_count) for c in wl.admission_checks] == [("Pending", 1)]
    # The server has not seen the reset yet: the same Retry arrives with another
    # resourceVersion (someone else's write) and must not count a second retry.
    stale = with_rv(first, 901)
    stale["metadata"]["labels"] = {"touched": "yes"}
    store.upsert(WORKLOADS, stale, record(first))
    engine.apply_pending()
    wl = s.objects.workloads[KEY]
    assert [(c.state, c.retry_count) for c in wl.admission_checks] == [("Pending", 1)]


async def test_the_writer_never_puts_the_cores_older_states_over_a_controllers_write() -> None:
    fake = FakeKube()
    seed_checked_cluster(fake, active=True)
    store, engine = await synced_store(fake)
    store.set_leading(True)
    writer = WorkloadStatusWriter(LeaderIO(fake.rest, engine, store, TokenBucket(1000, 1000)))
    admit_in_core(engine)
    assert await writer.write(KEY)  # the reservation, the check Pending
    written = fake.stored(WORKLOADS, KEY)
    assert written is not None and written["status"]["admissionChecks"][0]["state"] == "Pending"
    # The controller says Ready; the watch delivers it, but the engine has not run yet.
    ready = state(CHECK, "Ready", lastTransitionTime="2026-01-01T00:00:05Z")
    fake.server_update(WORKLOADS, KEY, {"status": {"admissionChecks": [ready]}})
    store.observe(WORKLOADS, fake.stored(WORKLOADS, KEY) or {})
    assert not engine.scheduler.objects.workloads[KEY].is_admitted
    assert await writer.write(KEY)
    final = fake.stored(WORKLOADS, KEY)
    assert final is not None
    assert [(c["name"], c["state"]) for c in final["status"]["admissionChecks"]] == [
        (CHECK, "Ready")
    ]
    assert any(
        c["type"] == "Admitted" and c["status"] == "True" for c in final["status"]["conditions"]
    )
