"""[EXT] `pendingposition`: where is my workload? (docs/visibility-api.md#pending-position)

A pending Workload is answered from the snapshot in O(1) (its view's index map);
`message` carries the last `QuotaReserved=False` message (why it is still waiting)
when there is one, `whyPending` the same condition with the blockers it names, and
`estimatedWait` when its ClusterQueue admits at a known rate (docs/dashboard.md), and
`estimatedStart` when the forecast worker has made a forecast for it
(docs/forecasting.md#serving).
A Workload that is not pending is classified by an optional lookup the runtime
provides from its informer cache; without one, or when the lookup does not know it
either, the answer is 404.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scheduler.runtime.estimates import AdmissionVelocity, ServedForecast
from scheduler.runtime.pages import ClusterQueueView, PageItem
from scheduler.runtime.workload_records import Instant, NotPending
from visibility_server.http.discovery import POSITION_KIND
from visibility_server.http.timestamps import rfc3339_seconds
from visibility_server.http.waiting import estimated_start, estimated_wait, why_pending

# (namespace, name) -> the Workload's state when it is not pending, None when unknown.
NotPendingLookup = Callable[[str, str], NotPending | None]
# (namespace, name) -> the forecast served for a pending Workload, None without one.
ForecastLookup = Callable[[str, str], ServedForecast | None]


@dataclass(frozen=True, slots=True)
class Estimates:
    """What the lookup knows about when a pending Workload may start."""

    velocity: AdmissionVelocity | None = None  # its ClusterQueue's admission rate
    now: Instant = 0  # the instant `estimatedWait` is evaluated at
    forecast: ServedForecast | None = None  # the forecast worker's, for `estimatedStart`


def pending_position(
    api_version: str,
    view: ClusterQueueView,
    item: PageItem,
    estimates: Estimates = Estimates(),
) -> dict[str, Any]:
    entry = item.entry
    body: dict[str, Any] = {
        "kind": POSITION_KIND,
        "apiVersion": api_version,
        "metadata": {
            "name": entry.name,
            "namespace": entry.namespace,
            "creationTimestamp": rfc3339_seconds(entry.creation),
            "resourceVersion": view.digest,
        },
        "pending": True,
        "clusterQueueName": view.name,
        "localQueueName": entry.local_queue,
        "priority": entry.priority,
        "positionInClusterQueue": item.position_in_cluster_queue,
        "positionInLocalQueue": item.position_in_local_queue,
        "pendingWorkloadsInClusterQueue": len(view),
        "pendingWorkloadsInLocalQueue": len(
            view.local_queue_indexes(entry.namespace, entry.local_queue)
        ),
    }
    if entry.why_pending:
        body["message"] = entry.why_pending
    if entry.why is not None:
        body["whyPending"] = why_pending(entry.why)
    wait = estimated_wait(estimates.velocity, item.position_in_cluster_queue, estimates.now)
    if wait is not None:
        body["estimatedWait"] = wait
    if estimates.forecast is not None:
        body["estimatedStart"] = estimated_start(estimates.forecast)
    return body


def not_pending_position(
    api_version: str, namespace: str, name: str, state: NotPending
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if state.creation is not None:
        metadata["creationTimestamp"] = rfc3339_seconds(state.creation)
    body: dict[str, Any] = {
        "kind": POSITION_KIND,
        "apiVersion": api_version,
        "metadata": metadata,
        "pending": False,
        "reason": state.reason.value,
    }
    if state.cluster_queue:
        body["clusterQueueName"] = state.cluster_queue
    if state.local_queue:
        body["localQueueName"] = state.local_queue
    if state.why is not None:
        body["message"] = state.why.message
        body["whyPending"] = why_pending(state.why)
    return body
