"""The forecast service with a real worker process: results published with their
snapshot and instant, a dead worker replaced (docs/forecasting.md#serving)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import math
import os
import signal
import sys
import weakref
from array import array
from collections.abc import AsyncIterator
from types import MappingProxyType

import pytest

from scheduler.runtime.calibration import LiveCalibration
from scheduler.runtime.commands import ApplyObject, MarkSynced
from scheduler.runtime.engine import Engine
from scheduler.runtime.estimates import MICROS, AdmissionVelocity, ServedForecast
from scheduler.runtime.forecast_worker import WORKER_NICENESS, yield_to_the_server
from scheduler.runtime.forecasts import ForecastConfig, ForecastService, _Refresh, refresh_delay
from scheduler.runtime.pages import ViewBuilder, build_view
from scheduler.runtime.snapshot import Snapshot
from scheduler.runtime.workload_records import PendingEntry
from tests.unit.runtime.support import (
    LoopTurns,
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
VELOCITY = AdmissionVelocity(at=T0, weight=60.0, window_seconds=600.0, tau_seconds=300.0)
# Long enough that a test sees exactly the refreshes it asks for.
SLOW = ForecastConfig(interval=3600.0)


def snapshot(generation: int, names: list[str], chunk: int | None = None) -> Snapshot:
    entries = [PendingEntry.make("ns", n, T0, (), 0, "lq") for n in names]
    if chunk is None:
        view = build_view("cq", entries)
    else:  # views of several chunks without thousands of workloads
        builder = ViewBuilder("cq", entries, chunk)
        for _ in builder.steps():
            pass
        view = builder.view
    return Snapshot(
        generation=generation,
        synced=True,
        views=MappingProxyType({"cq": view}),
        local_queues=MappingProxyType({("ns", "lq"): "cq"}),
        workloads=MappingProxyType({e.key: "cq" for e in entries}),
        velocities=MappingProxyType({"cq": VELOCITY}),
    )


class Published:
    """The snapshot reference, as the engine would hold it."""

    def __init__(self, snap: Snapshot) -> None:
        self.current = snap

    def __call__(self) -> Snapshot:
        return self.current


@contextlib.asynccontextmanager
async def running(service: ForecastService) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(service.run())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_forecasts_carry_their_snapshot_and_instant() -> None:
    published = Published(snapshot(4, ["w0", "w1", "w2"]))
    service = ForecastService(published, lambda: T0, SLOW)
    async with running(service):
        await eventually(lambda: service.stats.refreshes == 1, timeout=60)
        first = service.forecast("ns", "w0")
        third = service.forecast("ns", "w2")
        assert first is not None and third is not None
        assert (first.method, first.made_at, first.generation) == ("rate", T0, 4)
        assert first.low < first.p50 < first.high
        assert T0 < first.p50 < third.p50
        estimate = VELOCITY.estimate(2, T0)
        assert estimate is not None
        assert third.high == T0 + round(estimate.high_seconds * MICROS)
        assert service.forecast("ns", "unknown") is None
        assert service.stats.last_made_at == T0 and service.stats.last_served == 3
        assert service.stats.chunks_sent == 1


async def test_a_refresh_sends_only_new_chunks_and_drops_gone_workloads() -> None:
    published = Published(snapshot(1, ["w0", "w1"]))
    clock = [T0]
    service = ForecastService(published, lambda: clock[0], ForecastConfig(interval=0.05))
    async with running(service):
        await eventually(lambda: service.stats.refreshes >= 1, timeout=60)
        sent = service.stats.chunks_sent
        await eventually(lambda: service.stats.refreshes >= 3)
        assert service.stats.chunks_sent == sent  # the same snapshot: nothing new travels
        published.current = snapshot(2, ["w1"])
        clock[0] = T0 + 5 * MICROS
        await eventually(lambda: service.stats.last_made_at == T0 + 5 * MICROS)
        assert service.stats.chunks_sent == sent + 1
        w1 = service.forecast("ns", "w1")
        assert w1 is not None and (w1.generation, w1.made_at) == (2, T0 + 5 * MICROS)
        assert service.forecast("ns", "w0") is None


async def test_chunks_no_snapshot_holds_are_not_kept_until_the_next_refresh() -> None:
    """The service holds the chunks it sent weakly: once the published snapshot moves
    on, the old chunks are freed while the worker rests, and the next refresh still
    tells the worker they are gone."""
    published = Published(snapshot(1, ["w0", "w1"]))
    clock = [T0]
    service = ForecastService(published, lambda: clock[0], SLOW)
    async with running(service):
        await eventually(lambda: service.stats.refreshes == 1, timeout=60)
        old = weakref.ref(published.current.views["cq"].chunks[0])
        published.current = snapshot(2, ["w1"])
        gc.collect()
        assert old() is None  # freed during the hour's rest, before any new refresh
        assert service.stats.refreshes == 1
        assert service.forecast("ns", "w1") is None  # its chunk is new: not forecast yet
    # The next worker process is fed the new chunk alone, and serves it.
    clock[0] = T0 + 5 * MICROS
    async with running(service):
        await eventually(lambda: service.stats.last_made_at == T0 + 5 * MICROS, timeout=60)
        w1 = service.forecast("ns", "w1")
        assert w1 is not None and (w1.generation, w1.made_at) == (2, T0 + 5 * MICROS)
        assert service.forecast("ns", "w0") is None


class HandedOver:
    """A snapshot published only until the service takes it: from then on the service
    holds it alone, as when the engine publishes again during a refresh."""

    def __init__(self, first: Snapshot, then: Snapshot) -> None:
        self._first: Snapshot | None = first
        self.then = then

    def __call__(self) -> Snapshot:
        first, self._first = self._first, None
        return first if first is not None else self.then


async def test_the_chunks_the_sent_snapshot_held_alone_are_freed_one_per_step() -> None:
    """Letting the sent snapshot go at once freed every chunk a newer snapshot had
    rebuilt in one stretch of the loop (12 ms of CPU for 29 chunks at 100k pending,
    docs/benchmarks.md "The loop's longest forecast stretch"). With a step budget of
    zero every pause of the service yields, so a chunk freed per pause is one per turn
    of the loop."""
    first = snapshot(1, [f"w{i}" for i in range(8)], chunk=2)
    chunks = first.views["cq"].chunks
    assert len(chunks) == 4
    freed_at: list[int] = []
    turns = LoopTurns()

    def freed() -> None:
        freed_at.append(turns.count)

    for chunk in chunks:
        weakref.finalize(chunk, freed)
    published = HandedOver(first, snapshot(2, ["x0"], chunk=2))
    del first, chunks, chunk
    service = ForecastService(
        published, lambda: T0, ForecastConfig(interval=3600.0, step_budget=0.0)
    )
    async with turns, running(service):
        await eventually(lambda: service.stats.refreshes == 1, timeout=60)
    assert len(freed_at) == 4  # freed by the refresh, no collection needed
    assert len(set(freed_at)) == 4, freed_at  # each in a turn of its own


@pytest.mark.parametrize(
    ("started", "finished", "interval", "delay"),
    [
        (100.0, 101.5, 10.0, 8.5),  # a quick refresh: the next one starts `interval` after
        (100.0, 106.0, 10.0, 6.0),  # over half the interval: rest as long as it took
        (100.0, 125.0, 10.0, 25.0),  # longer than the interval: still an equal rest
        (100.0, 100.0, 10.0, 10.0),
    ],
)
def test_the_worker_rests_at_least_as_long_as_its_last_refresh(
    started: float, finished: float, interval: float, delay: float
) -> None:
    assert refresh_delay(started, finished, interval) == delay


async def test_the_worker_runs_as_background_work_below_the_server() -> None:
    service = ForecastService(Published(snapshot(1, ["w0"])), lambda: T0, ForecastConfig())
    async with running(service):
        await eventually(lambda: service.stats.refreshes >= 1, timeout=60)
        pid = service.stats.worker_pid
        assert pid is not None
        ours = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, pid) == min(ours + WORKER_NICENESS, 19)
        if sys.platform == "linux":
            # Any task of the server that wakes on the worker's core preempts it at once.
            assert os.sched_getscheduler(pid) == os.SCHED_IDLE
            assert os.sched_getscheduler(0) != os.SCHED_IDLE


async def test_a_killed_worker_is_logged_and_replaced(caplog: pytest.LogCaptureFixture) -> None:
    published = Published(snapshot(1, ["w0"]))
    service = ForecastService(published, lambda: T0, ForecastConfig(interval=0.2))
    async with running(service):
        await eventually(lambda: service.stats.refreshes >= 1, timeout=60)
        pid = service.stats.worker_pid
        assert pid is not None
        with caplog.at_level(logging.ERROR, logger="scheduler.runtime.forecasts"):
            os.kill(pid, signal.SIGKILL)
            await eventually(lambda: service.stats.restarts == 1, timeout=60)
        assert f"event=forecast-worker-died pid={pid}" in caplog.text
        # Until the new worker answers, the old forecast is still served, with its age.
        served = service.forecast("ns", "w0")
        assert served is not None and served.made_at == T0
        refreshes = service.stats.refreshes
        published.current = snapshot(2, ["w0", "w1"])
        await eventually(lambda: service.stats.refreshes > refreshes, timeout=60)
        assert service.stats.worker_pid not in (None, pid)
        await eventually(lambda: service.forecast("ns", "w1") is not None, timeout=60)


async def test_a_start_scores_the_forecast_served_then() -> None:
    published = Published(snapshot(1, ["w0", "w1"]))
    calibration = LiveCalibration()
    service = ForecastService(published, lambda: T0, SLOW, calibration)
    async with running(service):
        await eventually(lambda: service.stats.refreshes == 1, timeout=60)
        w0 = service.forecast("ns", "w0")
        assert w0 is not None
        service.record_start("ns/w0", "cq", w0.p50)  # right on the median
        service.record_start("ns/w1", "cq", w0.made_at)  # far before its band
        service.record_start("ns/never-forecast", "cq", T0)  # nothing to score
    [(cq, method, score)] = calibration.scores()
    assert (cq, method, score.checked, score.in_band, score.early) == ("cq", "rate", 2, 1, 1)
    assert score.coverage == 0.5


def test_a_bad_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown forecast method 'nope'"):
        ForecastConfig(method="nope")
    with pytest.raises(ValueError, match="interval must be positive"):
        ForecastConfig(interval=0)
    for seconds in (0.0, -1.0, 120.0, 200.0):
        with pytest.raises(ValueError, match="budget must be positive and shorter"):
            ForecastConfig(run_seconds=seconds, refresh_timeout=120.0)
    assert ForecastConfig(run_seconds=119.0, refresh_timeout=120.0).run_seconds == 119.0
    with pytest.raises(ValueError, match="at least one workload"):
        ForecastConfig(run_workloads=0)


def test_a_band_that_is_no_instant_is_not_served() -> None:
    """NaN (the method said nothing) and infinity (no instant) serve no forecast; the
    other workloads of the same chunk keep theirs. Fed by hand: a worker process only
    runs registered methods."""
    published = Published(snapshot(1, ["w0", "w1", "w2"]))
    service = ForecastService(published, lambda: T0, SLOW)
    chunk = published.current.views["cq"].chunks[0]
    service._ids_of = {chunk: 1}
    values = array("d", [10.0, 5.0, 20.0, math.nan, math.nan, math.nan, math.inf, 1.0, math.inf])
    service._bands = {1: (_Refresh("m", T0, 1), values, b"")}
    served = service.forecast("ns", "w0")
    assert served == ServedForecast("m", T0, 1, T0 + 10 * MICROS, T0 + 5 * MICROS, T0 + 20 * MICROS)
    assert service.forecast("ns", "w1") is None
    assert service.forecast("ns", "w2") is None


def test_a_fallback_band_is_served_under_the_fallbacks_name() -> None:
    """docs/forecasting.md#fallback: the marks the worker sends with a chunk name, per
    workload, the method whose band it is; a chunk without marks is the method's."""
    published = Published(snapshot(1, ["w0", "w1", "w2"]))
    service = ForecastService(published, lambda: T0, SLOW)
    chunk = published.current.views["cq"].chunks[0]
    service._ids_of = {chunk: 1}
    values = array("d", [10.0, 5.0, 20.0, 30.0, 10.0, 90.0, 40.0, 20.0, 80.0])
    service._bands = {1: (_Refresh("forecast", T0, 1), values, b"\x00\x01\x00")}
    methods = [service.forecast("ns", f"w{i}") for i in range(3)]
    assert [m.method if m else None for m in methods] == ["forecast", "rate", "forecast"]
    assert methods[1] == ServedForecast(
        "rate", T0, 1, T0 + 30 * MICROS, T0 + 10 * MICROS, T0 + 90 * MICROS
    )


async def test_the_engine_tells_its_admission_observers() -> None:
    """The calibration's hook: every admission, with its ClusterQueue and instant."""
    engine = Engine(real_scheduler(), publish_interval=0.02)
    seen: list[tuple[str, str, int]] = []
    engine.admission_observers.append(lambda key, cq, at: seen.append((key, cq, at)))
    engine.start()
    try:
        for data in (
            namespace("team"),
            flavor(),
            cluster_queue("cq", "2"),
            local_queue("team", "main", "cq"),
            *(workload("team", f"w{i}", "main") for i in range(3)),
        ):
            engine.submit(ApplyObject(decode(data)))
        engine.submit(MarkSynced())
        await eventually(lambda: len(seen) == 2)
    finally:
        await engine.stop()
    assert sorted(key for key, _, _ in seen) == ["team/w0", "team/w1"]
    assert all(cq == "cq" and at > 0 for _, cq, at in seen)


@pytest.mark.skipif(sys.platform != "linux", reason="SCHED_IDLE is Linux's")
def test_a_refused_sched_idle_leaves_the_worker_niced_and_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    niced: list[int] = []

    def refuse(pid: int, policy: int, param: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    # In this process: nothing may really change the test runner's own priority.
    monkeypatch.setattr(os, "nice", niced.append)
    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    with caplog.at_level(logging.WARNING, logger="scheduler.runtime.forecast_worker"):
        assert yield_to_the_server() is False
    assert niced == [WORKER_NICENESS]
    assert "SCHED_IDLE refused" in caplog.text
    assert "running niced only" in caplog.text
