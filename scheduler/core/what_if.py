"""What-if: what the next scheduling cycle would do with one more workload, changing
nothing (docs/visibility-api.md#what-if).

**"Now" means the next cycle**, run against the state as it is at this instant, with the
hypothetical workload created at this instant and nothing else arriving, finishing or
changing before that cycle. The answer replays the cycle's own steps
(docs/scheduling.md#the-scheduling-cycle) on a clone of the quota tree:

1. Queue resolution: the LocalQueue must exist and not be stopped, and its ClusterQueue
   must exist; otherwise the workload would not be queued at all (`Inadmissible`).
2. Placement: the position the workload would take in its ClusterQueue and LocalQueue,
   from the queue's own order (`PendingQueue.insertion_position`, plugin queues too).
3. Head: the next cycle pops one head per ClusterQueue. The workload is examined only if
   it would be that head: nothing the queue would pop comes before it
   (`PendingQueue.peek`). Otherwise it is `Queued`, and the flavors, borrowing and
   victims shown are those it would get if it were at the head now.
4. Nomination checks and flavor assignment (with partial admission and the preemption
   target search), exactly as the cycle computes them, on the clone.
5. The admission loop: the heads of the other ClusterQueues of the same cohort tree (only
   they share quota) are nominated too, ordered with the workload as the cycle orders
   its entries (classic order, or the fair-sharing tournament), and those that come
   first take their quota in the clone; then the workload's own turn says whether it
   is admitted (`Admitted`), would evict victims first (`Preempting`), or stays
   `Pending` with its blockers.

Nothing here writes to the scheduler: the hypothetical workload is never stored or
queued, the other heads are peeked, not popped, their nominations are computed without
the nomination cache and never assigned to them, and every quota change happens in the
clone. `tests/unit/core/test_what_if.py` checks that a full dump of the state is
unchanged after any dry run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import islice
from typing import Final

from scheduler.api.workload import Workload, WorkloadStatus
from scheduler.core.blockers import NOT_TRIED, PendingWhy, other, policy
from scheduler.core.clock import datetime_from_instant
from scheduler.core.cycle import (
    WAITING_WHY,
    AdmissionLoop,
    Entry,
    compute_nomination,
    cycle_preemptor,
    ordered_entries,
    policy_block,
    take_quota,
)
from scheduler.core.flavor_assigner import FIT, NO_FIT, PREEMPT, Assignment
from scheduler.core.ingest import workload_state
from scheduler.core.metadata import deterministic_uid
from scheduler.core.model import ClusterQueueInfo
from scheduler.core.pods_ready import admission_blocked
from scheduler.core.preemption import AdmittedIndex
from scheduler.core.queue.interface import PendingQueue, QueueEntry
from scheduler.core.quota import QuotaTree
from scheduler.core.scheduler import CycleStats, Scheduler
from scheduler.core.workload import WorkloadState

ADMITTED: Final = "Admitted"  # the next cycle reserves its quota
PREEMPTING: Final = "Preempting"  # the next cycle evicts victims; admitted once they are gone
PENDING: Final = "Pending"  # at the head, but it does not fit: see the blockers
QUEUED: Final = "Queued"  # workloads the next cycle pops first are ahead of it
INADMISSIBLE: Final = "Inadmissible"  # a rule keeps it out (queue, namespace, validation)


@dataclass(frozen=True, slots=True)
class PodSetFlavors:
    """One pod set's assignment: the flavor of each resource and the total requested
    (scheduler values) for `count` pods."""

    name: str
    count: int
    flavors: tuple[tuple[str, str], ...]  # (resource, flavor), by resource
    requests: tuple[tuple[str, int], ...]  # (resource, scheduler value), by resource


@dataclass(frozen=True, slots=True)
class Borrowed:
    """Quota the ClusterQueue would take from its cohort beyond its nominal quota."""

    flavor: str
    resource: str
    amount: int  # scheduler value


@dataclass(frozen=True, slots=True)
class Victim:
    namespace: str
    name: str
    cluster_queue: str
    priority: int
    reason: str  # InClusterQueue, InCohortReclamation, ...


@dataclass(frozen=True, slots=True)
class Placement:
    """Where the workload would be listed once queued (0-based; counts include it)."""

    position_in_cluster_queue: int
    position_in_local_queue: int | None  # None: not counted (`count_local_queue=False`)
    pending_in_cluster_queue: int
    pending_in_local_queue: int


@dataclass(frozen=True, slots=True)
class WhatIf:
    decision: str  # ADMITTED | PREEMPTING | PENDING | QUEUED | INADMISSIBLE
    cluster_queue: str | None
    placement: Placement | None  # None when it would not be queued at all
    head: bool  # the next cycle would examine it
    mode: str  # Fit | Preempt | NoFit of its flavor assignment; "" when none was made
    pod_sets: tuple[PodSetFlavors, ...] = ()
    borrowed: tuple[Borrowed, ...] = ()
    victims: tuple[Victim, ...] = ()
    why: PendingWhy = NOT_TRIED  # the blockers when it is not admitted

    @property
    def admitted(self) -> bool:
        return self.decision == ADMITTED


def hypothetical(s: Scheduler, obj: Workload) -> WorkloadState:
    """The core's record of `obj` as if it were created now: what its body says of
    `creationTimestamp` and `status` is ignored (kube-apiserver would set the first and
    the scheduler owns the second); a missing uid gets the deterministic one."""
    now = s.now()
    meta = obj.metadata
    namespace = meta.namespace or "default"
    fresh_meta = meta.model_copy(
        update={
            "namespace": namespace,
            "creation_timestamp": datetime_from_instant(now),
            "uid": meta.uid or deterministic_uid(namespace, meta.name),
        }
    )
    fresh = obj.model_copy(update={"metadata": fresh_meta, "status": WorkloadStatus()})
    return workload_state(fresh, s.config, now, keep_object=False)


def what_if(s: Scheduler, wl: WorkloadState, *, count_local_queue: bool = True) -> WhatIf:
    """The next cycle's answer for `wl`, a workload that is not in `s` (see the module).

    Its position in the LocalQueue is counted over the workloads listed ahead of it,
    O(position); `count_local_queue=False` leaves it to the caller (the runtime reads it
    from the published snapshot's per-LocalQueue index in O(log n))."""
    if not wl.active:
        return WhatIf(INADMISSIBLE, None, None, head=False, mode="", why=_DEACTIVATED)
    cq_name, problem = s.resolve(wl)
    if cq_name is None:
        assert problem is not None
        return WhatIf(INADMISSIBLE, None, None, head=False, mode="", why=policy(problem))
    queue = s._queues.queue(cq_name)
    assert queue is not None, f"ClusterQueue {cq_name} has no queue"
    entry = s.queue_entry(wl)
    placement = _placement(queue, entry, count_local_queue=count_local_queue)
    active = frozenset(c for c in s._cluster_queues if s.cq_active(c))
    blocked = policy_block(s, s._cluster_queues[cq_name], wl, active)
    if blocked is not None:
        return WhatIf(INADMISSIBLE, cq_name, placement, head=False, mode="", why=blocked[0])
    cq = s._cluster_queues[cq_name]
    return _DryRun(s, active, placement).run(wl, cq, entry, _would_be_head(queue, entry, s))


_DEACTIVATED: Final = policy("The workload is deactivated")


class CycleProbe:
    """Dry runs of the next cycle with chosen heads, changing nothing: whether a pending
    workload would be admitted by a cycle whose only other heads are some pending
    workloads of other ClusterQueues of its tree, queued or not (the forecaster's count
    of a Cohort's walk, docs/forecasting.md#cost). Each workload is nominated once, on
    the state at the probe's creation: make a new probe once quota changes. Admission
    blocking is not considered."""

    def __init__(self, s: Scheduler) -> None:
        self._s = s
        self._run = _DryRun(s, frozenset(c for c in s._cluster_queues if s.cq_active(c)), None)
        self._heads: dict[str, Entry | None] = {}

    def admitted_beside(self, key: str, rivals: Sequence[str]) -> bool:
        entries = [self._head(k) for k in (key, *rivals)]
        own = entries[0]
        if own is None:
            return False
        snapshot = self._run.snapshot.clone()
        loop = AdmissionLoop(snapshot, self._run.admitted_by_cq, CycleStats())
        candidates = [e for e in entries if e is not None and e.assignment is not None]
        for e in ordered_entries(self._s, candidates, snapshot):
            if e is own:
                return take_quota(own, loop) and _mode(own) == FIT
            take_quota(e, loop)
        return False

    def _head(self, key: str) -> Entry | None:
        """A fresh copy of `key`'s entry each time: the admission loop writes to it."""
        if key not in self._heads:
            self._heads[key] = self._run.head(key)
        found = self._heads[key]
        return None if found is None else replace(found, targets=list(found.targets))


def _placement(queue: PendingQueue, entry: QueueEntry, *, count_local_queue: bool) -> Placement:
    """O(log n) for the position in a FIFO queue; the LocalQueue position counts the
    entries of that LocalQueue ahead of it, O(position)."""
    position = queue.insertion_position(entry)
    ahead_in_lq = None
    if count_local_queue:
        lq = entry.local_queue_key
        ahead_in_lq = sum(
            1 for e in islice(queue.iter_ordered(), position) if e.local_queue_key == lq
        )
    return Placement(
        position_in_cluster_queue=position,
        position_in_local_queue=ahead_in_lq,
        pending_in_cluster_queue=len(queue) + 1,
        pending_in_local_queue=queue.local_queue_counts().get(entry.local_queue_key, 0) + 1,
    )


def _would_be_head(queue: PendingQueue, entry: QueueEntry, s: Scheduler) -> bool:
    """Whether the next cycle would pop it: a new workload enters the heap (it has no
    backoff), so it is popped unless what the queue would pop now sorts before it."""
    first = queue.peek(s.now())
    return first is None or queue.order_key(entry) < queue.order_key(first)


class _DryRun:
    """The cycle's snapshot, target search and admission loop, for one dry run."""

    def __init__(self, s: Scheduler, active: frozenset[str], placement: Placement | None) -> None:
        self.s = s
        self.active = active
        self.placement = placement
        self.snapshot = s._tree.clone()
        self.admitted_by_cq = AdmittedIndex(s._workloads, s._holders, s._counted, active)
        self.preemptor = cycle_preemptor(s, self.snapshot, self.admitted_by_cq)

    def run(self, wl: WorkloadState, cq: ClusterQueueInfo, entry: QueueEntry, head: bool) -> WhatIf:
        s = self.s
        own = self._nominated(wl, cq, entry)
        if not head:
            return self._answer(QUEUED, own, self.snapshot, head=False)
        # docs/scheduling.md#blocking-admission: nothing changes during a dry run, so a
        # block now lasts the whole cycle; the first entry that would be admitted stops
        # the loop, and every entry after it is left for a later cycle. Without a block
        # now, a rival admitted before the workload starts one: it holds quota without
        # PodsReady for the rest of the cycle.
        blocked = admission_blocked(s)
        blocking = _admission_can_block(s)
        loop = AdmissionLoop(self.snapshot, self.admitted_by_cq, CycleStats())
        candidates = [e for e in [own, *self._rival_heads(own.cq.name)] if e.assignment]
        for e in ordered_entries(s, candidates, self.snapshot):
            if e is own:
                if loop.stats.blocked:
                    return self._answer(PENDING, own, self.snapshot, head=True, why=WAITING_WHY)
                return self._own_turn(own, loop, blocked=blocked)
            if take_quota(e, loop) and _mode(e) != PREEMPT:
                if blocked:
                    loop.stats.blocked = True
                blocked = blocked or blocking
        # Not a candidate (no assignment was made): pending with its nomination's why.
        return self._answer(PENDING, own, self.snapshot, head=True)

    def head(self, key: str) -> Entry | None:
        """`key` nominated as a head of the cycle, if it is pending in an active
        ClusterQueue and no rule keeps it from being nominated."""
        s = self.s
        wl = s._workloads.get(key)
        if wl is None or wl.holds_quota:
            return None
        cq_name, _ = s.resolve(wl)
        if cq_name is None:
            return None
        cq = s._cluster_queues[cq_name]
        if policy_block(s, cq, wl, self.active) is not None:
            return None
        return self._nominated(wl, cq, s.queue_entry(wl))

    def _nominated(self, wl: WorkloadState, cq: ClusterQueueInfo, qe: QueueEntry) -> Entry:
        """An entry with the nomination the cycle would compute, never stored on `wl`."""
        n = compute_nomination(self.s, wl, cq, self.snapshot, self.preemptor)
        entry = Entry(wl=wl, cq=cq, queue_entry=qe, assignment=n.assignment, why=n.why)
        entry.targets = list(n.targets)
        entry.counts = None if n.counts is None else dict(n.counts)
        return entry

    def _rival_heads(self, cq_name: str) -> list[Entry]:
        """The heads the next cycle would pop from the other ClusterQueues sharing quota
        with `cq_name`, nominated on the same snapshot (peeked, not popped)."""
        s = self.s
        rivals: list[Entry] = []
        for name in s._tree.tree_cluster_queues(cq_name):
            queue = s._queues.queue(name)
            if name == cq_name or name not in self.active or queue is None:
                continue
            first = queue.peek(s.now())
            wl = s._workloads.get(first.key) if first is not None else None
            if first is None or wl is None or wl.holds_quota:
                continue
            cq = s._cluster_queues[name]
            if policy_block(s, cq, wl, self.active) is None:
                rivals.append(self._nominated(wl, cq, first))
        return rivals

    def _own_turn(self, own: Entry, loop: AdmissionLoop, *, blocked: bool) -> WhatIf:
        before = loop.snapshot.clone()  # borrowing is measured before its usage is added
        if not take_quota(own, loop):
            return self._answer(PENDING, own, before, head=True)
        if _mode(own) == PREEMPT:
            return self._answer(PREEMPTING, own, before, head=True)
        if blocked:
            return self._answer(PENDING, own, before, head=True, why=WAITING_WHY)
        return self._answer(ADMITTED, own, before, head=True)

    def _answer(
        self,
        decision: str,
        e: Entry,
        snapshot: QuotaTree,
        *,
        head: bool,
        why: PendingWhy | None = None,
    ) -> WhatIf:
        assignment = e.assignment
        assert assignment is not None
        fits = assignment.mode != NO_FIT
        if why is None:
            why = NOT_TRIED if decision in {ADMITTED, PREEMPTING} else _why_of(e)
        if decision == QUEUED and not why.blockers:
            # Which workload is ahead is not said: it may be in a namespace the caller
            # may not see.
            why = other(
                f"the next cycle examines another workload of ClusterQueue {e.cq.name} first"
            )
        return WhatIf(
            decision=decision,
            cluster_queue=e.cq.name,
            placement=self.placement,
            head=head,
            mode=assignment.mode,
            pod_sets=_pod_sets(assignment) if fits else (),
            borrowed=_borrowed(snapshot, e.cq.name, assignment) if fits else (),
            victims=_victims(self.s, e),
            why=why,
        )


def _admission_can_block(s: Scheduler) -> bool:
    """Whether an admission blocks the rest of its cycle (waitForPodsReady with
    blockAdmission: the admitted workload holds quota without PodsReady)."""
    cfg = s.config.wait_for_pods_ready
    return cfg.enable and cfg.block_admission


def _mode(e: Entry) -> str:
    return e.assignment.mode if e.assignment is not None else NO_FIT


def _why_of(e: Entry) -> PendingWhy:
    """The entry's blockers; a preemptor whose victims cannot be found says so."""
    assert e.assignment is not None
    if e.why.blockers or e.assignment.mode == FIT:
        return e.why
    return e.assignment.why()


def _pod_sets(assignment: Assignment) -> tuple[PodSetFlavors, ...]:
    return tuple(
        PodSetFlavors(
            name=ps.name,
            count=ps.count,
            flavors=tuple(sorted((r, c.flavor) for r, c in ps.flavors.items())),
            requests=tuple(sorted(ps.requests.items())),
        )
        for ps in assignment.pod_sets
    )


def _borrowed(snapshot: QuotaTree, cq: str, assignment: Assignment) -> tuple[Borrowed, ...]:
    """Per flavor and resource, how much more than its nominal quota the ClusterQueue
    would use once the workload is in (only the part this workload adds)."""
    found: list[Borrowed] = []
    for fr, request in sorted(assignment.usage().items()):
        used, nominal = snapshot.usage(cq, fr), snapshot.nominal(cq, fr)
        extra = max(0, used + request - nominal) - max(0, used - nominal)
        if extra > 0:
            found.append(Borrowed(flavor=fr[0], resource=fr[1], amount=extra))
    return tuple(found)


def _victims(s: Scheduler, e: Entry) -> tuple[Victim, ...]:
    victims = []
    for t in e.targets:
        wl = s._workloads.get(t.key)
        if wl is not None:
            victims.append(Victim(wl.namespace, wl.name, t.cluster_queue, wl.priority, t.reason))
    return tuple(victims)


__all__ = [
    "ADMITTED",
    "INADMISSIBLE",
    "PENDING",
    "PREEMPTING",
    "QUEUED",
    "Borrowed",
    "Placement",
    "PodSetFlavors",
    "Victim",
    "WhatIf",
    "hypothetical",
    "what_if",
]
