"""How long the engine and the publisher hold the event loop with 100k pending workloads.

Recorded, never asserted (timing targets live in benchmarks): the figures go to the
test's properties (junit XML) and to stdout (`pytest -s`). The test itself checks only
that the published view is complete and agrees with the core.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import time
from collections.abc import Callable

from scheduler.core.visibility import pending_workloads
from scheduler.runtime.commands import Finish, MarkSynced
from scheduler.runtime.engine import Engine
from tests.unit.runtime.support import (
    bulk_workloads,
    cluster,
    cluster_queue,
    eventually,
    flavor,
    local_queue,
    namespace,
    real_scheduler,
)

PENDING = int(os.environ.get("QUEUESCOPE_LAG_PENDING", "100000"))
LONG = 300.0  # seconds: building 100k entries from scratch is slow on small machines


class GcPauses:
    """Longest full (generation 2) collection: with 100k workloads in memory the cyclic
    collector, not our code, is usually what holds the loop longest."""

    def __init__(self) -> None:
        self.max_full = 0.0
        self.full = 0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif info["generation"] == 2:
            self.full += 1
            self.max_full = max(self.max_full, time.perf_counter() - self._started)


class LagProbe:
    """Asks for a 1 ms sleep over and over; any overshoot is time the loop was held."""

    def __init__(self) -> None:
        self.max_lag = 0.0
        self.samples = 0

    async def run(self) -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(0.001)
            self.max_lag = max(self.max_lag, time.perf_counter() - started - 0.001)
            self.samples += 1


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


async def test_loop_lag_with_100k_pending(record_property: Callable[[str, object], None]) -> None:
    s = real_scheduler()
    engine = Engine(s, publish_interval=0.2)  # installs change tracking on the empty core
    cluster(
        s,
        namespace("team"),
        flavor(),
        # StrictFIFO: the head that does not fit blocks, so the engine goes idle instead
        # of parking 100k heads one cycle at a time (what BestEffortFIFO would do).
        cluster_queue("cq", "5", strategy="StrictFIFO"),
        local_queue("team", "main", "cq"),
    )
    loaded = time.perf_counter()
    bulk_workloads(s, "team", "main", PENDING)
    load_seconds = time.perf_counter() - loaded

    queue = s.queues.queue("cq")
    assert queue is not None
    started = time.perf_counter()
    queue.listing()
    listing_seconds = time.perf_counter() - started

    probe = LagProbe()
    probe_task = asyncio.create_task(probe.run())
    pauses = GcPauses()
    gc.callbacks.append(pauses)
    engine.submit(MarkSynced())
    engine.start()
    try:
        # Phase 1: five admissions, then the first publish builds the whole view.
        expected = PENDING - 5
        await asyncio.wait_for(
            eventually(
                lambda: len(getattr(engine.snapshot().view("cq"), "entries", ())) == expected,
                timeout=LONG,
            ),
            LONG,
        )
        first = engine.publisher.stats
        phase1 = (
            first.last_capture_seconds,
            first.last_max_step_seconds,
            first.last_total_seconds,
        )
        lag1 = probe.max_lag

        # Phase 2: one finish, one admission: a republish with every entry cached.
        generation = engine.generation
        engine.submit(Finish("team/w000000"))
        await asyncio.wait_for(
            eventually(
                lambda: (
                    engine.generation > generation
                    and len(engine.snapshot().views["cq"]) == expected - 1
                ),
                timeout=LONG,
            ),
            LONG,
        )
        second = engine.publisher.stats
        phase2 = (
            second.last_capture_seconds,
            second.last_max_step_seconds,
            second.last_total_seconds,
        )
    finally:
        gc.callbacks.remove(pauses)
        probe_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await probe_task
        await asyncio.wait_for(engine.stop(), LONG)

    view = engine.snapshot().views["cq"]
    core = pending_workloads(s, "cq")
    assert [e.name for e in view.entries[:50]] == [i.name for i in core[:50]]
    assert len(view) == len(core)
    last = core[-1]
    found = engine.snapshot().locate(last.namespace, last.name)
    assert found is not None and found.position_in_cluster_queue == len(core) - 1

    figures = {
        "pending": PENDING,
        "bulk_load_s": round(load_seconds, 2),
        "listing_ms": _ms(listing_seconds),
        "first_publish_capture_ms": _ms(phase1[0]),
        "first_publish_max_step_ms": _ms(phase1[1]),
        "first_publish_total_ms": _ms(phase1[2]),
        "republish_capture_ms": _ms(phase2[0]),
        "republish_max_step_ms": _ms(phase2[1]),
        "republish_total_ms": _ms(phase2[2]),
        "engine_max_step_ms": _ms(engine.stats.max_step_seconds),
        "probe_max_lag_first_publish_ms": _ms(lag1),
        "probe_max_lag_ms": _ms(probe.max_lag),
        "probe_samples": probe.samples,
        "gc_full_collections": pauses.full,
        "gc_max_full_pause_ms": _ms(pauses.max_full),
    }
    for name, value in figures.items():
        record_property(name, value)
    print("\nloop-lag " + " ".join(f"{k}={v}" for k, v in figures.items()))
