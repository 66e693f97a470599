"""A StatefulSet scaled by a Scenario's `apply` event (docs/simulate.md#statefulsets).

As in a cluster (docs/cluster.md#statefulsets, "Scaling"): scaled to zero, its Workload
is put on hold (its quota given back without an eviction, and not queued); scaled up
again, the hold is lifted before the StatefulSet's Workload is applied once more. Kueue
makes no Workload of a StatefulSet that has no replicas, so a hold is the only trace of
one scaled to zero.
"""

from __future__ import annotations

from scheduler.api.statefulset import SCALED_TO_ZERO, statefulset_workload_name
from scheduler.api.statefulset_model import StatefulSet
from scheduler.core.scheduler import Scheduler


def follow_scale(s: Scheduler, sts: StatefulSet) -> str | None:
    """Hold or release the Workload of `sts` (its uid filled as its Workload's was) as
    its replicas say; the key of the Workload held or released, None when none was."""
    meta = sts.metadata
    name = statefulset_workload_name(meta.name, meta.uid or "")
    key = f"{meta.namespace or 'default'}/{name}"
    message = SCALED_TO_ZERO if sts.spec.replicas == 0 else None
    return key if s.set_on_hold(key, message) else None
