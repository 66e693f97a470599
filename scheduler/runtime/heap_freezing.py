"""Keeping long-lived snapshot data out of the cyclic garbage collector's full passes.

CPython's full (generation 2) collection walks every tracked object that is not frozen,
and it holds the event loop while it does: with 100k pending workloads, 0.2–0.4 s per
pass was measured (docs/benchmarks.md). `serve` freezes the heap once after the
initial load, but snapshot entries are built after that, and so are the workloads that
arrive later. Snapshot data is acyclic (tuples, dicts, slotted records): reference
counting frees it when a newer snapshot drops it, frozen or not. So the publisher
freezes the heap again whenever it has built enough new entries since the last freeze
(the engine's publisher does; a bare `SnapshotPublisher` does not unless given a
policy); `gc.freeze()` itself is O(1) (it moves the generation lists into the permanent
one).

The price: an object that is alive at a freeze and later becomes unreachable *through a
cycle* is never collected (reference counting cannot free a cycle, and the collector no
longer looks at it). Freezes are therefore rare (one per `freeze_after` new entries:
about once per 2 s at 1,000 arrivals/s with the engine's 2,000), and what is alive at that
moment is mostly long-lived state; `freeze_after=None` turns this off.
"""

from __future__ import annotations

import asyncio
import gc
from dataclasses import dataclass


@dataclass(slots=True)
class FreezePolicy:
    freeze_after: int | None = 20_000  # snapshot entries built between two freezes
    freezes: int = 0
    pending: int = 0  # entries built since the last freeze

    def built(self, entries: int) -> bool:
        """`entries` new long-lived snapshot entries exist; True if the heap was frozen."""
        if self.freeze_after is None:
            return False
        self.pending += entries
        if self.pending < self.freeze_after:
            return False
        gc.freeze()
        self.freezes += 1
        self.pending = 0
        return True


class GcPacer:
    """Runs the cyclic collector between the loop's steps, never inside one.

    CPython collects when allocations cross a threshold, wherever that happens: in the
    middle of a command slice, a scheduling cycle or a publish step, whose time then
    grows by the whole pass. With 100k pending a young-generation pass costs about
    1.4 ms of CPU on average and up to 8 ms (it visits every object the young ones
    refer to, scattered over a large heap); landing on top of a 5 ms step, that made
    the longest blocks. While :meth:`run` runs, automatic collection is off and this
    task applies CPython's thresholds (the oldest generation whose count passed its
    threshold) every `interval` seconds, as a step of its own. Garbage waits at most
    one interval longer than it would have; reference counting, which frees almost
    everything, is unaffected. CPython also skips a full pass until the objects
    promoted since the last one are a quarter of those it left; those counts are not
    readable from Python, and an estimate of them made no difference at 100k pending
    (docs/benchmarks.md, "The flush of a deep BestEffortFIFO queue").
    """

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.passes = [0, 0, 0]  # collections run, per generation

    def collect_due(self, thresholds: tuple[int, int, int]) -> int | None:
        """Collect the oldest generation that is due; the generation, or None."""
        counts = gc.get_count()
        for generation in (2, 1, 0):
            if counts[generation] > thresholds[generation]:
                gc.collect(generation)
                self.passes[generation] += 1
                return generation
        return None

    async def run(self) -> None:
        thresholds = gc.get_threshold()
        due = (thresholds[0], thresholds[1], thresholds[2])
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            while True:
                await asyncio.sleep(self.interval)
                self.collect_due(due)
        finally:
            if was_enabled:
                gc.enable()
