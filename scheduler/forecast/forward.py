"""The forward run: the core itself, run ahead on a virtual clock with predicted
runtimes (docs/forecasting.md#the-forward-run).

From a copy of the state at `now`, admitted workloads finish at their predicted end
(conditioned on how long they have run), workloads admitted during the run hold
their quota for their predicted runtime, and no arrival is assumed. The run stops
once every target is admitted, at the horizon, or when nothing is left to happen.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection
from dataclasses import dataclass, field

from scheduler.core.clock import MICROS_PER_SECOND, Instant, ManualClock
from scheduler.core.cycle import run_cycle
from scheduler.core.flavor_assigner import pod_set_requests
from scheduler.core.model import ClusterQueueInfo
from scheduler.core.pods_ready import Deadline, deadlines, fire_due
from scheduler.core.quota import QuotaTree
from scheduler.core.scheduler import Scheduler
from scheduler.core.state_view import ClusterStateView
from scheduler.core.workload import EVICTED, QUOTA_RESERVED, WorkloadState
from scheduler.forecast.fork import fork
from scheduler.forecast.predictors import RuntimePredictor, facts_of

DEFAULT_HORIZON_SECONDS = 30 * 86_400.0
# Cycles at one instant that admit and preempt nothing before the instant is over
# (a queue that keeps offering heads that cannot fit).
MAX_IDLE_CYCLES = 10_000


@dataclass(slots=True)
class ForwardResult:
    """Seconds from `now` until each target reserved quota in the run; a target not
    admitted before the run ended is absent."""

    waits: dict[str, float] = field(default_factory=dict)
    cycles: int = 0
    end: Instant = 0


def pending_keys(s: ClusterStateView) -> list[str]:
    """The workloads a forecast is for: queued, active, holding no quota."""
    return sorted(
        k
        for k, wl in s.objects.workloads.items()
        if wl.active and not wl.finished and not wl.holds_quota and s.queues.locate(k) is not None
    )


def forward_run(  # noqa: PLR0913 - keyword-only options of one run
    s: Scheduler,
    predictor: RuntimePredictor,
    targets: Collection[str],
    *,
    horizon_seconds: float = DEFAULT_HORIZON_SECONDS,
    clock: ManualClock | None = None,
    shortcut: bool = True,
) -> ForwardResult:
    """Run a private copy of `s` forward from its clock's instant; `s` is not changed.

    With `clock` (the ManualClock `s` runs on), `s` is the caller's own throwaway state
    (the forecast worker builds one per refresh): it is run forward itself, not copied.
    `shortcut=False` runs every cycle :class:`Hopeless` would skip (tests compare both).
    """
    now = s.now()
    copy, clock = (s, clock) if clock is not None else fork(s, now)
    copy.follow_changes()
    run = _Run(copy, predictor, now, hopeless=Hopeless.of(copy) if shortcut else None)
    for key in copy.holders.all_keys():
        wl = copy.workload(key)
        if wl is not None and wl.holds_quota:
            run.start(wl, _admitted_at(wl, now))
    for key, wl in copy.objects.workloads.items():
        if wl.requeue_state is not None and wl.requeue_state.requeue_at is not None:
            run.dirty.add(key)
    remaining = {k for k in targets if k in copy.objects.workloads}
    result = ForwardResult()
    horizon = now + int(horizon_seconds * MICROS_PER_SECOND)
    while True:
        result.cycles += run.cycles_at_instant()
        for key in run.admitted_now:
            if key in remaining:
                remaining.discard(key)
                result.waits[key] = (clock.now() - now) / MICROS_PER_SECOND
        run.admitted_now.clear()
        if not remaining:
            break
        upcoming = [t for t in (run.next_finish(), run.next_deadline()) if t is not None]
        if not upcoming or min(upcoming) > horizon:
            break
        clock.set(max(clock.now(), min(upcoming)))
        run.finish_due()
        run.fire_due()
        copy.finalize_evictions()
    result.end = clock.now()
    return result


def _admitted_at(wl: WorkloadState, default: Instant) -> Instant:
    reserved = wl.conditions.get(QUOTA_RESERVED)
    return reserved.last_transition if reserved is not None else default


@dataclass(frozen=True, slots=True)
class _Bound:
    """What no workload of a ClusterQueue asks for less of: per covered resource, the
    flavors of its resource group and the smallest total request."""

    least: tuple[tuple[str, tuple[str, ...], int], ...]  # (resource, flavors, smallest)
    preempts: bool  # LowerPriority within the queue (else Never)


@dataclass(frozen=True, slots=True)
class Hopeless:
    """When the rest of an instant's cycles can admit nothing (docs/forecasting.md#cost).

    After a quota release the core flushes every parked head back and, under
    BestEffortFIFO, tries each one again, one cycle each: a run over a deep queue spends
    nearly all its time failing those heads, which makes it grow with the square of the
    queue's depth. Those cycles can be skipped, without changing any answer, when they
    cannot admit or preempt anything: in every ClusterQueue with workloads left, some
    resource has, in every flavor of its group, less quota available (borrowing from
    the Cohort included) than any of the queue's workloads asks for, and no head not
    tried yet outranks the lowest-priority holder. The heads left untried stay queued
    instead of parked; the next release flushes every parked head of the Cohort's tree
    back anyway, and until then neither the quota nor the holders change (every release
    flushes the whole tree; nothing fits, and a preemption is a release), so whatever a
    later instant tries fails as it would have.

    The flavor scan's resume record (docs/scheduling.md#flavor-scan-resumption) cannot
    tell the two runs apart: a failing head scans every flavor (no record), and a record
    left by an earlier attempt at the same generation stopped early only at a flavor
    that fit or could preempt, which needs a fit or a victim that same quota and those
    same holders do not offer. That holds for one pod set, or for one flavor per group
    (whose record is always "scanned to the end"); so a queue with several flavors in a
    group is covered only when each of its workloads has one pod set.

    Only ClusterQueues where that decides alone are covered: no partial admission,
    preemption within the queue `Never` or `LowerPriority`, in a Cohort no reclaim and no
    preemption while borrowing (the victims are the queue's own holders), popping by
    priority (no queue plugin); and none with fair sharing or blockAdmission. The bounds
    are taken over every workload of the queue at the start of the run, pending or
    holding quota (a superset of what can be pending later in a run without arrivals).
    """

    bounds: dict[str, _Bound]  # ClusterQueue -> bound; absent: not covered

    @staticmethod
    def of(s: ClusterStateView) -> Hopeless | None:
        cfg = s.config
        if (
            cfg.fair_sharing
            or cfg.wait_for_pods_ready.block_admission
            or cfg.default_queue_plugin is not None
        ):
            return None
        members: dict[str, list[WorkloadState]] = {}
        for wl in s.objects.workloads.values():
            if wl.finished:
                continue
            lq = s.local_queue_of(wl)
            cqs = {lq.cluster_queue} if lq is not None else set()
            if wl.admission is not None:
                cqs.add(wl.admission.cluster_queue)
            for cq in cqs:
                members.setdefault(cq, []).append(wl)
        bounds: dict[str, _Bound] = {}
        for name, info in s.objects.cluster_queues.items():
            found = _bound(info, members.get(name, []))
            if found is not None:
                bounds[name] = found
        return Hopeless(bounds)

    def holds(self, s: ClusterStateView) -> bool:
        tree = s.quota
        if not isinstance(tree, QuotaTree):
            return False  # what is available (borrowing included) is the tree's to say
        now = s.now()
        for name in s.objects.cluster_queues:
            queue = s.queues.queue(name)
            if queue is None or len(queue) == 0:
                continue
            bound = self.bounds.get(name)
            if bound is None:
                return False
            if not any(
                all(tree.available(name, (flavor, resource)) < least for flavor in flavors)
                for resource, flavors, least in bound.least
            ):
                return False
            if bound.preempts:
                # The queue pops by priority: its next head outranks every head not tried.
                lowest = s.holders.lowest_priority(name)
                head = queue.peek(now)
                if lowest is not None and head is not None and head.priority > lowest:
                    return False
        return True


def _bound(info: ClusterQueueInfo, workloads: list[WorkloadState]) -> _Bound | None:
    if info.queue_plugin:
        return None  # a queue plugin may pop in another order than by priority
    policy = info.preemption
    if policy.within_cluster_queue not in ("Never", "LowerPriority"):
        return None
    if info.cohort and (
        policy.reclaim_within_cohort != "Never" or policy.borrow_within_cohort != "Never"
    ):
        return None  # victims in other queues of the Cohort
    one_flavor = all(len(g.flavors) == 1 for g in info.groups)
    least: dict[str, int] = {}
    for wl in workloads:
        if any(ps.min_count is not None for ps in wl.pod_sets):
            return None
        if not one_flavor and len(wl.pod_sets) != 1:
            return None  # pod sets may take different flavors (see Hopeless)
        totals: dict[str, int] = {}
        for _, _, amounts in pod_set_requests(wl, info):
            for resource, amount in amounts.items():
                totals[resource] = totals.get(resource, 0) + amount
        for group in info.groups:
            for resource in group.covered:
                asked = totals.get(resource, 0)
                least[resource] = min(least.get(resource, asked), asked)
    flavors_of = {r: g.flavors for g in info.groups for r in g.covered}
    return _Bound(
        tuple((r, flavors_of[r], n) for r, n in sorted(least.items()) if n > 0),
        policy.within_cluster_queue == "LowerPriority",
    )


@dataclass(slots=True)
class _Run:
    s: Scheduler
    predictor: RuntimePredictor
    made_at: Instant
    hopeless: Hopeless | None = None
    admitted_now: list[str] = field(default_factory=list)
    # The deadlines of the core's timed rules (requeue backoff, pods-ready timeouts,
    # maximum execution time) of the workloads that have one. A workload's deadlines
    # change only when the workload does, and in the run it changes only as a head or a
    # victim of a cycle, at its finish or when one of its deadlines fires; those keys
    # are `dirty` and recomputed before the next step. Walking every quota holder's
    # rules at every step instead was a fifth of the run.
    timed: dict[str, list[Deadline]] = field(default_factory=dict)
    dirty: set[str] = field(default_factory=set)
    _heap: list[tuple[Instant, str, int]] = field(default_factory=list)
    _generation: dict[str, int] = field(default_factory=dict)

    def start(self, wl: WorkloadState, admitted_at: Instant) -> None:
        elapsed = max(0, self.made_at - admitted_at) / MICROS_PER_SECOND
        total = self.predictor.predict(facts_of(wl), elapsed)
        end = admitted_at + int(total * MICROS_PER_SECOND)
        generation = self._generation.get(wl.key, 0) + 1
        self._generation[wl.key] = generation
        self.dirty.add(wl.key)
        heapq.heappush(self._heap, (max(end, self.s.now()), wl.key, generation))

    def _refresh(self) -> None:
        s = self.s
        for key in self.dirty:
            wl = s.workload(key)
            found = deadlines(s, wl) if wl is not None and not wl.finished else None
            if found:
                self.timed[key] = found
            else:
                self.timed.pop(key, None)
        self.dirty.clear()

    def next_deadline(self) -> Instant | None:
        """The earliest deadline strictly after now (as `pods_ready.next_deadline`)."""
        self._refresh()
        now = self.s.now()
        future = [d.at for found in self.timed.values() for d in found if d.at > now]
        return min(future) if future else None

    def fire_due(self) -> None:
        """Fire the deadlines at or before now (as `pods_ready.fire_due`)."""
        self._refresh()
        now = self.s.now()
        due = sorted(key for key, found in self.timed.items() if any(d.at <= now for d in found))
        if due:
            fire_due(self.s, due)
            self.dirty.update(due)

    def next_finish(self) -> Instant | None:
        heap = self._heap
        while heap and self._generation.get(heap[0][1]) != heap[0][2]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def finish_due(self) -> None:
        now = self.s.now()
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, key, generation = heapq.heappop(heap)
            if self._generation.get(key) == generation:
                del self._generation[key]
                self.s.finish(key)
                self.dirty.add(key)

    def cycles_at_instant(self) -> int:
        """Cycles until one makes no progress and examines the heads the previous idle
        cycle examined (or no heads at all)."""
        s = self.s
        cycles = 0
        idle = 0
        last_heads: list[tuple[str, str]] | None = None
        while idle < MAX_IDLE_CYCLES:
            stats = run_cycle(s)
            cycles += 1
            changes = s.take_changes()
            self.dirty.update(key for _, key in changes.heads)
            for keys in changes.queues.values():
                self.dirty.update(keys)
            for key in changes.evicted:
                self._generation.pop(key, None)
                self.dirty.add(key)
            for key in changes.admitted:
                wl = s.workload(key)
                if wl is not None and wl.holds_quota and not wl.conditions.is_true(EVICTED):
                    self.admitted_now.append(key)
                    self.start(wl, s.now())
            if not stats.ran:
                break
            if stats.admitted or stats.preempted:
                idle, last_heads = 0, None
                continue
            if changes.heads == last_heads:
                break
            if self.hopeless is not None and self.hopeless.holds(s):
                break  # the rest of this instant's cycles would fail every head
            idle += 1
            last_heads = changes.heads
        return cycles
