"""Keeping long-lived snapshot data out of the cyclic garbage collector's full passes.

CPython's full (generation 2) collection walks every tracked object that is not frozen,
and it holds the event loop while it does. `serve` freezes the heap once after the
initial load, but snapshot entries are built after that, and so are the workloads that
arrive later. Snapshot data is acyclic (tuples, dicts, slotted records, the trie nodes
of the persistent maps): reference counting frees it when a newer snapshot drops it,
frozen or not. So the publisher freezes the heap again whenever it has made enough new
long-lived objects since the last freeze: snapshot entries built, and workload → chunk
map writes (each leaves new trie nodes behind); the engine's publisher does, a bare
`SnapshotPublisher` does not unless given a policy. `gc.freeze()` itself is O(1) (it
moves the generation lists into the permanent one).

Freezing is not the whole story: what a full pass walks is whatever stayed tracked
since the last freeze, and the rest is kept small at its source. With 100k pending
workloads, full passes of 180 to 380 ms were measured; the census at those passes
found neither snapshot data nor queue entries but the engine's fingerprints of the
states its cycles had tried (scheduler/runtime/cycle_fingerprint.py), now flat tuples
the collector untracks at once (docs/benchmarks.md, "What the full collections
walked").

The price: an object that is alive at a freeze and later becomes unreachable *through a
cycle* is never collected (reference counting cannot free a cycle, and the collector no
longer looks at it). Freezes are therefore rare (one per `freeze_after` new objects;
the engine's 2,000 is about two rebuilt chunks, whose entries all count, plus the map
writes of the workloads that moved), and what is alive at that moment is mostly
long-lived state; `freeze_after=None` turns this off.
"""

from __future__ import annotations

import asyncio
import gc
from dataclasses import dataclass


@dataclass(slots=True)
class FreezePolicy:
    freeze_after: int | None = 20_000  # long-lived objects made between two freezes
    freezes: int = 0
    pending: int = 0  # objects made since the last freeze

    def built(self, objects: int) -> bool:
        """`objects` new long-lived snapshot objects exist (entries, map writes); True if
        the heap was frozen."""
        if self.freeze_after is None:
            return False
        self.pending += objects
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
