"""The timed rules' deadlines of a replay, kept in a heap (docs/simulate.md#replay-cost).

The core's timed rules (requeue backoff, pods-ready timeouts, maximum execution time,
`scheduler/core/pods_ready.py`) are deadlines computed from a workload's own state.
Asking the core for the next deadline walks every workload it is given; at every
instant of a replay of thousands of pending workloads that walk was most of the
simulator's time. Here a workload's deadlines are recomputed only when it may have
changed (the replay marks it: an event named it, the change feed showed it as a head,
an admission or an eviction, or the timed rules fired it), and the deadlines are kept
in a heap, with lazy deletion: an entry is stale once its workload was recomputed.

The answers are those of `pods_ready.next_deadline` and `pods_ready.fire_due` over
every workload (tests/unit/sim/test_replay_indexes.py checks it at every step).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field

from scheduler.core.clock import Instant
from scheduler.core.pods_ready import deadlines, fire_due
from scheduler.core.scheduler import Scheduler


@dataclass(slots=True)
class DeadlineIndex:
    """Deadlines of the workloads that have one, recomputed for the keys marked dirty."""

    dirty: set[str] = field(default_factory=set)
    # (deadline, workload key, generation of the key's computation)
    _heap: list[tuple[Instant, str, int]] = field(default_factory=list)
    _generation: dict[str, int] = field(default_factory=dict)  # keys with deadlines
    _seq: int = 0

    def mark(self, keys: Iterable[str]) -> None:
        """These workloads may have changed (or are gone)."""
        self.dirty.update(keys)

    def mark_all(self, s: Scheduler) -> None:
        """Anything may have changed: every workload, and every one indexed."""
        self.dirty.update(s.objects.workloads)
        self.dirty.update(self._generation)

    def _refresh(self, s: Scheduler) -> None:
        if not self.dirty:
            return
        for key in self.dirty:
            wl = s.objects.workloads.get(key)
            found = deadlines(s, wl) if wl is not None and not wl.finished else []
            if not found:
                self._generation.pop(key, None)
                continue
            self._seq += 1
            self._generation[key] = self._seq
            for d in found:
                heapq.heappush(self._heap, (d.at, key, self._seq))
        self.dirty.clear()

    def _valid(self, item: tuple[Instant, str, int]) -> bool:
        return self._generation.get(item[1]) == item[2]

    def next_deadline(self, s: Scheduler) -> Instant | None:
        """The earliest deadline strictly after now (`pods_ready.next_deadline`)."""
        self._refresh(s)
        now = s.now()
        heap = self._heap
        due: list[tuple[Instant, str, int]] = []  # not fired yet: kept, but not "next"
        found: Instant | None = None
        while heap:
            item = heap[0]
            if not self._valid(item):
                heapq.heappop(heap)
            elif item[0] <= now:
                due.append(heapq.heappop(heap))
            else:
                found = item[0]
                break
        for item in due:
            heapq.heappush(heap, item)
        return found

    def fire_due(self, s: Scheduler) -> list[str]:
        """Fire every deadline at or before now (`pods_ready.fire_due`, given the
        workloads that have one due: it fires them in the same order); the keys of
        the workloads that had one, if any fired."""
        self._refresh(s)
        now = s.now()
        heap = self._heap
        keys: set[str] = set()
        while heap and heap[0][0] <= now:
            item = heapq.heappop(heap)
            if self._valid(item):
                keys.add(item[1])
        if not keys:
            return []
        # Every deadline of these keys is recomputed after the rules ran (popped
        # entries included: one may not have fired).
        self.dirty.update(keys)
        ordered = sorted(keys)
        return ordered if fire_due(s, ordered) else []
