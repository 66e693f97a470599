"""Capture the core's pending order into snapshot entries.

Entries are cached per workload and rebuilt only when something they show changed,
so a republish after one admission re-renders nothing but the moved view's index.
"""

from __future__ import annotations

from types import MappingProxyType

from scheduler.core.scheduler import Scheduler
from scheduler.core.visibility import owner_references
from scheduler.core.workload import QUOTA_RESERVED, WorkloadState
from scheduler.runtime.snapshot import (
    ClusterQueueView,
    OwnerRef,
    PendingEntry,
    Snapshot,
    build_view,
)


class EntryCache:
    def __init__(self) -> None:
        self._entries: dict[str, tuple[tuple[object, ...], PendingEntry]] = {}

    def entry(self, wl: WorkloadState) -> PendingEntry:
        reserved = wl.conditions.get(QUOTA_RESERVED)
        why = reserved.message if reserved is not None and reserved.status == "False" else ""
        token = (wl.revision, wl.creation, wl.priority, wl.queue_name, why, id(wl.raw))
        found = self._entries.get(wl.key)
        if found is not None and found[0] == token:
            return found[1]
        owners = tuple(OwnerRef(*o) for o in owner_references(wl.raw))
        entry = PendingEntry.make(
            wl.namespace, wl.name, wl.creation, owners, wl.priority, wl.queue_name, why
        )
        self._entries[wl.key] = (token, entry)
        return entry

    def forget_missing(self, live: set[str]) -> None:
        for key in [k for k in self._entries if k not in live]:
            del self._entries[key]


def capture_view(s: Scheduler, cluster_queue: str, cache: EntryCache) -> ClusterQueueView:
    queue = s.queues.queue(cluster_queue)
    order = queue.listing() if queue is not None else ()
    entries = [cache.entry(s.workloads[e.key]) for e in order if e.key in s.workloads]
    return build_view(cluster_queue, entries)


def capture_snapshot(
    s: Scheduler, cache: EntryCache, generation: int, *, synced: bool = True
) -> Snapshot:
    """A whole snapshot in one synchronous step (the simulator, tests, small clusters)."""
    views = {cq: capture_view(s, cq, cache) for cq in sorted(s.cluster_queues)}
    workloads = {entry.key: cq for cq, view in views.items() for entry in view.entries}
    local_queues = {
        (lq.namespace, lq.name): (lq.cluster_queue if lq.cluster_queue in s.cluster_queues else "")
        for lq in s.local_queues.values()
    }
    cache.forget_missing(set(s.workloads))
    return Snapshot(
        generation=generation,
        synced=synced,
        views=MappingProxyType(views),
        local_queues=MappingProxyType(local_queues),
        workloads=MappingProxyType(workloads),
    )
