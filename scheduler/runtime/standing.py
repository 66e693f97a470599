"""Where a Workload that is not pending stands, read from the core's state
(docs/visibility-api.md#pending-position).

The position lookup answers a pending Workload from the snapshot; every other Workload
that exists is classified here, in both modes (the embedded store and cluster mode feed
the same core). A Workload the core queues but the snapshot does not list yet (created
less than one publish interval ago) is neither: the lookup answers 404 until the next
publish, as it does for a Workload the core has not seen.

The order of the checks is the order in which one condition hides the next: a finished
Workload may still carry its admission, an admitted one keeps its LocalQueue even if
that has gone since, and a deactivated one is out of every queue whatever its queues say.
"""

from __future__ import annotations

from scheduler.core.model import LocalQueueInfo
from scheduler.core.state_view import ClusterStateView
from scheduler.runtime.why import why_waiting_for_checks
from scheduler.runtime.workload_records import NotPending, NotPendingReason


def standing(scheduler: ClusterStateView, namespace: str, name: str) -> NotPending | None:
    """Why `namespace/name` is not pending; None if the core does not know it or queues
    it. O(1): a few dictionary look-ups, so it runs on the request path."""
    wl = scheduler.workload(f"{namespace}/{name}")
    if wl is None:
        return None
    lq = scheduler.local_queue_of(wl)
    cluster_queue = lq.cluster_queue if lq is not None else ""
    if wl.admission is not None and (wl.finished or wl.holds_quota):
        cluster_queue = wl.admission.cluster_queue
    reason: NotPendingReason | None = NotPendingReason.FINISHED
    if not wl.finished:
        reason = NotPendingReason.QUOTA_RESERVED if wl.holds_quota else NotPendingReason.INACTIVE
        if not wl.holds_quota and wl.active:
            reason = _queue_reason(scheduler, lq)
    if reason is None:
        return None
    why = why_waiting_for_checks(wl) if reason == NotPendingReason.QUOTA_RESERVED else None
    return NotPending(reason, wl.creation, cluster_queue, wl.queue_name, why)


def _queue_reason(
    scheduler: ClusterStateView, lq: LocalQueueInfo | None
) -> NotPendingReason | None:
    """Why an active, unadmitted Workload is out of every queue; None if it is queued."""
    if lq is None:
        return NotPendingReason.LOCAL_QUEUE_NOT_FOUND
    if lq.stop_policy != "None":
        return NotPendingReason.LOCAL_QUEUE_STOPPED
    if lq.cluster_queue not in scheduler.objects.cluster_queues:
        return NotPendingReason.CLUSTER_QUEUE_NOT_FOUND
    return None
