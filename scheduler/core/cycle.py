"""One scheduling cycle (docs/scheduling.md#the-scheduling-cycle): heads, snapshot, nominate, order,
admit, requeue."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from scheduler.core import nomination
from scheduler.core.admission_checks import reserve
from scheduler.core.blockers import NOT_TRIED, PendingWhy, other, policy
from scheduler.core.fair_sharing import FairItem, FairPreemptor, FairSharingOrder
from scheduler.core.flavor_assigner import (
    FIT,
    NO_FIT,
    PREEMPT,
    Assignment,
    FlavorAssigner,
)
from scheduler.core.model import ClusterQueueInfo
from scheduler.core.nomination import Nomination
from scheduler.core.pods_ready import admission_blocked
from scheduler.core.preemption import (
    AdmittedIndex,
    ClassicPreemptor,
    OneStateSearch,
    Preemptor,
    Target,
    TargetQuery,
    cluster_queue_path,
    preemption_message,
)
from scheduler.core.queue.interface import QueueEntry, RequeueReason
from scheduler.core.quota import QuotaTree
from scheduler.core.resources import FRAmounts
from scheduler.core.scheduler import CycleStats, Scheduler
from scheduler.core.workload import (
    ADMITTED,
    EVICTED,
    PREEMPTED,
    QUOTA_RESERVED,
    Admission,
    PodSetAssignment,
    WorkloadState,
)

NOT_NOMINATED = "not_nominated"
SKIPPED = "skipped"
NOMINATED = "nominated"
# blocked by waitForPodsReady.blockAdmission (docs/scheduling.md#blocking-admission)
WAITING = "waiting"
WAITING_MESSAGE = "waiting for all admitted workloads to be in PodsReady condition"
WAITING_WHY = policy(WAITING_MESSAGE)


@dataclass(slots=True)
class Entry:
    wl: WorkloadState
    cq: ClusterQueueInfo
    queue_entry: QueueEntry
    assignment: Assignment | None = None
    targets: list[Target] = field(default_factory=list)
    why: PendingWhy = NOT_TRIED
    status: str = NOT_NOMINATED
    reason: RequeueReason = RequeueReason.GENERIC
    admitted: bool = False
    counts: dict[int, int] | None = None

    @property
    def mode(self) -> str:
        return self.assignment.mode if self.assignment is not None else NO_FIT


def run_cycle(s: Scheduler) -> CycleStats:
    stats = CycleStats()
    now = s.now()
    active = frozenset(cq for cq in s._cluster_queues if s.cq_active(cq))
    heads = s._queues.heads(now, active.__contains__)
    if not heads:
        s.finalize_evictions()
        return stats
    stats.ran = True
    s._cycle_count += 1
    snapshot = s._tree.clone()
    admitted_by_cq = AdmittedIndex(s._workloads, s._holders, s._counted, active)
    s._nominations.begin_cycle(s, active)
    preemptor = cycle_preemptor(s, snapshot, admitted_by_cq)
    entries: list[Entry] = []
    for cq_name, qe in heads:
        wl = s._workloads.get(qe.key)
        if wl is None or wl.holds_quota:
            # docs/scheduling.md#nomination-checks check 1: dropped silently, never requeued.
            s._queues.release_in_flight(cq_name, qe.key)
            continue
        entry = Entry(wl=wl, cq=s._cluster_queues[cq_name], queue_entry=qe)
        _nominate(s, entry, snapshot, preemptor, active)
        entries.append(entry)

    candidates = [e for e in entries if e.assignment is not None]
    admission = AdmissionLoop(snapshot, admitted_by_cq, stats)
    for entry in ordered_entries(s, candidates, snapshot):
        if stats.blocked:
            # Never reached because admission is blocked: back to the heap, so the
            # next cycle tries them again once the block lifts.
            entry.reason = RequeueReason.FAILED_AFTER_NOMINATION
            continue
        _admission_step(s, entry, admission)

    for entry in entries:
        if not entry.admitted:
            _requeue_and_update(s, entry)
            stats.requeued += 1
    s.finalize_evictions()
    return stats


def cycle_preemptor(s: Scheduler, snapshot: QuotaTree, admitted_by_cq: AdmittedIndex) -> Preemptor:
    """The target search of a cycle on `snapshot`: fair sharing's or the classic one."""
    if s.config.fair_sharing:
        return FairPreemptor(
            snapshot,
            admitted_by_cq,
            s.now(),
            s.config.eviction_ordering,
            s.config.fair_sharing_strategies,
        )
    return ClassicPreemptor(snapshot, admitted_by_cq, s.now(), s.config.eviction_ordering)


def ordered_entries(s: Scheduler, candidates: list[Entry], snapshot: QuotaTree) -> Iterator[Entry]:
    """docs/scheduling.md#classic-entry-order classic order, or the
    docs/scheduling.md#fair-sharing-tournament fair-sharing tournament, which re-ranks after every
    admission because the snapshot's usage changes between yields."""
    if not s.config.fair_sharing:
        yield from sorted(candidates, key=_entry_order)
        return
    items = [
        FairItem(
            cq_name=e.cq.name,
            priority=e.wl.priority,
            timestamp=e.queue_entry.timestamp,
            uid=e.wl.uid,
            key=e.wl.key,
            usage=e.assignment.usage() if e.assignment is not None else {},
            payload=e,
        )
        for e in candidates
    ]
    for item in FairSharingOrder(items, snapshot):
        yield item.payload


def _entry_order(e: Entry) -> tuple[int, int, int, str, str]:
    """docs/scheduling.md#classic-entry-order classic order; borrowing level first, so preemptors
    without borrowing lead."""
    assert e.assignment is not None
    return (e.assignment.borrowing, -e.wl.priority, e.queue_entry.timestamp, e.wl.uid, e.wl.key)


def _nominate(
    s: Scheduler, e: Entry, snapshot: QuotaTree, preemptor: Preemptor, active: frozenset[str]
) -> None:
    cq = e.cq
    wl = e.wl
    blocked = policy_block(s, cq, wl, active)
    if blocked is not None:
        e.why, e.reason = blocked
        return
    cache = s._nominations
    key = cache.key(s, cq, wl)
    found = None if key is None else cache.get(s, cq, key)
    if found is None or nomination.VERIFY:
        computed = compute_nomination(s, wl, cq, snapshot, preemptor)
        if found is not None and found != computed:
            raise AssertionError(f"cached nomination of {wl.key} differs: {found} != {computed}")
        if key is not None and found is None:
            cache.put(s, key, computed, cq, wl)
        found = computed
    wl.last_assignment = found.last_state
    e.assignment = found.assignment
    e.targets = list(found.targets)
    e.why = found.why
    e.counts = None if found.counts is None else dict(found.counts)


def policy_block(
    s: Scheduler, cq: ClusterQueueInfo, wl: WorkloadState, active: frozenset[str]
) -> tuple[PendingWhy, RequeueReason] | None:
    """docs/scheduling.md#nomination-checks: a rule that keeps a head from being nominated
    at all (inactive ClusterQueue, namespace mismatch, invalid resources), or None."""
    if cq.name not in active:
        return policy(f"ClusterQueue {cq.name} is inactive"), RequeueReason.GENERIC
    if not s.namespace_matches(cq.name, wl.namespace):
        return (
            policy("Workload namespace doesn't match ClusterQueue selector"),
            RequeueReason.NAMESPACE_MISMATCH,
        )
    exceeded = [d for ps in wl.pod_sets for d in ps.limits_exceeded]
    if exceeded:
        return policy(f"resources validation failed: {'; '.join(exceeded)}"), RequeueReason.GENERIC
    return None


def compute_nomination(
    s: Scheduler, wl: WorkloadState, cq: ClusterQueueInfo, snapshot: QuotaTree, preemptor: Preemptor
) -> Nomination:
    search = OneStateSearch(preemptor)
    assigner = FlavorAssigner(
        cq,
        snapshot,
        s._flavors,
        search.oracle(wl, cq),
        fair_sharing=s.config.fair_sharing,
        ignore_undeclared=s.config.ignore_undeclared_resources,
    )

    def targets_for(assignment: Assignment) -> list[Target]:
        if assignment.mode != PREEMPT:
            return []
        return search.find_targets(
            TargetQuery(wl, cq, assignment.frs_needing_preemption(), assignment.usage())
        )

    full = assigner.assign(wl, last=wl.last_assignment)
    chosen, targets, counts = full, targets_for(full), None
    if full.mode != FIT and not targets:
        partial = _partial_admission(wl, assigner, targets_for)
        if partial is not None:
            chosen, targets, counts = partial
    return Nomination(chosen, tuple(targets), chosen.why(), counts, full.last_state)


def _partial_admission(
    wl: WorkloadState,
    assigner: FlavorAssigner,
    targets_for: Callable[[Assignment], list[Target]],
) -> tuple[Assignment, list[Target], dict[int, int]] | None:
    """docs/scheduling.md#partial-admission: the smallest reduction k whose assignment fits (or
    preempts with targets)."""
    deltas = [
        (wl.current_count(ps) - ps.min_count) if ps.min_count is not None else 0
        for ps in wl.pod_sets
    ]
    total = sum(max(0, d) for d in deltas)
    if total <= 0:
        return None
    results: dict[int, tuple[Assignment, list[Target]]] = {}

    def counts_for(k: int) -> dict[int, int]:
        return {
            i: wl.current_count(ps) - (max(0, deltas[i]) * k // total)
            for i, ps in enumerate(wl.pod_sets)
        }

    def succeeds(k: int) -> bool:
        assignment = assigner.assign(wl, counts=counts_for(k))
        targets = targets_for(assignment)
        results[k] = (assignment, targets)
        return assignment.mode == FIT or bool(targets)

    lo, hi = 0, total + 1
    while lo < hi:
        mid = (lo + hi) // 2
        if succeeds(mid):
            hi = mid
        else:
            lo = mid + 1
    found = results.get(lo)
    if found is not None and (found[0].mode == FIT or found[1]):
        return found[0], found[1], counts_for(lo)
    return None


@dataclass(slots=True)
class AdmissionLoop:
    """What the admission loop carries from one entry to the next within a cycle."""

    snapshot: QuotaTree
    admitted_by_cq: AdmittedIndex
    stats: CycleStats
    targets: dict[str, Target] = field(default_factory=dict)  # preemption targets so far


def take_quota(e: Entry, loop: AdmissionLoop) -> bool:
    """docs/scheduling.md#admission-loop, the part that only touches the cycle's snapshot:
    whether `e` takes its quota there (its usage is then added, its targets claimed).

    An entry that does not has its `why` and `status` set when it was skipped; a
    preemptor without targets may leave a reservation. Nothing outside `e` and `loop`
    changes, so the what-if dry run replays it (docs/visibility-api.md#what-if).
    """
    assert e.assignment is not None
    assignment = e.assignment
    snapshot, cycle_targets = loop.snapshot, loop.targets
    cq = e.cq.name
    mode = assignment.mode
    if mode == NO_FIT:
        return False
    usage = assignment.usage()
    if mode == PREEMPT and not e.targets:
        if e.cq.preemption.reclaim_within_cohort != "Any":
            snapshot.add_usage(cq, _reservation(snapshot, cq, assignment, usage))
        return False
    if any(t.key in cycle_targets for t in e.targets):
        _skip(e, "Workload has overlapping preemption targets with another workload")
        return False
    if not _fits_without(
        snapshot, loop.admitted_by_cq, cq, usage, [*cycle_targets, *(t.key for t in e.targets)]
    ):
        _skip(e, "Workload no longer fits after processing another workload")
        return False
    for t in e.targets:
        cycle_targets[t.key] = t
    snapshot.add_usage(cq, usage)
    return True


def _admission_step(s: Scheduler, e: Entry, loop: AdmissionLoop) -> None:
    """docs/scheduling.md#admission-loop, one entry."""
    if not take_quota(e, loop):
        if e.status == SKIPPED:
            e.wl.last_assignment = None
        return
    assert e.assignment is not None
    if e.assignment.mode == PREEMPT:
        _issue_preemptions(s, e, loop.stats)
        return
    if admission_blocked(s) and not _wait_until_unblocked(s, e):
        loop.stats.blocked = True
        return
    e.status = NOMINATED
    _admit(s, e, e.assignment.usage())
    loop.stats.admitted.append(e.wl.key)


def _wait_until_unblocked(s: Scheduler, e: Entry) -> bool:
    """docs/scheduling.md#blocking-admission: mark the entry Waiting, then let events and timers run
    (without a new snapshot) until every quota holder is ready; False if nothing can unblock it."""
    e.wl.set_pending("Waiting", WAITING_WHY, s.now())
    while admission_blocked(s):
        if s._block_waiter is None or not s._block_waiter():
            e.status = WAITING
            return False
    return True


def _fits_without(
    snapshot: QuotaTree,
    admitted_by_cq: AdmittedIndex,
    cq: str,
    usage: FRAmounts,
    removed_keys: list[str],
) -> bool:
    """docs/scheduling.md#admission-loop step 4: does the entry fit once every preemption target is
    gone?"""
    removed = [a for key in removed_keys if (a := admitted_by_cq.by_key(key)) is not None]
    for a in removed:
        snapshot.withdraw_usage(a.cluster_queue, a.usage)
    try:
        return all(req <= snapshot.available(cq, fr) for fr, req in usage.items())
    finally:
        for a in removed:
            snapshot.add_usage(a.cluster_queue, a.usage)


def _issue_preemptions(s: Scheduler, e: Entry, stats: CycleStats) -> None:
    """docs/scheduling.md#issuing-preemptions: evict every target now; their quota is released when
    the cycle ends."""
    now = s.now()
    preemptor_path = cluster_queue_path(s.quota, e.cq.name)
    for t in e.targets:
        victim = s._workloads[t.key]
        if victim.conditions.is_true(EVICTED):
            continue
        preemptee_path = cluster_queue_path(s.quota, t.cluster_queue)
        message = preemption_message(e.wl, t.reason, preemptor_path, preemptee_path)
        victim.conditions.set(PREEMPTED, "True", t.reason, message, now)
        victim.preempted_by = e.wl.key
        s.evict(victim, "Preempted", message, requeued_status="True")
        stats.preempted.append(t.key)
    e.why = e.why.with_preemptions(len(e.targets))
    e.reason = RequeueReason.PENDING_PREEMPTION
    e.wl.last_assignment = None


def _skip(e: Entry, message: str) -> None:
    e.status = SKIPPED
    e.why = other(message)


def _reservation(
    snapshot: QuotaTree, cq: str, assignment: Assignment, usage: FRAmounts
) -> FRAmounts:
    """docs/scheduling.md#admission-loop step 2: hold capacity a preemptor without targets may
    reclaim later.

    Clamped at zero: a negative reservation (possible only after a quota decrease)
    would free capacity that does not exist.
    """
    reserved: FRAmounts = {}
    for fr, request in usage.items():
        used = snapshot.usage(cq, fr)
        nominal = snapshot.nominal(cq, fr)
        if assignment.borrowing > 0:
            limit = snapshot.borrowing_limit(cq, fr)
            value = request if limit is None else min(request, nominal + limit - used)
        else:
            value = min(request, nominal - used)
        if value > 0:
            reserved[fr] = value
    return reserved


def _admit(s: Scheduler, e: Entry, usage: FRAmounts) -> None:
    assert e.assignment is not None
    wl = e.wl
    now = s.now()
    pod_sets = [
        PodSetAssignment(
            name=ps.name,
            flavors={r: c.flavor for r, c in sorted(ps.flavors.items())},
            resource_usage=dict(sorted(ps.requests.items())),
            count=ps.count,
        )
        for ps in e.assignment.pod_sets
    ]
    wl.admission = Admission(cluster_queue=e.cq.name, pod_sets=pod_sets)
    wl.conditions.set(
        QUOTA_RESERVED, "True", "QuotaReserved", f"Quota reserved in ClusterQueue {e.cq.name}", now
    )
    if reserve(s, wl, e.cq):
        # Admitted at once unless admission checks apply (docs/scheduling.md#admission-checks).
        wl.conditions.set(ADMITTED, "True", "Admitted", "The workload is admitted", now)
    for type_ in (EVICTED, PREEMPTED):
        cond = wl.conditions.get(type_)
        if cond is not None and cond.is_true:
            message = cond.message
            if not message.startswith("Previously: "):
                message = f"Previously: {message}"
            wl.conditions.set(type_, "False", "QuotaReserved", message, now)
    wl.last_assignment = None
    e.admitted = True
    if s._feed is not None:
        s._feed.admitted(wl.key)
    s._queues.release_in_flight(e.cq.name, wl.key)
    s.hold(wl, e.cq.name, usage)


def _requeue_and_update(s: Scheduler, e: Entry) -> None:
    wl = e.wl
    now = s.now()
    if e.status != NOT_NOMINATED and e.reason is RequeueReason.GENERIC:
        e.reason = RequeueReason.FAILED_AFTER_NOMINATION
    still_queued = (
        s._workloads.get(wl.key) is wl
        and not wl.holds_quota
        and wl.active
        and not wl.finished
        and s.resolve(wl)[0] == e.cq.name
    )
    if still_queued:
        untried = wl.last_assignment is not None and wl.last_assignment.has_untried_flavors()
        s._queues.requeue(
            e.cq.name,
            s.queue_entry(wl, e.queue_entry),
            e.reason,
            now,
            has_untried_flavors=untried,
        )
    else:
        s._queues.release_in_flight(e.cq.name, wl.key)
    if e.status in {NOT_NOMINATED, SKIPPED}:
        wl.set_pending("Pending", e.why, now)
        wl.resource_requests = s._nominations.resource_requests(e.cq, wl)
