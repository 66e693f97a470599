"""Which ClusterQueues' pending order may have changed since the last publish.

The publisher must not capture every ClusterQueue on every publish: a capture is O(n)
in the queue's length. Instead the runtime installs :class:`TrackingQueueManager` in
place of the scheduler's :class:`QueueManager` (same behaviour, it only calls the
parent) and every call that can change a queue's listing marks that ClusterQueue
dirty. Every path that changes what a view shows goes through these calls: new,
updated, moved or removed workloads (push/delete), cycle heads (pop), requeues with
the new message and entry, admissions (release), and ClusterQueue lifecycle.

Flushes are deliberately not tracked: a flush only moves workloads between the heap
and the parked set, and the listing covers both in the comparator's order, so it
cannot change a view. Marking is a set insertion, so the hot paths stay O(1).

Dirtiness is a hint that a CQ *may* have changed; the publisher then compares the
captured runs of the order with the published ones and keeps what did not change.
Within a dirty CQ the workloads pushed or requeued are also noted ("touched"): their
queue entry was replaced, possibly by an equal one, while what a snapshot shows of
them (the pending message) may have changed; the publisher re-checks exactly those.
"""

from __future__ import annotations

from collections.abc import Callable

from scheduler.core.clock import Instant
from scheduler.core.queue.interface import QueueEntry, QueueSettings, RequeueReason
from scheduler.core.queue.manager import QueueManager
from scheduler.core.scheduler import Scheduler


class TrackingQueueManager(QueueManager):
    def __init__(self) -> None:
        super().__init__()
        self._dirty: set[str] = set()
        self._touched: dict[str, set[str]] = {}
        # (ClusterQueue, workload key) popped by the latest `heads` call
        self.last_heads: list[tuple[str, str]] = []

    # -- reading the marks -----------------------------------------------------------
    def take_dirty(self) -> set[str]:
        """The ClusterQueues marked since the previous call, and reset the marks."""
        dirty, self._dirty = self._dirty, set()
        return dirty

    def take_touched(self) -> dict[str, set[str]]:
        """Per ClusterQueue, the workload keys pushed or requeued since the previous
        call, and reset them."""
        touched, self._touched = self._touched, {}
        return touched

    def _touch(self, cq: str, key: str) -> None:
        self._dirty.add(cq)
        keys = self._touched.get(cq)
        if keys is None:
            self._touched[cq] = {key}
        else:
            keys.add(key)

    def mark(self, cluster_queue: str) -> None:
        self._dirty.add(cluster_queue)

    # -- tracked calls ---------------------------------------------------------------
    def set_cluster_queue(
        self,
        name: str,
        settings: QueueSettings,
        plugin: str | None = None,
        *,
        now: Instant | None = None,
    ) -> None:
        self._dirty.add(name)
        super().set_cluster_queue(name, settings, plugin, now=now)

    def delete_cluster_queue(self, name: str) -> list[QueueEntry]:
        self._dirty.add(name)
        return super().delete_cluster_queue(name)

    def push(self, cq: str, entry: QueueEntry, now: Instant) -> None:
        self._touch(cq, entry.key)
        super().push(cq, entry, now)  # a move to another CQ calls our `delete`

    def delete(self, key: str) -> QueueEntry | None:
        where = self.locate(key)
        removed = super().delete(key)
        if where is not None:
            self._dirty.add(where)
        return removed

    def requeue(
        self,
        cq: str,
        entry: QueueEntry,
        reason: RequeueReason,
        now: Instant,
        *,
        has_untried_flavors: bool,
    ) -> bool:
        done = super().requeue(cq, entry, reason, now, has_untried_flavors=has_untried_flavors)
        if done:
            self._touch(cq, entry.key)
        return done

    def release_in_flight(self, cq: str, key: str) -> QueueEntry | None:
        released = super().release_in_flight(cq, key)
        if released is not None:
            self._dirty.add(cq)
        return released

    def heads(self, now: Instant, active: Callable[[str], bool]) -> list[tuple[str, QueueEntry]]:
        heads = super().heads(now, active)
        self.last_heads = [(cq, entry.key) for cq, entry in heads]
        # Popping does not reorder the listing (in-flight heads stay listed), but the
        # cycle that follows requeues or releases them, which marks the CQ anyway.
        return heads


def install_tracking(s: Scheduler) -> TrackingQueueManager | None:
    """Give `s` a tracking queue manager; None if it already holds queues (then the
    caller must treat every ClusterQueue as possibly changed)."""
    if isinstance(s.queues, TrackingQueueManager):
        return s.queues
    if type(s.queues) is not QueueManager or s.queues.cluster_queues():
        return None
    tracking = TrackingQueueManager()
    s.queues = tracking
    return tracking
