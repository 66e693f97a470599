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
