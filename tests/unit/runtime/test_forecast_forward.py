"""The worker's `forecast` and `walltime` methods: the simulator's forecaster run on
what a published snapshot carries (docs/forecasting.md#the-forward-methods)."""

from __future__ import annotations

import asyncio
import math
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.core.clock import ManualClock
from scheduler.core.cycle import run_cycle
from scheduler.core.ingest import scheduler_config
from scheduler.core.scheduler import Scheduler
from scheduler.forecast.forecaster import Forecaster
from scheduler.runtime.commands import ApplyObject, MarkSynced
from scheduler.runtime.engine import Engine
from scheduler.runtime.estimates import MICROS, AdmissionVelocity
from scheduler.runtime.forecast_forward import ForwardMethod, modelled_depth
from scheduler.runtime.forecast_method import (
    METHODS,
    ForecastInput,
    Observation,
    QueueOrder,
    RateMethod,
    make_method,
)
from scheduler.runtime.forecast_worker import Chunk, Replica, Running, Sync, SyncQueue
from scheduler.runtime.forecasts import ForecastConfig, ForecastService
from scheduler.runtime.publisher import PublishPacing, SnapshotPublisher
from scheduler.runtime.snapshot import Snapshot
from scheduler.runtime.workload_records import FinishedWorkload, WorkloadKey
from tests.unit.runtime.support import (
    cluster,
    cluster_queue,
    decode,
    eventually,
    flavor,
    local_queue,
    namespace,
    real_scheduler,
    workload,
)

T0 = 1_767_225_600 * MICROS
Json = dict[str, Any]


def job(
    name: str, cpu: int, *, limit: int | None = None, user: str = "", priority: int = 0
) -> Json:
    data = workload("team", name, "main", str(cpu), priority=priority)
    if limit is not None:
        data["spec"]["maximumExecutionTimeSeconds"] = limit
    if user:
        data["metadata"]["labels"] = {"user": user}
    return data


def base(cpu: str = "4", strategy: str = "StrictFIFO") -> list[Json]:
    return [
        namespace("team"),
        flavor(),
        cluster_queue("cq", cpu, strategy=strategy),
        local_queue("team", "main", "cq"),
    ]


async def published(s: Scheduler) -> Snapshot:
    publisher = SnapshotPublisher(s, pacing=PublishPacing(wait_for_sync=False))
    await publisher.publish()
    return publisher.snapshot()


def state_of(snapshot: Snapshot, made_at: int) -> ForecastInput:
    """The ForecastInput the worker builds from the service's messages."""
    queues = {
        name: QueueOrder(
            [e.key for e in view.entries],
            snapshot.velocities.get(name),
            [e.facts for e in view.entries],
        )
        for name, view in snapshot.views.items()
    }
    return ForecastInput(
        snapshot.generation,
        made_at,
        queues,
        snapshot.quota,
        snapshot.setup,
        snapshot.running,
        snapshot.finished,
    )


def core_with(
    *jobs: Json, at_seconds: int = 10, cpu: str = "4", strategy: str = "StrictFIFO"
) -> Scheduler:
    """The first job admitted at T0, the others arrive `at_seconds` later."""
    clock = ManualClock(T0)
    s = Scheduler(clock, scheduler_config(None))
    cluster(s, *base(cpu, strategy), jobs[0])
    run_cycle(s)
    clock.set(T0 + at_seconds * MICROS)
    cluster(s, *jobs[1:])
    while run_cycle(s).admitted:
        pass
    return s


def test_both_forward_methods_are_registered() -> None:
    assert {"forecast", "walltime", "rate"} <= set(METHODS)
    assert make_method("walltime").name == "walltime"


async def test_walltime_waits_for_the_holder_to_reach_its_limit() -> None:
    # a holds 3 of 4 cpu with a 100 s limit since T0; b (2 cpu) starts when a ends:
    # 90 s after the forecast made at T0 + 10 s. The prior calibration keeps the raw
    # wait as the median.
    s = core_with(job("a", 3, limit=100), job("b", 2))
    snapshot = await published(s)
    assert [r.name for r in snapshot.running] == ["a"]
    bands = dict(ForwardMethod("walltime").forecast(state_of(snapshot, s.now())))
    assert set(bands) == {("team", "b")}
    assert bands[("team", "b")].p50 == pytest.approx(90.0)
    assert bands[("team", "b")].low <= 90.0 <= bands[("team", "b")].high


async def test_the_worker_answers_as_the_forecaster_on_the_live_state() -> None:
    """One implementation: the bands from the snapshot's facts are the forecaster's own
    bands on the live core, for a mix of sizes, limits and priorities."""
    jobs = [job("a", 3, limit=100)] + [
        job(f"w{i}", 1 + i % 3, limit=60 * (1 + i % 5), priority=(i % 4) * 10) for i in range(12)
    ]
    for strategy in ("StrictFIFO", "BestEffortFIFO"):
        s = core_with(*jobs, cpu="5", strategy=strategy)
        snapshot = await published(s)
        served = dict(ForwardMethod("walltime").forecast(state_of(snapshot, s.now())))
        direct = Forecaster("walltime").forecast(s)
        assert len(served) == len(direct) > 5
        for key, found in direct.items():
            namespace_, _, name = key.partition("/")
            band = served[(namespace_, name)]
            assert (band.p50, band.low, band.high) == (
                found.band.p50,
                found.band.low,
                found.band.high,
            ), (strategy, key)


async def test_forecast_learns_runtimes_from_the_finishes_it_is_shown() -> None:
    # a (alice) holds 3 cpu since T0 with a 1000 s limit; alice's last job ran 20 s,
    # so a is expected to end at T0 + 20 s and b to start 10 s after T0 + 10 s.
    s = core_with(job("a", 3, limit=1000, user="alice"), job("b", 2, user="alice"))
    snapshot = await published(s)
    state = state_of(snapshot, s.now())
    facts = snapshot.running[0].facts
    learned = ForecastInput(
        state.generation,
        state.made_at,
        state.queues,
        state.quota,
        state.setup,
        state.running,
        (FinishedWorkload(1, "team", "old", 20.0, facts),),
    )
    method = ForwardMethod("forecast")
    assert dict(method.forecast(state))[("team", "b")].p50 == pytest.approx(990.0)
    assert dict(method.forecast(learned))[("team", "b")].p50 == pytest.approx(10.0)
    # A finish is learned once, however often it is sent again.
    assert dict(method.forecast(learned))[("team", "b")].p50 == pytest.approx(10.0)


async def test_observed_errors_move_the_band_of_that_cluster_queue() -> None:
    s = core_with(job("a", 3, limit=100), job("b", 2))
    state = state_of(await published(s), s.now())
    method = ForwardMethod("walltime")
    first = dict(method.forecast(state))[("team", "b")]
    for _ in range(40):
        band = dict(method.forecast(state))[("team", "b")]
        # b really started three times later than forecast
        started = state.made_at + round((3 * 90.0 + 120.0) * MICROS)
        method.observe(Observation("cq", ("team", "b"), state.made_at, band, started))
    later = dict(method.forecast(state))[("team", "b")]
    assert later.p50 > first.p50 * 2
    # An observation of a forecast the method never made changes nothing.
    method.observe(Observation("cq", ("team", "zz"), state.made_at, later, state.made_at))
    assert dict(method.forecast(state))[("team", "b")] == later


async def test_without_a_configuration_nothing_is_forecast() -> None:
    s = core_with(job("a", 3, limit=100), job("b", 2))
    state = state_of(await published(s), s.now())
    bare = ForecastInput(state.generation, state.made_at, state.queues, state.quota)
    assert list(ForwardMethod("forecast").forecast(bare)) == []


async def test_the_real_worker_serves_the_forward_run() -> None:
    """Engine, publisher, service and a spawned worker running `walltime`."""
    s = real_scheduler()
    engine = Engine(s, publish_interval=0.02)
    config = ForecastConfig(method="walltime", interval=0.2)
    service = ForecastService(engine.snapshot, s.now, config)
    engine.admission_observers.append(service.record_start)
    engine.start()
    task = asyncio.create_task(service.run())
    try:
        for data in (*base(), job("a", 3, limit=100), job("b", 2)):
            engine.submit(ApplyObject(decode(data)))
        engine.submit(MarkSynced())
        await eventually(lambda: service.forecast("team", "b") is not None, timeout=60)
        served = service.forecast("team", "b")
        assert served is not None
        assert served.method == "walltime"
        reserved = s.objects.workloads["team/a"].conditions.get("QuotaReserved")
        assert reserved is not None
        # b starts when a reaches its 100 s limit, whenever the forecast was made
        assert abs(served.p50 - (reserved.last_transition + 100 * MICROS)) <= 1
        assert served.low <= served.p50 <= served.high
        assert service.stats.worker_pid is not None
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await engine.stop()
    assert not math.isnan(service.stats.last_worker_seconds)


async def test_the_real_worker_models_only_its_budget_of_workloads() -> None:
    """docs/forecasting.md#how-deep-the-run-looks: `run_workloads` reaches the worker's
    forward run; the workload behind the budget is served the fallback's band."""
    s = real_scheduler()
    engine = Engine(s, publish_interval=0.02)
    config = ForecastConfig(method="walltime", interval=0.2, run_workloads=1)
    service = ForecastService(engine.snapshot, s.now, config)
    engine.start()
    task = asyncio.create_task(service.run())
    try:
        for data in (*base(), job("a", 3, limit=100), job("b", 2), job("c", 2)):
            engine.submit(ApplyObject(decode(data)))
        engine.submit(MarkSynced())
        await eventually(lambda: service.forecast("team", "b") is not None, timeout=60)
        b = service.forecast("team", "b")
        assert b is not None and b.method == "walltime"
        # One admission is too little evidence for `rate` here: c gets no band at all
        # (the unit test below shows the fallback's band taking its place).
        assert service.forecast("team", "c") is None
        assert service.stats.last_served == 2 and service.stats.last_fallback == 0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await engine.stop()


async def fed_replica(method: ForwardMethod) -> tuple[Replica, tuple[WorkloadKey, ...], Sync]:
    """A worker's replica of one holder and three waiting workloads, the Sync of a
    refresh with no budget, and the waiting workloads' keys in queue order."""
    jobs = [job("a", 4, limit=100)] + [job(f"w{i}", 4, limit=100) for i in range(3)]
    s = core_with(*jobs)
    snapshot = await published(s)
    (view,) = snapshot.views.values()
    replica = Replica(method)
    keys = tuple(e.key for e in view.entries)
    list(replica.handle(Chunk(1, keys, tuple(e.facts for e in view.entries))))
    list(replica.handle(Running(snapshot.running)))
    velocity = AdmissionVelocity(at=s.now(), weight=60.0, window_seconds=600.0, tau_seconds=300.0)
    queues = {"cq": SyncQueue((1,), velocity)}
    return replica, keys, Sync(1, s.now(), queues, (), snapshot.quota, snapshot.setup)


async def test_the_workloads_past_the_budget_get_the_rate_band() -> None:
    replica, keys, unlimited = await fed_replica(ForwardMethod("walltime"))
    sync = replace(unlimited, budget_workloads=2)
    whole = dict(ForwardMethod("walltime").forecast(replica.state_of(unlimited)))
    rate = dict(RateMethod().forecast(replica.state_of(sync)))
    [out] = replica.handle(sync)
    assert dict(out.marked) == {1: b"\x00\x00\x01"}
    ((_, values),) = out.chunks
    for i, band in enumerate((whole[keys[0]], whole[keys[1]], rate[keys[2]])):
        assert list(values[3 * i : 3 * i + 3]) == [band.p50, band.low, band.high]


@pytest.mark.parametrize(
    ("lengths", "budget", "depth"),
    [
        ([], 10, 0),
        ([3], 10, 3),
        ([3, 4], 7, 4),
        ([3, 100], 10, 7),  # the short queue leaves its share to the long one
        ([100, 100, 100], 10, 3),
        ([5, 5], 1, 0),
    ],
)
def test_the_modelled_depth_fills_the_budget(lengths: list[int], budget: int, depth: int) -> None:
    assert modelled_depth(lengths, budget) == depth


@given(st.lists(st.integers(0, 50), max_size=8), st.integers(1, 200))
def test_the_modelled_depth_is_the_deepest_within_the_budget(
    lengths: list[int], budget: int
) -> None:
    depth = modelled_depth(lengths, budget)
    assert sum(min(n, depth) for n in lengths) <= budget
    deeper = sum(min(n, depth + 1) for n in lengths)
    assert deeper > budget or deeper == sum(lengths)


async def test_the_snapshot_carries_holders_and_finishes_with_their_runtimes() -> None:
    clock = ManualClock(T0)
    s = Scheduler(clock, scheduler_config(None))
    cluster(s, *base(), job("a", 3, limit=100, user="alice"), job("b", 1))
    while run_cycle(s).admitted:
        pass
    publisher = SnapshotPublisher(s, pacing=PublishPacing(wait_for_sync=False))
    await publisher.publish()
    first = publisher.snapshot()
    assert sorted(r.name for r in first.running) == ["a", "b"]
    assert first.finished == ()
    assert first.setup is not None
    clock.set(T0 + 30 * MICROS)
    s.finish("team/a")
    await publisher.publish()
    second = publisher.snapshot()
    assert [r.name for r in second.running] == ["b"]
    assert second.running[0] is first.running[1]  # unchanged holders are reused
    assert second.setup is first.setup  # so is an unchanged configuration
    (done,) = second.finished
    assert (done.name, done.runtime_seconds, done.facts.user) == ("a", 30.0, "alice")
    # A holder that is deleted did not finish: nothing is learned from it.
    s.delete_workload("team/b")
    await publisher.publish()
    third = publisher.snapshot()
    assert third.running == () and third.finished == second.finished
    # Nothing changed: no new snapshot (the holders are not walked again either).
    assert not await publisher.publish()


async def test_parts_of_a_chunk_and_of_the_holders_add_up_in_the_worker() -> None:
    """The service sends long chunks and many holders in parts: the worker's input is
    the same as from one message."""
    jobs = [job("a", 3, limit=100)] + [job(f"w{i}", 1, limit=60) for i in range(5)]
    s = core_with(*jobs)
    snapshot = await published(s)
    whole = state_of(snapshot, s.now())
    (view,) = snapshot.views.values()
    keys = [e.key for e in view.entries]
    facts = [e.facts for e in view.entries]
    replica = Replica(ForwardMethod("walltime"))
    for start in range(0, len(keys), 2):
        list(
            replica.handle(
                Chunk(1, tuple(keys[start : start + 2]), tuple(facts[start : start + 2]), start)
            )
        )
    list(replica.handle(Running(snapshot.running[:0], 0)))
    list(replica.handle(Running(snapshot.running, 0)))  # a new list replaces the old
    sync = Sync(1, s.now(), {"cq": SyncQueue((1,), None)}, (), snapshot.quota, snapshot.setup)
    state = replica.state_of(sync)
    assert list(state.queues["cq"].order) == keys and list(state.queues["cq"].facts) == facts
    assert tuple(state.running) == whole.running
    assert dict(ForwardMethod("walltime").forecast(state)) == dict(
        ForwardMethod("walltime").forecast(whole)
    )


async def test_a_refresh_out_of_time_serves_what_its_run_found() -> None:
    """docs/forecasting.md#when-the-run-is-cut: the Sync's budget reaches the forward run;
    cut short, the worker yields bands for the workloads it saw start, none for the others
    (the service then serves no estimate for them, not a horizon-long one)."""
    jobs = [job("a", 4, limit=100)] + [job(f"w{i}", 4, limit=100) for i in range(3)]
    s = core_with(*jobs)
    snapshot = await published(s)
    state = state_of(snapshot, s.now())
    whole = dict(ForwardMethod("walltime").forecast(state))
    assert set(whole) == {("team", f"w{i}") for i in range(3)}
    ticks = iter(range(1_000_000))
    method = ForwardMethod("walltime", timer=lambda: float(next(ticks)))
    # Read when the budget is set (0), after the instants at 10 s (1) and 100 s (2): cut.
    cut = dict(method.forecast(replace(state, budget_seconds=1.5)))
    assert set(cut) == {("team", "w0")}
    assert cut[("team", "w0")] == whole[("team", "w0")]


async def test_a_cut_run_leaves_the_rest_to_the_rate_band() -> None:
    """docs/forecasting.md#fallback: in the worker, the workloads a cut run did not reach
    get the rate band of their ClusterQueue, marked, and the ones it reached keep the
    run's own."""
    ticks = iter(range(1_000_000))
    method = ForwardMethod("walltime", timer=lambda: float(next(ticks)))
    replica, keys, unlimited = await fed_replica(method)
    sync = replace(unlimited, budget_seconds=1.5)
    whole = dict(ForwardMethod("walltime").forecast(replica.state_of(unlimited)))
    rate = dict(RateMethod().forecast(replica.state_of(sync)))
    [out] = replica.handle(sync)  # cut after the instant at 10 s, as above
    assert keys == (("team", "w0"), ("team", "w1"), ("team", "w2"))
    assert dict(out.marked) == {1: b"\x00\x01\x01"}
    ((_, values),) = out.chunks
    band = whole[keys[0]]
    assert list(values[:3]) == [band.p50, band.low, band.high]
    for i in (1, 2):
        band = rate[keys[i]]
        assert list(values[3 * i : 3 * i + 3]) == [band.p50, band.low, band.high]
