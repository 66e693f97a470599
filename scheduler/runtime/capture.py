"""Capture the core's state into snapshot parts: pending entries and the quota tree.

Entries are cached per workload and rebuilt only when something they show changed,
so a republish after one admission re-renders nothing but the moved view's index.
The quota capture reads O(#ClusterQueues + #Cohorts) nodes of the tree, each with its
handful of (flavor, resource) pairs; it never walks workloads.
"""

from __future__ import annotations

from types import MappingProxyType

from scheduler.core.quota import NodeRef
from scheduler.core.state_view import ClusterStateView
from scheduler.core.visibility import owner_references
from scheduler.core.workload import QUOTA_RESERVED, WorkloadState
from scheduler.runtime.forecast_facts import facts_are_current, workload_facts
from scheduler.runtime.pages import ClusterQueueView, build_view
from scheduler.runtime.quota_snapshot import (
    ClusterQueueQuota,
    CohortQuota,
    QuotaSnapshot,
    ResourceUsage,
)
from scheduler.runtime.snapshot import Snapshot
from scheduler.runtime.why import why_pending
from scheduler.runtime.workload_records import PendingEntry


def entry_is_current(
    entry: PendingEntry, wl: WorkloadState, eviction_ordering: bool = True
) -> bool:
    """Whether `entry` still shows `wl` as it is: every field an entry shows, compared.

    (Cheaper to keep than a token of the same fields per workload; the owner tuple is
    the core's own object, so its comparison is an identity check.)
    """
    if (
        entry.creation != wl.creation
        or entry.priority != wl.priority
        or entry.local_queue != wl.queue_name
        or entry.owners != owner_references(wl.raw)
        or not facts_are_current(entry.facts, wl, eviction_ordering)
    ):
        return False
    reserved = wl.conditions.get(QUOTA_RESERVED)
    why = entry.why
    if reserved is None or reserved.status != "False":
        return why is None
    return (
        why is not None
        and why.reason == reserved.reason
        and why.message == reserved.message
        and why.since == reserved.last_transition
    )


def make_entry(wl: WorkloadState, eviction_ordering: bool = True) -> PendingEntry:
    why = why_pending(wl)
    return PendingEntry.make(
        wl.namespace,
        wl.name,
        wl.creation,
        owner_references(wl.raw),
        wl.priority,
        wl.queue_name,
        why.message if why is not None else "",
        why,
        workload_facts(wl, eviction_ordering),
    )


class EntryCache:
    def __init__(self) -> None:
        self._entries: dict[str, PendingEntry] = {}

    def entry(self, wl: WorkloadState, eviction_ordering: bool = True) -> PendingEntry:
        found = self._entries.get(wl.key)
        if found is not None and entry_is_current(found, wl, eviction_ordering):
            return found
        entry = make_entry(wl, eviction_ordering)
        self._entries[wl.key] = entry
        return entry

    def forget_missing(self, live: set[str]) -> None:
        for key in [k for k in self._entries if k not in live]:
            del self._entries[key]


def capture_view(s: ClusterStateView, cluster_queue: str, cache: EntryCache) -> ClusterQueueView:
    queue = s.queues.queue(cluster_queue)
    order = queue.listing() if queue is not None else ()
    ordering = s.config.eviction_ordering
    workloads = s.objects.workloads
    entries = [cache.entry(workloads[e.key], ordering) for e in order if e.key in workloads]
    return build_view(cluster_queue, entries)


def capture_quota(s: ClusterStateView) -> QuotaSnapshot:
    """Quotas and usage of every ClusterQueue and Cohort, by name."""
    tree = s.quota
    cluster_queues: list[ClusterQueueQuota] = []
    for name in sorted(s.objects.cluster_queues):
        info = s.objects.cluster_queues[name]
        resources = []
        if tree.has_cluster_queue(name):
            for group in info.groups:
                for flavor in group.flavors:
                    for resource in sorted(group.covered):
                        fr = (flavor, resource)
                        nominal = tree.nominal(name, fr)
                        resources.append(
                            ResourceUsage(
                                flavor,
                                resource,
                                nominal=nominal,
                                usage=tree.usage(name, fr),
                                subtree_quota=nominal,
                                borrowing_limit=tree.borrowing_limit(name, fr),
                                lending_limit=tree.lending_limit(name, fr),
                            )
                        )
        reasons = tuple(s.inactive_reasons(name))
        cluster_queues.append(
            ClusterQueueQuota(
                name=name,
                cohort=info.cohort or "",
                active=not reasons,
                inactive_reasons=reasons,
                strategy=info.queue_plugin or info.strategy,
                reserving=s.holders.count(name),
                resources=tuple(resources),
            )
        )
    cohorts: list[CohortQuota] = []
    for name in tree.cohorts():
        node = NodeRef.cohort(name)
        parent = tree.parent(node)
        quotas = tree.quotas(node)
        subtree = tree.subtree_quotas(node)
        usage = tree.node_usages(node)
        resources = []
        for fr in sorted(subtree.keys() | quotas.keys() | usage.keys()):
            own = quotas.get(fr)
            resources.append(
                ResourceUsage(
                    *fr,
                    nominal=own.nominal if own is not None else 0,
                    usage=usage.get(fr, 0),
                    subtree_quota=subtree.get(fr, 0),
                    borrowing_limit=own.borrowing_limit if own is not None else None,
                    lending_limit=own.lending_limit if own is not None else None,
                )
            )
        cohorts.append(
            CohortQuota(name, parent.name if parent is not None else "", tuple(resources))
        )
    return QuotaSnapshot(tuple(cluster_queues), tuple(cohorts))


def capture_snapshot(
    s: ClusterStateView, cache: EntryCache, generation: int, *, synced: bool = True
) -> Snapshot:
    """A whole snapshot in one synchronous step (the simulator, tests, small clusters)."""
    views = {cq: capture_view(s, cq, cache) for cq in sorted(s.objects.cluster_queues)}
    workloads = {entry.key: cq for cq, view in views.items() for entry in view.entries}
    local_queues = {
        (lq.namespace, lq.name): (
            lq.cluster_queue if lq.cluster_queue in s.objects.cluster_queues else ""
        )
        for lq in s.objects.local_queues.values()
    }
    cache.forget_missing(set(s.objects.workloads))
    return Snapshot(
        generation=generation,
        synced=synced,
        views=MappingProxyType(views),
        local_queues=MappingProxyType(local_queues),
        workloads=MappingProxyType(workloads),
        quota=capture_quota(s),
    )
