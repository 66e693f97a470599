"""The engine drives the core on the real clock: commands, cycles, deadlines, snapshots."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from scheduler.core.cycle import run_cycle
from scheduler.core.ingest import apply_object
from scheduler.core.scheduler import Scheduler
from scheduler.core.workload import EVICTED, QUOTA_RESERVED
from scheduler.runtime import engine as engine_module
from scheduler.runtime.commands import (
    ApplyObject,
    DeleteObject,
    Finish,
    MarkSynced,
    PodsReady,
    SetActive,
)
from scheduler.runtime.engine import Engine, EngineBudgets
from tests.unit.runtime.support import (
    WAIT,
    cluster_queue,
    decode,
    eventually,
    flavor,
    local_queue,
    namespace,
    one_queue,
    real_scheduler,
    workload,
)

FAST = 0.02  # publish interval for tests: short, so waits stay short


def base_objects(cpu: str = "2") -> list[dict[str, Any]]:
    return one_queue(cpu)


def admitted(s: Scheduler) -> set[str]:
    return {k for k, wl in s.objects.workloads.items() if wl.is_admitted}


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    """A running engine; the tests that publish mark it synced (nothing is published
    before the initial sync)."""
    eng = Engine(real_scheduler(), publish_interval=FAST)
    eng.start()
    yield eng
    await asyncio.wait_for(eng.stop(), WAIT)


def submit_all(engine: Engine, *objects: dict[str, Any]) -> None:
    for data in objects:
        engine.submit(ApplyObject(decode(data)))


async def test_applies_commands_and_admits_on_the_real_clock(engine: Engine) -> None:
    submit_all(engine, *base_objects("2"))
    submit_all(engine, *(workload("team", f"w{i}", "main") for i in range(3)))
    engine.submit(MarkSynced())
    s = engine.scheduler
    await eventually(lambda: len(admitted(s)) == 2)
    await asyncio.wait_for(engine.wait_idle(), WAIT)
    assert admitted(s) == {"team/w0", "team/w1"}
    assert engine.synced
    # A finish frees quota: the third one is admitted without any further prompt.
    engine.submit(Finish("team/w0"))
    await eventually(lambda: "team/w2" in admitted(s))
    # Deactivation and deletion are applied too.
    engine.submit(SetActive("team/w1", False))
    engine.submit(DeleteObject("Workload", "team", "w2"))
    await engine.flush()
    assert not s.objects.workloads["team/w1"].active
    assert "team/w2" not in s.objects.workloads
    assert engine.stats.command_errors == 0


async def test_snapshot_after_changes_with_increasing_generation(engine: Engine) -> None:
    submit_all(engine, *base_objects("0"))
    engine.submit(MarkSynced())
    first = await engine.wait_for_change(WAIT, after=0)
    await eventually(lambda: engine.snapshot().synced)
    assert first.generation >= 1
    before = engine.snapshot()
    submit_all(engine, workload("team", "a", "main"))
    after = await engine.wait_for_change(WAIT, after=before.generation)
    await eventually(lambda: len(engine.snapshot().views["cq"]) == 1)
    after = engine.snapshot()
    assert after.generation > before.generation
    assert after.locate("team", "a") is not None
    submit_all(engine, workload("team", "b", "main"))
    await eventually(lambda: len(engine.snapshot().views["cq"]) == 2)
    latest = engine.snapshot()
    assert latest.generation > after.generation
    assert [e.name for e in latest.views["cq"].entries] == ["a", "b"]
    assert latest.local_queues[("team", "main")] == "cq"


async def test_unchanged_cluster_queue_keeps_its_view_object(engine: Engine) -> None:
    submit_all(
        engine,
        namespace("team"),
        flavor(),
        cluster_queue("cq-a", "0"),
        cluster_queue("cq-b", "0"),
        local_queue("team", "a", "cq-a"),
        local_queue("team", "b", "cq-b"),
        workload("team", "in-b", "b"),
    )
    engine.submit(MarkSynced())
    await eventually(lambda: len(getattr(engine.snapshot().view("cq-b"), "entries", ())) == 1)
    await asyncio.wait_for(engine.wait_idle(), WAIT)
    before = engine.snapshot()
    view_b = before.views["cq-b"]
    submit_all(engine, workload("team", "in-a", "a"))
    await eventually(lambda: len(getattr(engine.snapshot().view("cq-a"), "entries", ())) == 1)
    after = engine.snapshot()
    assert after.generation > before.generation
    assert after.views["cq-b"] is view_b
    assert after.views["cq-a"] is not before.views["cq-a"]
    assert engine.publisher.stats.views_reused + engine.publisher.stats.views_built >= 3


async def test_no_publish_without_a_change(engine: Engine) -> None:
    submit_all(engine, *base_objects("0"), workload("team", "a", "main"))
    engine.submit(MarkSynced())
    await eventually(lambda: len(getattr(engine.snapshot().view("cq"), "entries", ())) == 1)
    await asyncio.wait_for(engine.wait_idle(), WAIT)
    await engine.publish_now()
    generation = engine.generation
    # A signal that changes nothing any view shows: no new generation.
    engine.submit(PodsReady("team/a"))
    await engine.flush()
    assert not await engine.publish_now()
    assert engine.generation == generation
    unchanged = await engine.wait_for_change(3 * FAST)
    assert unchanged.generation == generation


async def test_publishes_are_coalesced() -> None:
    eng = Engine(real_scheduler(), publish_interval=1.0)
    eng.start()
    try:
        submit_all(eng, *base_objects("0"))
        eng.submit(MarkSynced())
        first = await eng.wait_for_change(WAIT, after=0)
        publishes = eng.publisher.stats.publishes
        # Twenty changes, each applied in its own turn of the loop, well within one
        # interval: they come out as one publish.
        for i in range(20):
            submit_all(eng, workload("team", f"w{i:02d}", "main"))
            await asyncio.sleep(0)
        second = await eng.wait_for_change(WAIT, after=first.generation)
        assert second.generation == first.generation + 1
        assert eng.publisher.stats.publishes == publishes + 1
        assert len(second.views["cq"]) == 20
    finally:
        await asyncio.wait_for(eng.stop(), WAIT)


async def test_block_admission_waits_for_the_next_event() -> None:
    s = real_scheduler({"waitForPodsReady": {"enable": True, "blockAdmission": True}})
    eng = Engine(s, publish_interval=FAST)
    eng.start()
    try:
        submit_all(eng, *base_objects("4"), workload("team", "first", "main"))
        await eventually(lambda: admitted(s) == {"team/first"})
        submit_all(eng, workload("team", "second", "main"))
        await eventually(lambda: _reason(s, "team/second") == "Waiting")
        await asyncio.wait_for(eng.wait_idle(), WAIT)
        assert admitted(s) == {"team/first"}  # blocked: the engine keeps going
        eng.submit(PodsReady("team/first"))
        await eventually(lambda: "team/second" in admitted(s))
    finally:
        await asyncio.wait_for(eng.stop(), WAIT)


def _reason(s: Scheduler, key: str) -> str | None:
    wl = s.workload(key)
    cond = wl.conditions.get(QUOTA_RESERVED) if wl is not None else None
    return cond.reason if cond is not None else None


async def test_fires_pods_ready_timeouts_on_the_real_clock() -> None:
    s = real_scheduler(
        {
            "waitForPodsReady": {
                "enable": True,
                "blockAdmission": False,
                "timeout": "100ms",
                "requeuingStrategy": {"backoffBaseSeconds": 0, "backoffLimitCount": 5},
            }
        }
    )
    eng = Engine(s, publish_interval=FAST)
    eng.start()
    try:
        submit_all(eng, *base_objects("1"), workload("team", "slow", "main"))

        def requeued_once() -> bool:
            wl = s.workload("team/slow")
            return wl is not None and wl.requeue_state is not None and bool(wl.requeue_state.count)

        await eventually(requeued_once)
        evicted = s.objects.workloads["team/slow"].conditions.get(EVICTED)
        # Evicted by the timeout (and, with no backoff, maybe re-admitted already).
        assert evicted is not None
        assert "Exceeded the PodsReady timeout" in evicted.message
        # Backoff of 0 s: it is admitted again, and being ready stops the timeouts.
        await eventually(lambda: s.objects.workloads["team/slow"].is_admitted)
        eng.submit(PodsReady("team/slow"))
        await eng.flush()
        assert eng.stats.deadlines_fired >= 1
    finally:
        await asyncio.wait_for(eng.stop(), WAIT)


async def test_a_failing_command_is_logged_and_skipped(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    def flaky(
        s: Scheduler, obj: Any, default_time: int | None = None, *, keep_status: bool = False
    ) -> None:
        if getattr(obj.metadata, "name", "") == "boom":
            raise RuntimeError("boom")
        apply_object(s, obj, default_time, keep_status=keep_status)

    monkeypatch.setattr("scheduler.runtime.engine.apply_object", flaky)
    submit_all(engine, *base_objects("1"), workload("team", "boom", "main"))
    submit_all(engine, workload("team", "fine", "main"))
    await eventually(lambda: "team/fine" in admitted(engine.scheduler))
    assert engine.stats.command_errors == 1
    assert engine.running


async def test_apply_pending_without_a_running_loop_task() -> None:
    eng = Engine(real_scheduler())
    submit_all(eng, *base_objects("1"), workload("team", "a", "main"))
    eng.submit(MarkSynced())
    assert eng.apply_pending() == 6
    assert eng.synced
    assert "team/a" in eng.scheduler.objects.workloads
    assert await eng.publish_now()
    assert eng.snapshot().synced
    assert eng.snapshot().locate("team", "a") is not None
    assert eng.snapshot().generation == 1


async def test_nothing_is_published_before_the_initial_sync(engine: Engine) -> None:
    submit_all(engine, *base_objects("0"), workload("team", "a", "main"))
    await engine.flush()
    await asyncio.wait_for(engine.wait_idle(), WAIT)
    unsynced = await engine.wait_for_change(5 * FAST)
    assert unsynced.generation == 0 and not unsynced.synced
    engine.submit(MarkSynced())
    synced = await engine.wait_for_change(WAIT, after=0)
    assert synced.synced
    assert synced.locate("team", "a") is not None


async def test_start_then_stop_at_once() -> None:
    eng = Engine(real_scheduler())
    eng.start()
    await asyncio.wait_for(eng.stop(), WAIT)
    assert not eng.running


async def test_wait_for_change_times_out_with_the_current_snapshot(engine: Engine) -> None:
    current = engine.snapshot()
    got = await engine.wait_for_change(0.05)
    assert got.generation == current.generation


async def test_step_maxima_by_kind_and_their_window(engine: Engine) -> None:
    submit_all(engine, *base_objects(), workload("team", "a", "main", "1"))
    await asyncio.wait_for(engine.wait_idle(), WAIT)
    stats = engine.stats
    assert {"commands", "cycle", "cycles"} <= stats.max_step_by_kind.keys()
    assert stats.max_step_seconds == max(stats.max_step_by_kind.values()) > 0
    # CPU time per kind beside wall time; a stretch never uses more CPU than wall time
    # (one thread), give or take the two clocks' resolutions.
    assert stats.max_step_cpu_by_kind.keys() == stats.max_step_by_kind.keys()
    assert stats.max_step_cpu_seconds == max(stats.max_step_cpu_by_kind.values()) > 0
    for kind, cpu in stats.max_step_cpu_by_kind.items():
        assert cpu <= stats.max_step_by_kind[kind] + 0.001
    stats.reset_maxima()
    assert stats.max_step_seconds == 0.0 and stats.max_step_by_kind == {}
    assert stats.max_step_cpu_seconds == 0.0 and stats.max_step_cpu_by_kind == {}


async def test_consecutive_productive_cycles_share_a_stretch() -> None:
    # Each cycle admits one head of the single ClusterQueue: ten admissions are ten
    # cycles, run back to back while they fit in the budget, yet all of them happen.
    eng = Engine(real_scheduler(), publish_interval=FAST, budgets=EngineBudgets(command_budget=1.0))
    eng.start()
    try:
        submit_all(
            eng,
            *base_objects(cpu="10"),
            *(workload("team", f"w{i}", "main", "1") for i in range(10)),
        )
        await eventually(lambda: eng.stats.admitted == 10)
        assert eng.stats.max_step_by_kind["cycles"] >= eng.stats.max_step_by_kind["cycle"]
    finally:
        await asyncio.wait_for(eng.stop(), WAIT)


async def test_cycles_run_between_slices_of_a_command_backlog() -> None:
    # A budget of 10 µs makes every slice a command or two: the first workload is
    # admitted while most of the backlog is still queued, not after all of it.
    eng = Engine(
        real_scheduler(), publish_interval=FAST, budgets=EngineBudgets(command_budget=1e-5)
    )
    commands_at_admission: list[int] = []
    observe = eng._observe_admissions

    def record(keys: list[str]) -> None:
        if keys and not commands_at_admission:
            commands_at_admission.append(eng.stats.commands)
        observe(keys)

    eng._observe_admissions = record  # type: ignore[method-assign]
    submit_all(eng, *base_objects(cpu="1"), workload("team", "first", "main", "1"))
    backlog = [workload("team", f"later-{i:03d}", "main", "1") for i in range(300)]
    submit_all(eng, *backlog)
    total = len(base_objects()) + 1 + len(backlog)
    eng.start()
    try:
        await eventually(lambda: eng.stats.commands == total and eng.stats.admitted == 1)
        assert commands_at_admission and commands_at_admission[0] < total
        assert admitted(eng.scheduler) == {"team/first"}
    finally:
        await asyncio.wait_for(eng.stop(), WAIT)


async def test_the_runtime_keeps_no_workload_objects(engine: Engine) -> None:
    """Snapshots and status come from the core's records; only the simulator's output
    shows a workload's API object, so the engine's scheduler does not keep it."""
    assert engine.scheduler._keep_objects is False
    submit_all(engine, *base_objects(), workload("team", "a", "main", "1"))
    await asyncio.wait_for(engine.wait_idle(), WAIT)
    wl = engine.scheduler.objects.workloads["team/a"]
    assert isinstance(wl.raw, tuple)  # only the owner references, kept as they are


async def test_a_large_deadline_scan_is_spread_over_the_engines_turns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A bulk load leaves every workload's deadlines to recompute; one look at the clock
    # per batch, and a budget already spent, make each scan one batch.
    monkeypatch.setattr(engine_module, "DEADLINE_KEYS_PER_CHECK", 4)
    s = real_scheduler()
    for data in (*base_objects(cpu="1"), *(workload("team", f"w{i}", "main") for i in range(10))):
        apply_object(s, decode(data))
    eng = Engine(s, publish_interval=FAST, budgets=EngineBudgets(command_budget=0.0))
    eng._touch(s.objects.workloads)
    left = [len(eng._deadline_dirty)]
    answers = []
    while eng._deadline_dirty:
        answers.append(eng._scan_deadlines())
        left.append(len(eng._deadline_dirty))
    assert left == [10, 6, 2, 0]
    # While keys are left, the earliest deadline is "now" (the clock is real, so at
    # most the instant after the scans): the engine does not sleep.
    after = s.now()
    early = [earliest for _, earliest in answers[:-1]]
    assert len(early) == 2
    assert all(e is not None and e <= after for e in early)
    # Pending workloads have no deadline of their own: once all are seen, none is due.
    assert answers[-1] == (False, None)


async def test_the_periodic_rescan_of_quota_holders_is_spread_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every FULL_DEADLINE_SCAN_SECONDS all holders are looked at again; with
    # waitForPodsReady each has a timeout, and 100k of them cost hundreds of ms.
    monkeypatch.setattr(engine_module, "DEADLINE_KEYS_PER_CHECK", 4)
    s = real_scheduler(
        {"waitForPodsReady": {"enable": True, "blockAdmission": False, "timeout": "300s"}}
    )
    for data in (*base_objects(cpu="10"), *(workload("team", f"w{i}", "main") for i in range(10))):
        apply_object(s, decode(data))
    while len(admitted(s)) < 10:
        run_cycle(s)
    eng = Engine(s, publish_interval=FAST, budgets=EngineBudgets(command_budget=0.0))
    while eng._deadline_dirty or not eng._deadlines:
        eng._scan_deadlines()
    timeout_at = min(d.at for found in eng._deadlines.values() for d in found)
    eng._deadline_full_at = float("-inf")  # the next scan is a full one
    left, answers = [], []
    while True:
        answers.append(eng._scan_deadlines())
        left.append(len(eng._deadline_dirty))
        if not eng._deadline_dirty:
            break
    assert left == [6, 2, 0]
    assert all(earliest is not None and earliest < timeout_at for _, earliest in answers[:-1])
    assert answers[-1] == (False, timeout_at)
