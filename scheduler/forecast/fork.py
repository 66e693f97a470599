"""A private copy of a Scheduler's state, for running it forward (docs/forecasting.md#cost).

The configuration records of the core (flavors, ClusterQueues, Cohorts, LocalQueues)
are frozen, so the copy shares them; workloads are mutable, so each live one is
copied, with its own conditions and requeue state. Finished workloads are left
out (they hold nothing and never change again), and so are the API objects kept for
output: a forecast reads none of them. Building the copy through the core's own entry
points (`set_cluster_queue`, `set_workload`, ...) gives it queues and a quota tree
that are consistent by construction, at a fraction of `copy.deepcopy`'s cost.
"""

from __future__ import annotations

import dataclasses

from scheduler.core.clock import Instant, ManualClock
from scheduler.core.scheduler import Scheduler
from scheduler.core.workload import RequeueState, WorkloadState


def fork(s: Scheduler, now: Instant) -> tuple[Scheduler, ManualClock]:
    """A Scheduler in the state of `s`, on its own virtual clock set to `now`;
    nothing of it is shared with `s` that either could change."""
    clock = ManualClock(now)
    copy = Scheduler(clock, s.config)
    copy.keep_objects = False
    for name, labels in sorted(s.namespaces.items()):
        copy.set_namespace(name, labels)
    for name, flavor in sorted(s.flavors.items()):
        copy.set_flavor(flavor, name)
    for _, cohort in sorted(s.cohorts.items()):
        copy.set_cohort(cohort)
    for _, cq in sorted(s.cluster_queues.items()):
        copy.set_cluster_queue(cq)
    for _, lq in sorted(s.local_queues.items()):
        copy.set_local_queue(lq)
    for name in sorted(s.terminating):
        copy.delete_cluster_queue(name)
    for key in sorted(s.workloads):
        wl = s.workloads[key]
        if wl.finished:
            continue
        copy.set_workload(_copy_workload(wl))
    copy.finalize_evictions()
    return copy, clock


def _copy_workload(wl: WorkloadState) -> WorkloadState:
    rs = wl.requeue_state
    return dataclasses.replace(
        wl,
        conditions=wl.conditions.copy(),
        requeue_state=None if rs is None else RequeueState(rs.count, rs.requeue_at),
        reclaimable=wl.reclaimable,
        last_assignment=None,
        why=None,
        raw=None,
    )
