"""Render the status the core writes as plain Kubernetes-shaped dicts
(docs/scheduling.md#workload-status, #queue-and-cohort-status).

Pure functions over a :class:`Scheduler`; the simulator prints them, the cluster
writers send them through the status subresource.
"""

from __future__ import annotations

from typing import Any

from scheduler.api.quantity import format_resource
from scheduler.core.clock import format_instant
from scheduler.core.conditions import Condition, Conditions
from scheduler.core.fair_sharing import dominant_resource_share, weighted_share
from scheduler.core.model import ClusterQueueInfo
from scheduler.core.quota import NodeRef
from scheduler.core.scheduler import Scheduler
from scheduler.core.workload import ADMITTED, CheckStatus, WorkloadState

Json = dict[str, Any]


def render_condition(c: Condition) -> Json:
    out: Json = {"type": c.type, "status": c.status}
    if c.observed_generation is not None:
        out["observedGeneration"] = c.observed_generation
    out["lastTransitionTime"] = format_instant(c.last_transition)
    out["reason"] = c.reason
    out["message"] = c.message
    return out


def render_check(c: CheckStatus) -> Json:
    out: Json = {
        "name": c.name,
        "state": c.state,
        "lastTransitionTime": format_instant(c.last_transition),
        "message": c.message,
    }
    if c.requeue_after_seconds is not None:
        out["requeueAfterSeconds"] = c.requeue_after_seconds
    if c.retry_count is not None:
        out["retryCount"] = c.retry_count
    if c.pod_set_updates:
        out["podSetUpdates"] = [dict(u) for u in c.pod_set_updates]
    return out


def render_conditions(conditions: Conditions) -> list[Json]:
    return [render_condition(c) for c in conditions.items()]


def _resources(amounts: dict[str, int]) -> Json:
    return {r: format_resource(r, v) for r, v in sorted(amounts.items())}


def workload_status(wl: WorkloadState) -> Json:
    status: Json = {}
    if wl.admission is not None:
        status["admission"] = {
            "clusterQueue": wl.admission.cluster_queue,
            "podSetAssignments": [
                {
                    "name": ps.name,
                    "flavors": dict(sorted(ps.flavors.items())),
                    "resourceUsage": _resources(ps.resource_usage),
                    "count": ps.count,
                }
                for ps in wl.admission.pod_sets
            ],
        }
    if wl.requeue_state is not None:
        rs: Json = {}
        if wl.requeue_state.count is not None:
            rs["count"] = wl.requeue_state.count
        if wl.requeue_state.requeue_at is not None:
            rs["requeueAt"] = format_instant(wl.requeue_state.requeue_at)
        status["requeueState"] = rs
    if wl.conditions.items():
        status["conditions"] = render_conditions(wl.conditions)
    if wl.admission_checks:
        status["admissionChecks"] = [render_check(c) for c in wl.admission_checks]
    if wl.reclaimable:
        status["reclaimablePods"] = [
            {"name": name, "count": count} for name, count in wl.reclaimable.items()
        ]
    if wl.resource_requests is not None:
        status["resourceRequests"] = [
            {"name": name, "resources": _resources(totals)} for name, totals in wl.resource_requests
        ]
    return status


def _flavor_usage(
    s: Scheduler, cq: ClusterQueueInfo, keys: list[str], *, admitted_only: bool, borrowed: bool
) -> list[Json]:
    totals: dict[tuple[str, str], int] = {}
    for key in keys:
        wl = s._workloads[key]
        if admitted_only and not wl.conditions.is_true(ADMITTED):
            continue
        for fr, v in s.usage_of(wl).items():
            totals[fr] = totals.get(fr, 0) + v
    out: list[Json] = []
    for group in cq.groups:
        for flavor in group.flavors:
            resources: list[Json] = []
            for resource in sorted(group.covered):
                total = totals.get((flavor, resource), 0)
                item: Json = {"name": resource, "total": format_resource(resource, total)}
                if borrowed:
                    nominal = cq.quotas[(flavor, resource)].nominal if cq.cohort else total
                    item["borrowed"] = format_resource(resource, max(0, total - nominal))
                resources.append(item)
            out.append({"name": flavor, "resources": resources})
    return out


def cluster_queue_status(s: Scheduler, name: str) -> Json:
    cq = s._cluster_queues[name]
    holders = s._holders.keys(name)
    queue = s._queues.queue(name)
    pending = len(queue) if queue is not None else 0
    admitted = [k for k in holders if s._workloads[k].conditions.is_true(ADMITTED)]
    status: Json = {
        "pendingWorkloads": pending,
        "reservingWorkloads": len(holders),
        "admittedWorkloads": len(admitted),
        "flavorsReservation": _flavor_usage(s, cq, holders, admitted_only=False, borrowed=True),
        "flavorsUsage": _flavor_usage(s, cq, holders, admitted_only=True, borrowed=True),
        "conditions": [_cq_active_condition(s, cq)],
    }
    if s.config.fair_sharing:
        status["fairSharing"] = _fair_sharing(s, NodeRef.cq(name))
    return status


def _fair_sharing(s: Scheduler, node: NodeRef) -> Json:
    """docs/scheduling.md#dominant-resource-share: the weighted share, present only while fair
    sharing is enabled."""
    if node.is_cq and s._tree.in_cycle(node.name):
        return {"weightedShare": 0}
    if not node.is_cq and s._tree.cohort_in_cycle(node.name):
        return {"weightedShare": 0}
    return {"weightedShare": weighted_share(dominant_resource_share(s._tree, node))}


def _cq_active_condition(s: Scheduler, cq: ClusterQueueInfo) -> Json:
    reasons = s.inactive_reasons(cq.name)
    since = s.condition_since("ClusterQueue", cq.name)
    if not reasons:
        return {
            "type": "Active",
            "status": "True",
            "lastTransitionTime": format_instant(since),
            "reason": "Ready",
            "message": "Can admit new workloads",
        }
    if reasons[0] == "Terminating":
        return {
            "type": "Active",
            "status": "False",
            "lastTransitionTime": format_instant(since),
            "reason": "Terminating",
            "message": "Can't admit new workloads; clusterQueue is terminating",
        }
    parts: list[str] = []
    if "Stopped" in reasons:
        parts.append("is stopped")
    missing = [f for f in cq.flavor_names() if f not in s._flavors]
    if missing:
        parts.append(f"references missing ResourceFlavor(s): {','.join(missing)}")
    missing_checks = s.missing_checks(cq)
    if missing_checks:
        parts.append(f"references missing AdmissionCheck(s): {','.join(missing_checks)}")
    inactive_checks = s.inactive_checks(cq)
    if inactive_checks:
        parts.append(f"references inactive AdmissionCheck(s): {','.join(inactive_checks)}")
    if "CohortCycleDetected" in reasons:
        parts.append("is in a cohort tree that contains a cycle")
    return {
        "type": "Active",
        "status": "False",
        "lastTransitionTime": format_instant(since),
        "reason": reasons[0],
        "message": f"Can't admit new workloads: {', '.join(parts)}.",
    }


def local_queue_status(s: Scheduler, key: str) -> Json:
    lq = s._local_queues[key]
    cq = s._cluster_queues.get(lq.cluster_queue)
    mine = [
        k
        for k in s.workloads_of_local_queue(key)
        if s._workloads[k].holds_quota
        and s._workloads[k].admission is not None
        and s._workloads[k].admission.cluster_queue == lq.cluster_queue  # type: ignore[union-attr]
    ]
    pending = _lq_pending(s, key) if lq.stop_policy == "None" else 0
    admitted = [k for k in mine if s._workloads[k].conditions.is_true(ADMITTED)]
    since = s.condition_since("LocalQueue", key)
    if lq.stop_policy != "None":
        cond = ("False", "Stopped", "LocalQueue is stopped")
    elif cq is None or not s.cq_active(cq.name):
        reason = "ClusterQueueDoesNotExist" if cq is None else "ClusterQueueIsInactive"
        cond = ("False", reason, "Can't submit new workloads to clusterQueue")
    else:
        cond = ("True", "Ready", "Can submit new workloads to localQueue")
    status: Json = {
        "pendingWorkloads": pending,
        "reservingWorkloads": len(mine),
        "admittedWorkloads": len(admitted),
        "conditions": [
            {
                "type": "Active",
                "status": cond[0],
                "lastTransitionTime": format_instant(since),
                "reason": cond[1],
                "message": cond[2],
            }
        ],
    }
    if cq is not None:
        status["flavorsReservation"] = _lq_flavor_usage(s, cq, mine, admitted_only=False)
        status["flavorUsage"] = _lq_flavor_usage(s, cq, mine, admitted_only=True)
        status["flavors"] = [
            _lq_flavor(s, flavor, sorted(group.covered))
            for group in cq.groups
            for flavor in group.flavors
        ]
    return status


def _lq_pending(s: Scheduler, key: str) -> int:
    """Queued workloads of this LocalQueue, excluding the in-flight head
    (docs/scheduling.md#localqueue-status)."""
    lq = s._local_queues[key]
    queue = s._queues.queue(lq.cluster_queue)
    if queue is None:
        return 0
    # Status is rendered between cycles, when nothing is in flight.
    return sum(1 for k in s.workloads_of_local_queue(key) if queue.get(k) is not None)


def _lq_flavor_usage(
    s: Scheduler, cq: ClusterQueueInfo, keys: list[str], *, admitted_only: bool
) -> list[Json]:
    rows = _flavor_usage(s, cq, keys, admitted_only=admitted_only, borrowed=False)
    return rows


def _lq_flavor(s: Scheduler, name: str, resources: list[str]) -> Json:
    out: Json = {"name": name, "resources": resources}
    info = s._flavors.get(name)
    if info is not None:
        if info.node_labels:
            out["nodeLabels"] = dict(sorted(info.node_labels.items()))
        if info.taints:
            out["nodeTaints"] = [dict(t) for t in info.taints]
    return out


def cohort_status(s: Scheduler, name: str) -> Json:
    since = s.condition_since("Cohort", name)
    if s._tree.cohort_in_cycle(name):
        cond = {
            "type": "Active",
            "status": "False",
            "lastTransitionTime": format_instant(since),
            "reason": "CohortCycleDetected",
            "message": (
                f"Cohort is part of a tree with a parent cycle: {s._tree.cycle_description(name)}"
            ),
        }
    else:
        cond = {
            "type": "Active",
            "status": "True",
            "lastTransitionTime": format_instant(since),
            "reason": "Ready",
            "message": "Cohort is usable",
        }
    status: Json = {"conditions": [cond]}
    if s.config.fair_sharing:
        status["fairSharing"] = _fair_sharing(s, NodeRef.cohort(name))
    return status
