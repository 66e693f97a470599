"""Which workloads hold quota in which ClusterQueue, with a priority index per queue.

The index lets preemption answer "is there anything of lower priority to preempt?"
in O(1) before it builds any candidate list. Each ClusterQueue also has an epoch that
moves whenever its set of holders, or what the preemption search reads from one of
them, changes: the cycle's nomination cache keys on it.
"""

from __future__ import annotations

from sortedcontainers import SortedList


class Holders:
    def __init__(self) -> None:
        self._members: dict[str, dict[str, int]] = {}  # cq -> key -> priority
        self._priorities: dict[str, SortedList[int]] = {}
        self._cq_of: dict[str, str] = {}
        self._epochs: dict[str, int] = {}
        self._epoch_counter = 0

    def add(self, cq: str, key: str, priority: int) -> None:
        self.discard(key)
        self._members.setdefault(cq, {})[key] = priority
        self._priorities.setdefault(cq, SortedList()).add(priority)
        self._cq_of[key] = cq
        self._bump(cq)

    def discard(self, key: str) -> str | None:
        """Forget `key`; returns the ClusterQueue it held quota in, if any."""
        cq = self._cq_of.pop(key, None)
        if cq is None:
            return None
        priority = self._members[cq].pop(key)
        self._priorities[cq].remove(priority)
        self._bump(cq)
        return cq

    def touch(self, key: str) -> None:
        """A holder changed in place (for example it was evicted): move its CQ's epoch."""
        cq = self._cq_of.get(key)
        if cq is not None:
            self._bump(cq)

    def epoch(self, cq: str) -> int:
        """Changes whenever `cq`'s holders change; never repeats a value for a CQ."""
        return self._epochs.get(cq, 0)

    def _bump(self, cq: str) -> None:
        self._epoch_counter += 1
        self._epochs[cq] = self._epoch_counter

    def cluster_queue_of(self, key: str) -> str | None:
        return self._cq_of.get(key)

    def keys(self, cq: str) -> list[str]:
        """Holders of `cq` in key order (deterministic iteration)."""
        return sorted(self._members.get(cq, {}))

    def count(self, cq: str) -> int:
        return len(self._members.get(cq, {}))

    def lowest_priority(self, cq: str) -> int | None:
        prios = self._priorities.get(cq)
        return prios[0] if prios else None

    def all_keys(self) -> list[str]:
        return sorted(self._cq_of)
