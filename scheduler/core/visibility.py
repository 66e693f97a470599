"""The pending-workloads listing of a ClusterQueue (KEP-168), from the queue's own order.

Shared by the simulator's PendingWorkloadsSummary output and the runtime's snapshots,
so both always agree on positions.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from scheduler.core.clock import Instant
from scheduler.core.scheduler import Scheduler
from scheduler.core.workload import OwnerRef, StoredObject


@dataclass(frozen=True, slots=True)
class PendingItem:
    namespace: str
    name: str
    creation: Instant
    owner_references: tuple[OwnerRef, ...]
    priority: int
    local_queue: str
    position_in_cluster_queue: int
    position_in_local_queue: int


def owner_references(raw: Any) -> tuple[OwnerRef, ...]:
    """The owner references of an API object or of what a workload kept of one
    (`WorkloadState.raw`: a StoredObject, or the runtime's tuple of them itself)."""
    if isinstance(raw, StoredObject):
        return raw.owners
    if isinstance(raw, tuple):
        return raw
    refs = getattr(getattr(raw, "metadata", None), "owner_references", None) or []
    out: list[OwnerRef] = []
    for ref in refs:
        get = ref.get if isinstance(ref, dict) else (lambda k, r=ref: getattr(r, k, ""))
        out.append(
            OwnerRef(
                # Interned as the cluster store's records do: every Job's owner
                # reference repeats them, decoded as new strings each time.
                sys.intern(str(get("apiVersion") or get("api_version") or "")),
                sys.intern(str(get("kind") or "")),
                str(get("name") or ""),
                str(get("uid") or ""),
            )
        )
    return tuple(out)


def pending_workloads(s: Scheduler, cluster_queue: str) -> list[PendingItem]:
    """Every queued workload of the CQ in queue order with both positions
    (docs/scheduling.md#cohort)."""
    queue = s._queues.queue(cluster_queue)
    if queue is None:
        return []
    per_lq: dict[tuple[str, str], int] = {}
    items: list[PendingItem] = []
    for index, entry in enumerate(queue.listing()):
        wl = s._workloads.get(entry.key)
        lq_key = (entry.namespace, entry.local_queue)
        lq_pos = per_lq.get(lq_key, 0)
        per_lq[lq_key] = lq_pos + 1
        items.append(
            PendingItem(
                namespace=entry.namespace,
                name=entry.name,
                creation=wl.creation if wl is not None else entry.timestamp,
                owner_references=owner_references(wl.raw) if wl is not None else (),
                priority=entry.priority,
                local_queue=entry.local_queue,
                position_in_cluster_queue=index,
                position_in_local_queue=lq_pos,
            )
        )
    return items
