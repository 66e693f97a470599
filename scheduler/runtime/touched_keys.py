"""The workload keys the change feed named since the publisher's last capture, checked
ahead of the next one (docs/architecture.md, "The runtime on one event loop").

A requeue replaces a workload's QueueEntry with an equal one, so the run holding it
compares equal and keeps its chunk; whether what the snapshot shows of the workload
(its pending message, priority, facts) changed is found by comparing its cached
snapshot entry with the workload (:func:`entry_is_current`, a few microseconds). While
the engine walks a BestEffortFIFO queue every cycle requeues a head, so tens of
thousands of keys are named between two publishes; checking them all inside the
synchronous capture held the loop for over 100 ms at 100k pending.

So the checks are done before the capture, in time-boxed slices: a key whose cached
entry no longer shows its workload has that entry dropped and the cell of the chunk
showing it is remembered (the capture rebuilds that chunk's run: O(#runs), however
many keys were stale); a key whose entry is still current needs nothing. A
key touched again after its check is named by the feed again and checked again, so
when the feed names few unchecked keys the capture takes them in its synchronous step
and the result is what checking everything there would give.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, KeysView, Mapping
from dataclasses import dataclass, field

from scheduler.core.queue.interface import QueueEntry
from scheduler.core.workload import WorkloadState
from scheduler.runtime.capture import entry_is_current
from scheduler.runtime.workload_records import PendingEntry

# ClusterQueue -> the workload keys pushed or requeued there (Changes.queues)
QueueMarks = dict[str, set[str]]

# workload key -> (the QueueEntry an entry was made for, the entry)
Cached = tuple[QueueEntry, PendingEntry]
# A ClusterQueue's cached entries by workload key; None marks one found stale. The key
# stays: deleting keys of a 100k dict and adding them again soon after makes it
# rebuild its table (5-6 ms in one step), overwriting a value does not.
EntryCache = dict[str, Cached | None]

_NO_CELLS: frozenset[int] = frozenset()


def drop_stale(
    cache: EntryCache,
    keys: Iterable[str],
    workloads: Mapping[str, WorkloadState],
    eviction_ordering: bool,
) -> list[str]:
    """The keys whose cached entry no longer shows their workload; those entries are
    dropped (a key without an entry or without a workload has nothing to compare)."""
    stale: list[str] = []
    for key in keys:
        cached = cache.get(key)
        wl = workloads.get(key)
        if cached is None or wl is None or entry_is_current(cached[1], wl, eviction_ordering):
            continue
        cache[key] = None
        stale.append(key)
    return stale


@dataclass(slots=True)
class TouchedKeys:
    """What the feed named since the last capture, split by what is known of it."""

    # every ClusterQueue named, and for those with cached entries the keys not checked yet
    unchecked: QueueMarks = field(default_factory=dict)
    # ClusterQueue -> cells of the chunks showing a key found stale ahead of the capture
    stale: dict[str, set[int]] = field(default_factory=dict)
    pending: int = 0  # keys in `unchecked`

    def add(self, marks: QueueMarks, has_cache: Callable[[str], bool]) -> None:
        """Take drained marks; keys of a ClusterQueue without cached entries (one not
        built yet) need no check, only its name is kept."""
        for cq, keys in marks.items():
            mine = self.unchecked.setdefault(cq, set())
            if keys and has_cache(cq):
                before = len(mine)
                mine.update(keys)
                self.pending += len(mine) - before

    def take_unchecked(self) -> list[tuple[str, list[str]]]:
        """The unchecked keys by ClusterQueue, leaving none unchecked (the caller checks
        them and reports the cells of the stale ones with :meth:`found_stale`)."""
        taken = [(cq, list(keys)) for cq, keys in self.unchecked.items() if keys]
        for cq, _ in taken:
            self.unchecked[cq] = set()
        self.pending = 0
        return taken

    def found_stale(self, cq: str, cells: Collection[int]) -> None:
        if cells:
            self.stale.setdefault(cq, set()).update(cells)

    def names(self) -> KeysView[str]:
        return self.unchecked.keys()

    def stale_cells(self, cq: str) -> Collection[int]:
        return self.stale.get(cq, _NO_CELLS)

    def unchecked_of(self, cq: str) -> set[str]:
        return self.unchecked.get(cq, set())


__all__ = ["Cached", "EntryCache", "QueueMarks", "TouchedKeys", "drop_stale"]
