"""The simulator's output document (docs/simulate.md#output): a v1 List, and a table for people."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import yaml

from scheduler.core.clock import format_instant
from scheduler.core.scheduler import Scheduler
from scheduler.core.state_view import ClusterStateView
from scheduler.core.status import (
    cluster_queue_status,
    cohort_status,
    local_queue_status,
    workload_status,
)
from scheduler.core.visibility import pending_workloads
from scheduler.core.workload import ADMITTED, EVICTED, FINISHED, QUOTA_RESERVED, StoredObject
from scheduler.sim.runner import SimulationResult

Json = dict[str, Any]
VISIBILITY_VERSION = "visibility.kueue.x-k8s.io/v1beta1"


def _dump(obj: Any) -> Json:
    if isinstance(obj, StoredObject):
        return obj.to_json()
    data: Json = obj.model_dump(mode="json", by_alias=True, exclude_none=True)
    return data


def _with_status(obj: Any, api_version: str, kind: str, status: Json) -> Json:
    body = _dump(obj)
    out: Json = {"apiVersion": body.pop("apiVersion", api_version), "kind": kind}
    body.pop("kind", None)
    body.pop("status", None)
    out.update(body)
    out["status"] = status
    return out


def _queue_items(
    result: SimulationResult,
    kind: str,
    keys: Iterable[str],  # in output order
    status_of: Callable[[Scheduler, str], Json],
    visible_of: Callable[[str], Json | None] | None,
) -> list[Json]:
    """The ClusterQueues or LocalQueues (`kind`) with their status, the pending workloads
    status included where the tracker has one."""
    items: list[Json] = []
    for key in keys:
        obj = result.objects.get((kind, key))
        if obj is None:
            continue
        status = status_of(result.scheduler, key)
        visible = visible_of(key) if visible_of is not None else None
        if visible is not None:
            status["pendingWorkloadsStatus"] = visible
        items.append(_with_status(obj, "kueue.x-k8s.io/v1beta1", kind, status))
    return items


def build_list(result: SimulationResult) -> Json:
    s = result.scheduler
    items: list[Json] = []
    for key in sorted(s.objects.workloads):
        wl = s.objects.workloads[key]
        item = _with_status(wl.raw, "kueue.x-k8s.io/v1beta1", "Workload", workload_status(wl))
        # The core changes spec.active itself (deactivation); print what it holds.
        item.setdefault("spec", {})["active"] = wl.active
        items.append(item)
    tracker = result.queue_status
    queues = (
        (
            "ClusterQueue",
            sorted(s.objects.cluster_queues),
            cluster_queue_status,
            tracker.cluster_queue_json if tracker is not None else None,
        ),
        (
            "LocalQueue",
            sorted(s.objects.local_queues),
            local_queue_status,
            tracker.local_queue_json if tracker is not None else None,
        ),
    )
    for kind, keys, status_of, visible_of in queues:
        items += _queue_items(result, kind, keys, status_of, visible_of)
    for name in sorted(s.objects.cohorts):
        obj = result.objects.get(("Cohort", name))
        if obj is not None:
            items.append(
                _with_status(obj, "kueue.x-k8s.io/v1beta1", "Cohort", cohort_status(s, name))
            )
    for name in sorted(s.objects.cluster_queues):
        items.append(pending_summary(s, name))
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


def pending_summary(s: Scheduler, cluster_queue: str) -> Json:
    listed: list[Json] = []
    for item in pending_workloads(s, cluster_queue):
        meta: Json = {
            "name": item.name,
            "namespace": item.namespace,
            "creationTimestamp": format_instant(item.creation),
        }
        if item.owner_references:
            meta["ownerReferences"] = [
                {"apiVersion": a, "kind": k, "name": n, "uid": u}
                for a, k, n, u in item.owner_references
            ]
        listed.append(
            {
                "metadata": meta,
                "priority": item.priority,
                "localQueueName": item.local_queue,
                "positionInClusterQueue": item.position_in_cluster_queue,
                "positionInLocalQueue": item.position_in_local_queue,
            }
        )
    return {
        "kind": "PendingWorkloadsSummary",
        "apiVersion": VISIBILITY_VERSION,
        "metadata": {"name": cluster_queue},
        "items": listed,
    }


def render_json(doc: Json) -> str:
    return json.dumps(doc, indent=4, ensure_ascii=False) + "\n"


def render_yaml(doc: Json) -> str:
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, allow_unicode=True)


# The conditions that name the state on their own, checked in this order.
_HELD = (FINISHED, ADMITTED, QUOTA_RESERVED)


def workload_state_label(s: ClusterStateView, key: str) -> str:
    wl = s.objects.workloads[key]
    c = wl.conditions
    held = next((label for label in _HELD if c.is_true(label)), None)
    if held is not None:
        return held
    if not wl.active:
        return "Inactive"
    if c.is_true(EVICTED):
        return "Evicted"
    qr = c.get(QUOTA_RESERVED)
    if qr is not None and qr.reason == "Inadmissible":
        return "Inadmissible"
    return "Pending"


def render_table(result: SimulationResult) -> str:
    s = result.scheduler
    positions: dict[str, int] = {}
    for cq in s.objects.cluster_queues:
        for item in pending_workloads(s, cq):
            positions[f"{item.namespace}/{item.name}"] = item.position_in_cluster_queue
    header = ("NAMESPACE", "NAME", "QUEUE", "STATE", "FLAVORS", "POSITION")
    rows: list[tuple[str, ...]] = [header]
    for key in sorted(s.objects.workloads):
        wl = s.objects.workloads[key]
        flavors = "-"
        if wl.admission is not None:
            flavors = ",".join(
                sorted({f for ps in wl.admission.pod_sets for f in ps.flavors.values()})
            )
        pos = positions.get(key)
        rows.append(
            (
                wl.namespace,
                wl.name,
                wl.queue_name or "-",
                workload_state_label(s, key),
                flavors or "-",
                "-" if pos is None else str(pos),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [
        "   ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]
    return "\n".join(lines) + "\n"
