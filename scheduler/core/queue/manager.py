"""One pending queue per ClusterQueue, plus which LocalQueue feeds which ClusterQueue.

A thin, deterministic coordinator: the scheduler decides which workloads are queued,
which ClusterQueues are active and which form a tree to flush; the manager keeps every
workload in at most one queue and iterates ClusterQueues in name order. With a change
feed attached (:meth:`QueueManager.record_to`) it records every call that can change a
ClusterQueue's pending order, and the heads it pops (:mod:`scheduler.core.changes`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from scheduler.core.changes import ChangeFeed
from scheduler.core.clock import Instant
from scheduler.core.queue.interface import (
    PendingQueue,
    QueueEntry,
    QueueFactory,
    QueueSettings,
    RequeueReason,
)
from scheduler.core.queue.loader import resolve_queue_factory

# Pushing needs an instant for the backoff gate (docs/scheduling.md#backoff-gate). Without one,
# nothing with a requeueAt can be proven expired, so such workloads are parked rather than released
# early; the flush that follows a ClusterQueue change releases them at the real time.
_BEFORE_ANY_TIME: Instant = -(2**63)


class QueueManager:
    def __init__(self) -> None:
        self._queues: dict[str, PendingQueue] = {}
        self._factories: dict[str, QueueFactory] = {}
        self._where: dict[str, str] = {}  # workload key -> ClusterQueue holding it
        self._lq_to_cq: dict[str, str] = {}  # "namespace/name" -> ClusterQueue
        self._feed: ChangeFeed | None = None

    def record_to(self, feed: ChangeFeed) -> None:
        """Record from now on what changes in `feed`."""
        self._feed = feed

    # -- ClusterQueues -----------------------------------------------------------------
    def set_cluster_queue(
        self, settings: QueueSettings, plugin: str | None = None, *, now: Instant | None = None
    ) -> None:
        """Create the queue of ``settings.cluster_queue``, or apply new settings; swap
        implementations if needed.

        On a swap, heap + parked workloads are pushed into the new queue (at ``now``,
        see ``_BEFORE_ANY_TIME``); an in-flight head is left to the cycle, whose
        requeue inserts it into the new queue. Raises QueuePluginError (a ValueError)
        if ``plugin or settings.strategy`` does not resolve; the old queue then stays.
        """
        name = settings.cluster_queue
        factory = resolve_queue_factory(plugin or settings.strategy)
        if self._feed is not None:
            self._feed.mark(name)
        old = self._queues.get(name)
        if old is not None and self._factories[name] is factory:
            old.update_settings(settings)
            return
        queue = factory(settings)
        self._queues[name] = queue
        self._factories[name] = factory
        if old is not None:
            at = _BEFORE_ANY_TIME if now is None else now
            for entry in old.queued_entries():
                queue.push(entry, at)

    def delete_cluster_queue(self, name: str) -> list[QueueEntry]:
        """Drop the queue; returns every workload it held (in-flight too), in order."""
        queue = self._queues.pop(name, None)
        self._factories.pop(name, None)
        if queue is None:
            return []
        if self._feed is not None:
            self._feed.mark(name)
        orphans = list(queue.listing())
        for entry in orphans:
            if self._where.get(entry.key) == name:
                del self._where[entry.key]
        return orphans

    def queue(self, cq: str) -> PendingQueue | None:
        return self._queues.get(cq)

    def cluster_queues(self) -> list[str]:
        return sorted(self._queues)

    # -- LocalQueues -------------------------------------------------------------------
    def set_local_queue(
        self, namespace: str, name: str, cluster_queue: str, *, now: Instant
    ) -> None:
        """Map a LocalQueue to its ClusterQueue, moving its pending workloads if the
        target changed (workloads in flight move too; see :meth:`requeue`)."""
        lq = f"{namespace}/{name}"
        previous = self._lq_to_cq.get(lq)
        self._lq_to_cq[lq] = cluster_queue
        if previous is None or previous == cluster_queue:
            return
        for entry in self._entries_of_local_queue(previous, lq):
            self.delete(entry.key)
            if cluster_queue in self._queues:
                self.push(cluster_queue, entry, now)

    def delete_local_queue(self, namespace: str, name: str) -> list[QueueEntry]:
        """Forget the LocalQueue; its workloads are no longer queued and are returned."""
        lq = f"{namespace}/{name}"
        cq = self._lq_to_cq.pop(lq, None)
        if cq is None:
            return []
        orphans = self._entries_of_local_queue(cq, lq)
        for entry in orphans:
            self.delete(entry.key)
        return orphans

    def cluster_queue_of(self, namespace: str, local_queue: str) -> str | None:
        return self._lq_to_cq.get(f"{namespace}/{local_queue}")

    def _entries_of_local_queue(self, cq: str, lq: str) -> list[QueueEntry]:
        queue = self._queues.get(cq)
        if queue is None:
            return []
        return [e for e in queue.listing() if e.local_queue_key == lq]

    # -- workloads -----------------------------------------------------------------------
    def locate(self, key: str) -> str | None:
        """The ClusterQueue whose queue holds ``key`` (heap, parked or in-flight)."""
        cq = self._where.get(key)
        if cq is None:
            return None
        queue = self._queues.get(cq)
        # Guards against a release done directly on the queue rather than through us.
        return cq if queue is not None and key in queue else None

    def push(self, cq: str, entry: QueueEntry, now: Instant) -> None:
        """Queue or update ``entry`` in ``cq``, removing it from any other queue first."""
        queue = self._queues.get(cq)
        if queue is None:
            raise KeyError(f"no queue for ClusterQueue {cq!r}")
        current = self._where.get(entry.key)
        if current is not None and current != cq:
            self.delete(entry.key)
        queue.push(entry, now)
        self._where[entry.key] = cq
        if self._feed is not None:
            self._feed.touch(cq, entry.key)

    def delete(self, key: str) -> QueueEntry | None:
        cq = self._where.pop(key, None)
        if cq is None:
            return None
        queue = self._queues.get(cq)
        if queue is None:
            return None
        if self._feed is not None:
            self._feed.mark(cq)
        return queue.delete(key)

    def requeue(
        self,
        cq: str,
        entry: QueueEntry,
        reason: RequeueReason,
        now: Instant,
        *,
        has_untried_flavors: bool,
    ) -> bool:
        """Put a popped head back into ``cq`` (docs/scheduling.md#requeue-after-a-cycle); False if
        it is not done.

        Refused when the workload meanwhile moved to another ClusterQueue's queue (so it
        is never queued twice) or ``cq`` is gone. The caller still owns the re-read of
        docs/scheduling.md#requeue-after-a-cycle (deleted, holds quota, LocalQueue gone).
        """
        queue = self._queues.get(cq)
        if queue is None:
            return False
        current = self.locate(entry.key)
        if current is not None and current != cq:
            return False
        queue.requeue(entry, reason, now, has_untried_flavors=has_untried_flavors)
        self._where[entry.key] = cq
        if self._feed is not None:
            self._feed.touch(cq, entry.key)
        return True

    def release_in_flight(self, cq: str, key: str) -> QueueEntry | None:
        """The head popped from ``cq`` was admitted: it leaves the queue."""
        queue = self._queues.get(cq)
        if queue is None:
            return None
        entry = queue.release_in_flight(key)
        if entry is not None:
            if self._where.get(key) == cq:
                del self._where[key]
            if self._feed is not None:
                self._feed.mark(cq)
        return entry

    # -- cycle -------------------------------------------------------------------------
    def heads(self, now: Instant, active: Callable[[str], bool]) -> list[tuple[str, QueueEntry]]:
        """Pop one head from every active ClusterQueue, in name order
        (docs/scheduling.md#cycle-steps step 1)."""
        heads: list[tuple[str, QueueEntry]] = []
        for cq in sorted(self._queues):
            if not active(cq):
                continue
            entry = self._queues[cq].pop(now)
            if entry is not None:
                heads.append((cq, entry))
                if self._feed is not None:
                    self._feed.head(cq, entry.key)
        return heads

    def flush(
        self,
        cqs: Iterable[str],
        now: Instant,
        namespace_matches: Callable[[str, str], bool],
    ) -> None:
        """Flush each named ClusterQueue (docs/scheduling.md#flush); unknown names are ignored."""
        for cq in sorted(set(cqs)):
            queue = self._queues.get(cq)
            if queue is not None:
                queue.flush(now, _bind_cq(namespace_matches, cq))


def _bind_cq(namespace_matches: Callable[[str, str], bool], cq: str) -> Callable[[str], bool]:
    # A named function rather than a lambda in the loop: binds ``cq`` by value.
    def matches(namespace: str) -> bool:
        return namespace_matches(cq, namespace)

    return matches
