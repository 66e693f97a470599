"""What changed in the core since the last look, as data (the change feed).

Whoever mirrors the core incrementally (the runtime's snapshot publisher, its status
writer) needs to know what moved without comparing everything. The core records it
here as it goes: the queue manager notes every ClusterQueue whose pending order may
have changed and the workloads it pushed or requeued there, the cycle notes the heads
it examined and the workloads it admitted, and evictions note their workload. The
reader takes everything recorded so far with one call (:meth:`ChangeFeed.drain`).

Recording is off until a reader asks for it (:meth:`Scheduler.follow_changes`), so the
simulator and the tests, which never drain, do not accumulate anything. Marks are set
insertions and list appends, so the hot paths stay O(1).

A mark says a ClusterQueue *may* have changed. Flushes are not recorded: they only
move workloads between the heap and the parked set, and the pending order covers both.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class Changes:
    """Everything recorded between two drains."""

    # ClusterQueue -> the workload keys pushed or requeued there (possibly none: a
    # deletion, an admission or a lifecycle change marks the ClusterQueue alone).
    queues: dict[str, set[str]] = field(default_factory=dict)
    # (ClusterQueue, workload key) of every head a cycle examined, in order.
    heads: list[tuple[str, str]] = field(default_factory=list)
    admitted: list[str] = field(default_factory=list)  # workload keys, in order
    evicted: list[str] = field(default_factory=list)  # workload keys, in order

    def merge(self, other: Changes) -> None:
        """Add `other`'s records to these (a reader that drains for someone else)."""
        for cq, keys in other.queues.items():
            mine = self.queues.get(cq)
            if mine is None:
                self.queues[cq] = set(keys)
            else:
                mine.update(keys)
        self.heads.extend(other.heads)
        self.admitted.extend(other.admitted)
        self.evicted.extend(other.evicted)

    def __bool__(self) -> bool:
        return bool(self.queues or self.heads or self.admitted or self.evicted)


class ChangeFeed:
    """The recorder the core writes to; the reader drains it."""

    __slots__ = ("_changes",)

    def __init__(self) -> None:
        self._changes = Changes()

    def mark(self, cluster_queue: str) -> None:
        """The pending order of `cluster_queue` may have changed."""
        if cluster_queue not in self._changes.queues:
            self._changes.queues[cluster_queue] = set()

    def touch(self, cluster_queue: str, key: str) -> None:
        """`key` was pushed or requeued in `cluster_queue` (its entry was replaced)."""
        keys = self._changes.queues.get(cluster_queue)
        if keys is None:
            self._changes.queues[cluster_queue] = {key}
        else:
            keys.add(key)

    def head(self, cluster_queue: str, key: str) -> None:
        self._changes.heads.append((cluster_queue, key))

    def admitted(self, key: str) -> None:
        self._changes.admitted.append(key)

    def evicted(self, key: str) -> None:
        self._changes.evicted.append(key)

    def drain(self) -> Changes:
        """Everything recorded since the previous drain; recording starts afresh."""
        changes, self._changes = self._changes, Changes()
        return changes
