"""The dashboard's JSON documents, built from one snapshot and what the caller may see.

Pure functions of their inputs: the handler decides the rights (one authorization
decision per ClusterQueue, LocalQueue or namespace, cached like the API's) and passes
them in as sets, so every document here is a filter of the snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.api.quantity import format_resource
from scheduler.runtime.estimates import AdmissionVelocity
from scheduler.runtime.pages import ClusterQueueView, PageItem
from scheduler.runtime.quota_snapshot import ClusterQueueQuota, CohortQuota, ResourceUsage
from scheduler.runtime.snapshot import Snapshot
from scheduler.runtime.workload_records import Instant
from visibility_server.http.position import ForecastLookup
from visibility_server.http.timestamps import rfc3339_seconds
from visibility_server.http.waiting import estimated_start, estimated_wait, why_pending

Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Visible:
    """What one caller may see, decided by the handler."""

    user: str
    groups: tuple[str, ...]
    all_cluster_queues: bool  # every ClusterQueue, hence the cohorts' totals
    cluster_queues: frozenset[str]
    all_local_queues: bool  # every LocalQueue (of `namespace`, when one is asked for)
    local_queues: frozenset[tuple[str, str]]  # the others one may see, one by one
    namespace: str  # the namespace asked for, "" for none


def _resource(r: ResourceUsage) -> Json:
    def shown(value: int | None) -> str | None:
        return None if value is None else format_resource(r.resource, value)

    return {
        "flavor": r.flavor,
        "resource": r.resource,
        "nominal": r.nominal,
        "usage": r.usage,
        "borrowed": r.borrowed,
        "lendable": r.lendable,
        "subtreeQuota": r.subtree_quota,
        "borrowingLimit": r.borrowing_limit,
        "lendingLimit": r.lending_limit,
        "display": {
            "nominal": shown(r.nominal),
            "usage": shown(r.usage),
            "borrowed": shown(r.borrowed),
            "lendable": shown(r.lendable),
            "subtreeQuota": shown(r.subtree_quota),
            "borrowingLimit": shown(r.borrowing_limit),
            "lendingLimit": shown(r.lending_limit),
        },
    }


def _cluster_queue(snapshot: Snapshot, cq: ClusterQueueQuota, now: Instant) -> Json:
    view = snapshot.view(cq.name)
    velocity = snapshot.velocities.get(cq.name)
    rate = velocity.rate(now) if velocity is not None else 0.0
    return {
        "name": cq.name,
        "cohort": cq.cohort,
        "active": cq.active,
        "inactiveReasons": list(cq.inactive_reasons),
        "strategy": cq.strategy,
        "pending": len(view) if view is not None else 0,
        "reserving": cq.reserving,
        "admissionsPerHour": round(rate * 3600.0, 2),
        "resources": [_resource(r) for r in cq.resources],
    }


def _cohort(cohort: CohortQuota) -> Json:
    return {
        "name": cohort.name,
        "parent": cohort.parent,
        "resources": [_resource(r) for r in cohort.resources],
    }


def overview(snapshot: Snapshot, visible: Visible, now: Instant) -> Json:
    """The cohort forest, the visible ClusterQueues and the visible LocalQueues."""
    quota = snapshot.quota
    cluster_queues = [
        _cluster_queue(snapshot, cq, now)
        for cq in quota.cluster_queues
        if visible.all_cluster_queues or cq.name in visible.cluster_queues
    ]
    cohorts = [_cohort(c) for c in quota.cohorts] if visible.all_cluster_queues else []
    local_queues = []
    for (namespace, name), cq_name in sorted(snapshot.local_queues.items()):
        if visible.namespace and namespace != visible.namespace:
            continue
        if not (visible.all_local_queues or (namespace, name) in visible.local_queues):
            continue
        view = snapshot.view(cq_name) if cq_name else None
        local_queues.append(
            {
                "namespace": namespace,
                "name": name,
                "clusterQueue": cq_name,
                "pending": len(view.local_queue_indexes(namespace, name)) if view else 0,
            }
        )
    return {
        "kind": "DashboardOverview",
        "user": {"name": visible.user, "groups": list(visible.groups)},
        "allClusterQueues": visible.all_cluster_queues,
        "allLocalQueues": visible.all_local_queues,
        "namespace": visible.namespace,
        "cohorts": cohorts,
        "clusterQueues": cluster_queues,
        "localQueues": local_queues,
    }


def local_queues_of(snapshot: Snapshot, namespace: str | None) -> list[tuple[str, str]]:
    """LocalQueue keys, of one namespace or all, in order."""
    return sorted(k for k in snapshot.local_queues if namespace is None or k[0] == namespace)


def _item(
    item: PageItem,
    velocity: AdmissionVelocity | None,
    now: Instant,
    details: Callable[[str], bool],
    forecasts: ForecastLookup | None,
) -> Json:
    entry = item.entry
    body: Json = {
        "namespace": entry.namespace,
        "name": entry.name,
        "localQueue": entry.local_queue,
        "priority": entry.priority,
        "positionInClusterQueue": item.position_in_cluster_queue,
        "positionInLocalQueue": item.position_in_local_queue,
        "creationTimestamp": rfc3339_seconds(entry.creation),
    }
    if details(entry.namespace):
        if entry.why is not None:
            body["whyPending"] = why_pending(entry.why)
        wait = estimated_wait(velocity, item.position_in_cluster_queue, now)
        if wait is not None:
            body["estimatedWait"] = wait
        forecast = forecasts(entry.namespace, entry.name) if forecasts is not None else None
        if forecast is not None:
            body["estimatedStart"] = estimated_start(forecast)
    return body


@dataclass(frozen=True, slots=True)
class PendingPage:
    """The first items of a ClusterQueue's order, or of one of its LocalQueues."""

    view: ClusterQueueView
    items: Sequence[PageItem]
    total: int  # pending in the queue, not only on the page
    local_queue: tuple[str, str] | None = None  # (namespace, name) for a LocalQueue


def pending_list(
    snapshot: Snapshot,
    page: PendingPage,
    now: Instant,
    details: Callable[[str], bool],
    forecasts: ForecastLookup | None = None,
) -> Json:
    """One page of a ClusterQueue's or LocalQueue's pending workloads, with why they wait
    and when they may be admitted where `details(namespace)` allows it."""
    view, items, total, local_queue = page.view, page.items, page.total, page.local_queue
    velocity = snapshot.velocities.get(view.name)
    doc: Json = {
        "kind": "DashboardPendingList",
        "clusterQueue": view.name,
        "resourceVersion": (
            view.local_queue_digest(*local_queue) if local_queue is not None else view.digest
        ),
        "total": total,
        "admissionsPerHour": round(velocity.rate(now) * 3600.0, 2) if velocity else 0.0,
        "items": [_item(i, velocity, now, details, forecasts) for i in items],
    }
    if local_queue is not None:
        doc["localQueue"] = {"namespace": local_queue[0], "name": local_queue[1]}
    return doc


def namespaces_of(items: Iterable[PageItem]) -> Collection[str]:
    return sorted({i.entry.namespace for i in items})
