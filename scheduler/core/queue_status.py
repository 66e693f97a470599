"""Status-based visibility of pending workloads (KEP-168,
docs/scheduling.md#pending-workloads-in-status).

Each ClusterQueue's ``status.pendingWorkloadsStatus`` lists the first ``maxCount``
workloads of its listing snapshot (docs/scheduling.md#pluggable-queues: heap + parked + in-flight in
queue order); with the LocalQueue extension (D8, docs/scheduling.md#localqueue-pending-list) each
LocalQueue lists its own workloads among the first ``maxPosition`` of its ClusterQueue's listing,
with their positions.

Upstream refreshes these from periodic in-memory snapshots and throttles the status
writes. The deterministic model (docs/scheduling.md#snapshots-and-throttling) is what
:class:`QueueStatusTracker` implements: snapshots are taken at ``start + k × updateIntervalSeconds``
and once at the end of a run; the published list is the latest snapshot's, and
``lastChangeTime`` is the snapshot instant at which that list last changed. A queue
seen for the first time publishes at its first snapshot (upstream writes the status
when it is absent), so ``lastChangeTime`` is then that instant even for an empty list.

Reading a head is O(maxCount + log n) per ClusterQueue (``iter_ordered``), so taking
a snapshot never walks a long queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any, Generic, Protocol, TypeVar

from scheduler.core.clock import MICROS_PER_SECOND, Instant, format_instant
from scheduler.core.config import QueueVisibility
from scheduler.core.scheduler import Scheduler

Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ClusterQueuePendingWorkload:
    name: str
    namespace: str

    def to_json(self) -> Json:
        return {"name": self.name, "namespace": self.namespace}


@dataclass(frozen=True, slots=True)
class LocalQueuePendingWorkload:
    name: str
    position: int  # 0-based index in the ClusterQueue's listing snapshot

    def to_json(self) -> Json:
        return {"name": self.name, "position": self.position}


class _Listed(Protocol):
    def to_json(self) -> Json: ...


_W = TypeVar("_W", bound=_Listed)


@dataclass(frozen=True, slots=True)
class PendingStatus(Generic[_W]):
    """The list a queue publishes and the snapshot instant at which it last changed."""

    head: tuple[_W, ...]
    last_change_time: Instant

    def to_json(self, list_name: str) -> Json:
        return {
            list_name: [w.to_json() for w in self.head],
            "lastChangeTime": format_instant(self.last_change_time),
        }


# The list's JSON name: a ClusterQueue's is `clusterQueuePendingWorkload`, a
# LocalQueue's `head` (docs/scheduling.md#enablement-and-shape).
CLUSTER_QUEUE_LIST = "clusterQueuePendingWorkload"
LOCAL_QUEUE_LIST = "head"
ClusterQueuePendingStatus = PendingStatus[ClusterQueuePendingWorkload]
LocalQueuePendingStatus = PendingStatus[LocalQueuePendingWorkload]


def _publish(
    published: dict[str, PendingStatus[_W]], heads: Mapping[str, tuple[_W, ...]], at: Instant
) -> bool:
    """Publish each queue's head whose list changed (or that is seen for the first time,
    as upstream writes an absent status) as of `at`, and forget the queues not in
    `heads`; True if any published list changed."""
    changed = False
    for key, head in heads.items():
        old = published.get(key)
        if old is None or old.head != head:
            published[key] = PendingStatus(head, at)
            changed = True
    for key in published.keys() - heads.keys():
        del published[key]
    return changed


def cluster_queues_enabled(config: QueueVisibility | None) -> bool:
    """docs/scheduling.md#enablement-and-shape: `queueVisibility` present (D7) and an effective
    maxCount above 0."""
    return config is not None and config.cluster_queue_max_count > 0


def local_queues_enabled(config: QueueVisibility | None) -> bool:
    """docs/scheduling.md#localqueue-pending-list: `queueVisibility.localQueues` present with
    maxCount above 0."""
    return (
        config is not None
        and config.local_queue_max_count is not None
        and config.local_queue_max_count > 0
    )


def cluster_queue_head(
    s: Scheduler, cluster_queue: str, max_count: int
) -> tuple[ClusterQueuePendingWorkload, ...]:
    """The first `max_count` workloads of the ClusterQueue's listing."""
    queue = s._queues.queue(cluster_queue)
    if queue is None or max_count <= 0:
        return ()
    return tuple(
        ClusterQueuePendingWorkload(name=e.name, namespace=e.namespace)
        for e in islice(queue.iter_ordered(), max_count)
    )


def local_queue_heads(
    s: Scheduler, cluster_queue: str, max_count: int, max_position: int
) -> dict[str, tuple[LocalQueuePendingWorkload, ...]]:
    """Per LocalQueue (``namespace/name``) of the ClusterQueue: its workloads among the
    first `max_position` of the listing, in order, at most `max_count` each.

    LocalQueues with nothing in that range are absent.
    """
    queue = s._queues.queue(cluster_queue)
    if queue is None or max_count <= 0 or max_position <= 0:
        return {}
    heads: dict[str, list[LocalQueuePendingWorkload]] = {}
    for position, entry in enumerate(islice(queue.iter_ordered(), max_position)):
        members = heads.setdefault(entry.local_queue_key, [])
        if len(members) < max_count:
            members.append(LocalQueuePendingWorkload(name=entry.name, position=position))
    return {lq: tuple(members) for lq, members in heads.items()}


class QueueStatusTracker:
    """The published `pendingWorkloadsStatus` of every queue, under the
    docs/scheduling.md#snapshots-and-throttling model.

    The driver calls :meth:`advance` before its clock moves forward (the state is then
    the one that held since the clock last moved) and :meth:`finish` at the end of a
    run; or :meth:`snapshot` directly at instants of its choosing. A snapshot at
    instant ``T`` sees the state after everything that happened at ``T``.
    """

    def __init__(self, config: QueueVisibility | None, start: Instant) -> None:
        self.config = config
        self.start = start
        self.interval: Instant = (
            max(1, config.update_interval_seconds) * MICROS_PER_SECOND
            if config is not None
            else MICROS_PER_SECOND
        )
        self._next: Instant = start
        self._cluster_queues: dict[str, ClusterQueuePendingStatus] = {}
        self._local_queues: dict[str, LocalQueuePendingStatus] = {}

    # -- configuration -------------------------------------------------------------
    @property
    def cluster_queues_enabled(self) -> bool:
        return cluster_queues_enabled(self.config)

    @property
    def local_queues_enabled(self) -> bool:
        return local_queues_enabled(self.config)

    @property
    def enabled(self) -> bool:
        return self.cluster_queues_enabled or self.local_queues_enabled

    @property
    def next_snapshot_at(self) -> Instant | None:
        """The next scheduled snapshot instant not yet taken; None when disabled."""
        return self._next if self.enabled else None

    # -- driving ---------------------------------------------------------------------
    def advance(self, s: Scheduler, until: Instant) -> bool:
        """Take the snapshots due at the grid instants before `until`.

        The caller guarantees that the current state held at all of them (it calls
        this before moving its clock to `until`), so only the first can observe a
        change: one snapshot at that instant is taken, and the grid moves past the rest.
        Returns True if any published list changed.
        """
        if not self.enabled or until <= self._next:
            return False
        changed = self.snapshot(s, self._next)
        self._next = self._grid_at_or_after(until)
        return changed

    def finish(self, s: Scheduler) -> bool:
        """The snapshot at the end of a run (at the scheduler's current instant)."""
        if not self.enabled:
            return False
        now = s.now()
        changed = self.advance(s, now)
        changed = self.snapshot(s, now) or changed
        self._next = self._grid_at_or_after(now + 1)
        return changed

    def snapshot(self, s: Scheduler, at: Instant) -> bool:
        """Take one snapshot at instant `at`; returns True if any published list changed.

        Queues that no longer exist are forgotten.
        """
        if not self.enabled:
            return False
        changed = False
        config = self.config
        assert config is not None
        if self.cluster_queues_enabled:
            cq_heads = {
                name: cluster_queue_head(s, name, config.cluster_queue_max_count)
                for name in sorted(s._cluster_queues)
            }
            changed = _publish(self._cluster_queues, cq_heads, at)
        if self.local_queues_enabled:
            max_count = config.local_queue_max_count or 0
            heads: dict[str, tuple[LocalQueuePendingWorkload, ...]] = {}
            for cq in sorted({lq.cluster_queue for lq in s._local_queues.values()}):
                if cq in s._cluster_queues:
                    heads.update(
                        local_queue_heads(s, cq, max_count, config.local_queue_max_position)
                    )
            # Only heads computed for a LocalQueue's own ClusterQueue count.
            lq_heads = {
                key: heads.get(key, ()) if lq.cluster_queue in s._cluster_queues else ()
                for key, lq in sorted(s._local_queues.items())
            }
            changed = _publish(self._local_queues, lq_heads, at) or changed
        return changed

    def _grid_at_or_after(self, instant: Instant) -> Instant:
        if instant <= self.start:
            return self.start
        steps = -(-(instant - self.start) // self.interval)  # ceiling division
        return self.start + steps * self.interval

    # -- reading ---------------------------------------------------------------------
    def cluster_queue_status(self, name: str) -> ClusterQueuePendingStatus | None:
        """None when the feature is off or no snapshot has seen the queue yet."""
        if not self.cluster_queues_enabled:
            return None
        return self._cluster_queues.get(name)

    def local_queue_status(self, key: str) -> LocalQueuePendingStatus | None:
        """`key` is ``namespace/name``; None when the extension is off or not seen yet."""
        if not self.local_queues_enabled:
            return None
        return self._local_queues.get(key)

    def cluster_queue_json(self, name: str) -> Json | None:
        status = self.cluster_queue_status(name)
        return None if status is None else status.to_json(CLUSTER_QUEUE_LIST)

    def local_queue_json(self, key: str) -> Json | None:
        status = self.local_queue_status(key)
        return None if status is None else status.to_json(LOCAL_QUEUE_LIST)
