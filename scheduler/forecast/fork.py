"""A private copy of a Scheduler's state, for running it forward (docs/forecasting.md#cost).

The configuration records of the core (flavors, ClusterQueues, Cohorts, LocalQueues)
are frozen, so the copy shares them; workloads are mutable, so each live one is
copied, with its own conditions and requeue state. Finished workloads are left
out (they hold nothing and never change again), and so are the API objects kept for
output: a forecast reads none of them. Building the copy through the core's own entry
points (`set_cluster_queue`, `set_workload`, ...) gives it queues and a quota tree
that are consistent by construction, at a fraction of `copy.deepcopy`'s cost.

The same construction (:func:`assemble`) builds the forecast worker's Scheduler from
what the published snapshot carries (docs/forecasting.md#serving): a :class:`Setup`
(the configuration records, frozen and picklable) and the live workloads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from scheduler.core.clock import Instant, ManualClock
from scheduler.core.config import SchedulerConfig
from scheduler.core.model import ClusterQueueInfo, FlavorInfo, LocalQueueInfo
from scheduler.core.scheduler import CohortInfo, Scheduler
from scheduler.core.state_view import ClusterStateView
from scheduler.core.workload import RequeueState, WorkloadState


@dataclass(frozen=True, slots=True)
class Setup:
    """Everything of a Scheduler but its workloads, in name order: what a copy shares."""

    config: SchedulerConfig
    namespaces: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()  # name, labels
    flavors: tuple[tuple[str, FlavorInfo], ...] = ()
    cohorts: tuple[CohortInfo, ...] = ()
    cluster_queues: tuple[ClusterQueueInfo, ...] = ()
    local_queues: tuple[LocalQueueInfo, ...] = ()
    terminating: tuple[str, ...] = ()  # ClusterQueues deleted while holding quota


def setup_of(s: ClusterStateView) -> Setup:
    """The configuration of `s`: O(#objects of configuration), no workload read."""
    return Setup(
        s.config,
        tuple(
            (name, tuple(sorted(labels.items())))
            for name, labels in sorted(s.objects.namespaces.items())
        ),
        tuple(sorted(s.objects.flavors.items())),
        tuple(cohort for _, cohort in sorted(s.objects.cohorts.items())),
        tuple(cq for _, cq in sorted(s.objects.cluster_queues.items())),
        tuple(lq for _, lq in sorted(s.objects.local_queues.items())),
        tuple(sorted(s.objects.terminating)),
    )


def assemble(
    setup: Setup, workloads: Iterable[WorkloadState], now: Instant
) -> tuple[Scheduler, ManualClock]:
    """A Scheduler of `setup` holding `workloads` (which it owns from now on), on its
    own virtual clock set to `now`."""
    clock = ManualClock(now)
    s = Scheduler(clock, setup.config)
    s.set_keep_objects(False)
    for name, labels in setup.namespaces:
        s.set_namespace(name, dict(labels))
    for name, flavor in setup.flavors:
        s.set_flavor(flavor, name)
    for cohort in setup.cohorts:
        s.set_cohort(cohort)
    for cq in setup.cluster_queues:
        s.set_cluster_queue(cq)
    for lq in setup.local_queues:
        s.set_local_queue(lq)
    for name in setup.terminating:
        s.delete_cluster_queue(name)
    for wl in workloads:
        s.set_workload(wl)
    s.finalize_evictions()
    return s, clock


def fork(s: Scheduler, now: Instant) -> tuple[Scheduler, ManualClock]:
    """A Scheduler in the state of `s`, on its own virtual clock set to `now`;
    nothing of it is shared with `s` that either could change."""
    workloads = s.objects.workloads
    live = (_copy_workload(wl) for key in sorted(workloads) if not (wl := workloads[key]).finished)
    return assemble(setup_of(s), live, now)


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
