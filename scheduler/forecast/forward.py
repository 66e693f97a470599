"""The forward run: the core itself, run ahead on a virtual clock with predicted
runtimes (docs/forecasting.md#the-forward-run).

From a copy of the state at `now`, admitted workloads finish at their predicted end
(conditioned on how long they have run), workloads admitted during the run hold
their quota for their predicted runtime, and no arrival is assumed. The run stops
once every target is admitted, at the horizon, or when nothing is left to happen.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from scheduler.core.clock import MICROS_PER_SECOND, Instant, ManualClock
from scheduler.core.cycle import run_cycle
from scheduler.core.pods_ready import Deadline, deadlines, fire_due
from scheduler.core.scheduler import Scheduler
from scheduler.core.state_view import ClusterStateView
from scheduler.core.workload import EVICTED, QUOTA_RESERVED, WorkloadState
from scheduler.forecast.cohort_walk import CohortWalk
from scheduler.forecast.fork import fork
from scheduler.forecast.hopeless import Hopeless
from scheduler.forecast.predictors import RuntimePredictor, facts_of
from scheduler.forecast.withheld import Withheld

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
    cut: bool = False  # stopped by its budget: a target absent may still start later


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
    out_of_time: Callable[[], bool] | None = None,
) -> ForwardResult:
    """Run a private copy of `s` forward from its clock's instant; `s` is not changed.

    With `clock` (the ManualClock `s` runs on), `s` is the caller's own throwaway state
    (the forecast worker builds one per refresh): it is run forward itself, not copied.
    `shortcut=False` runs every cycle :class:`Hopeless` would skip (tests compare both).
    `out_of_time` (None: never) is asked between two instants; once it says so the run
    stops there (`cut`). The serving worker gives one so a refresh ends in time
    (docs/forecasting.md#when-the-run-is-cut). The simulator sets none: its answers must
    not depend on the machine's speed.
    """
    now = s.now()
    copy, clock = (s, clock) if clock is not None else fork(s, now)
    copy.follow_changes()
    hopeless = Hopeless.of(copy) if shortcut else None
    run = _Run(
        copy,
        predictor,
        now,
        hopeless=hopeless,
        withheld=Withheld.of(copy, hopeless),
        cohorts=CohortWalk.of(copy, hopeless),
    )
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
        if out_of_time is not None and out_of_time():
            result.cut = True
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


@dataclass(slots=True)
class _Run:
    s: Scheduler
    predictor: RuntimePredictor
    made_at: Instant
    hopeless: Hopeless | None = None
    withheld: Withheld = field(default_factory=Withheld)
    cohorts: CohortWalk = field(default_factory=CohortWalk)
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

    def _offer(self) -> None:
        self.withheld.offer(self.s)
        self.cohorts.offer(self.s)

    def cycles_at_instant(self) -> int:
        """Cycles until one makes no progress and examines the heads the previous idle
        cycle examined (or no heads at all)."""
        s = self.s
        cycles = 0
        idle = 0
        last_heads: list[tuple[str, str]] | None = None
        while idle < MAX_IDLE_CYCLES:
            self._offer()
            stats = run_cycle(s)
            cycles += 1
            changes = s.take_changes()
            self.withheld.observe(s, changes)
            self.cohorts.observe(s, changes)
            if self.hopeless is not None:
                self.hopeless.observe(changes)
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
            self._offer()  # the queue may be empty only until the next offer
            if self.hopeless is not None and self.hopeless.holds(s):
                break  # the rest of this instant's cycles would fail every head
            idle += 1
            last_heads = changes.heads
        return cycles
