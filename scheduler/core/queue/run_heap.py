"""The active heap of a FIFO queue, kept as a few sorted lists (docs/scheduling.md#flush-cost).

A flush hands the heap every parked workload at once, as one sorted list. Merging it into
the heap's own sorted list costs a pass over both, whatever their sizes: when quota is
released half way through a walk of a deep BestEffortFIFO queue, both are large (about
120 ms for 100,000 + 100,000 workloads, 650 ms at a million). Kept as a list of its own,
it costs nothing, and the pop takes the smallest of the lists' first items. The lists
stay few: one joins only when a flush brings more than `small` workloads (fewer are
inserted one by one into the first list), an emptied list is dropped, and should there
ever be more than `max_runs`, the two smallest are merged.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from sortedcontainers import SortedList

T = TypeVar("T")  # totally ordered, unique


class RunHeap(Generic[T]):
    def __init__(self, *, small: int = 1024, max_runs: int = 16) -> None:
        if small < 0 or max_runs < 2:
            raise ValueError("small must be >= 0 and max_runs >= 2")
        self._small = small
        self._max_runs = max_runs
        self._runs: list[SortedList[Any]] = []  # none is empty

    def __len__(self) -> int:
        return sum(len(run) for run in self._runs)

    def __bool__(self) -> bool:
        return bool(self._runs)

    @property
    def runs(self) -> int:
        return len(self._runs)

    def first(self) -> T:
        """The smallest item; IndexError when empty."""
        if not self._runs:
            raise IndexError("the heap is empty")
        return min(run[0] for run in self._runs)  # type: ignore[no-any-return]

    def pop_first(self) -> T:
        """Remove and return the smallest item; IndexError when empty."""
        runs = self._runs
        if not runs:
            raise IndexError("the heap is empty")
        at = 0
        if len(runs) > 1:
            at = min(range(len(runs)), key=lambda i: runs[i][0])
        run = runs[at]
        item: T = run.pop(0)
        if not run:
            del runs[at]
        return item

    def add(self, item: T) -> None:
        if self._runs:
            self._runs[0].add(item)
        else:
            self._runs.append(SortedList([item]))

    def remove(self, item: T) -> None:
        """Remove `item`; ValueError if it is not here."""
        for at, run in enumerate(self._runs):
            if item in run:
                run.remove(item)
                if not run:
                    del self._runs[at]
                return
        raise ValueError(f"{item!r} is not in the heap")

    def absorb(self, items: SortedList[Any]) -> None:
        """Take every item of `items` (none already here); the list becomes the heap's
        own when it is large, so the caller must not use it afterwards."""
        if not items:
            return
        if not self._runs:
            self._runs.append(items)
        elif len(items) <= self._small:
            self._runs[0].update(items)
        else:
            self._runs.append(items)
            if len(self._runs) > self._max_runs:
                self._merge_smallest()

    def _merge_smallest(self) -> None:
        self._runs.sort(key=len)
        smallest = self._runs.pop(0)
        self._runs[0].update(smallest)
