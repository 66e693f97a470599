"""Classic preemption (docs/scheduling.md#classic-preemption): which admitted workloads make room
for a head.

The search runs on the cycle's snapshot: candidates' usage is removed from the cloned
quota tree while testing, and always put back before returning, so the snapshot is
unchanged afterwards.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from scheduler.core.clock import Instant
from scheduler.core.flavor_assigner import GranularMode, Mode, PreemptionOracle
from scheduler.core.holders import Holders
from scheduler.core.model import ClusterQueueInfo
from scheduler.core.quota import NodeRef, QuotaTree
from scheduler.core.resources import FlavorResource, FRAmounts
from scheduler.core.workload import EVICTED, QUOTA_RESERVED, WorkloadState

IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"

_WHY = {
    IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    IN_COHORT_RECLAMATION: "reclamation within the cohort",
    IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}

# Candidate classes (docs/scheduling.md#preemption-candidates).
WITHIN_CQ = "WithinCQ"
HIERARCHICAL_RECLAIM = "HierarchicalReclaim"
RECLAIM_WITHOUT_BORROWING = "ReclaimWithoutBorrowing"
RECLAIM_WHILE_BORROWING = "ReclaimWhileBorrowing"

_REASON_OF_CLASS = {
    WITHIN_CQ: IN_CLUSTER_QUEUE,
    HIERARCHICAL_RECLAIM: IN_COHORT_RECLAMATION,
    RECLAIM_WITHOUT_BORROWING: IN_COHORT_RECLAMATION,
    RECLAIM_WHILE_BORROWING: IN_COHORT_RECLAIM_WHILE_BORROWING,
}


class ParentLookup(Protocol):
    def parent(self, node: NodeRef) -> NodeRef | None: ...


def cluster_queue_path(tree: ParentLookup, cq: str) -> str:
    """Where a ClusterQueue sits, as Kueue's preemption messages say it: its cohorts from
    the root down, then itself, `/`-separated (`/cq` without a cohort)."""
    names, node, seen = [cq], NodeRef.cq(cq), set()
    while (parent := tree.parent(node)) is not None and parent.name not in seen:
        seen.add(parent.name)
        names.append(parent.name)
        node = parent
    return "/" + "/".join(reversed(names))


def preemption_message(
    preemptor: WorkloadState, reason: str, preemptor_path: str, preemptee_path: str
) -> str:
    """Kueue v0.19.2's words for a preemption, on the victim's `Preempted` and `Evicted`
    conditions (docs/scheduling.md#condition-messages)."""
    return (
        f"Preempted to accommodate a workload (UID: {preemptor.uid or 'UNKNOWN'}, "
        f"JobUID: {preemptor.job_uid}) due to {_WHY[reason]}; "
        f"preemptor path: {preemptor_path}; preemptee path: {preemptee_path}"
    )


@dataclass(frozen=True, slots=True)
class TargetQuery:
    """The question a target search answers: which admitted workloads must go so that `wl`,
    queued in `cq`, fits `requests` on the flavor-resources in `frs_needing`."""

    wl: WorkloadState
    cq: ClusterQueueInfo
    frs_needing: set[FlavorResource]
    requests: FRAmounts

    def key(self) -> tuple[object, ...]:
        """Equal for the same question (`frs_needing` and `requests` are not hashable)."""
        return (
            self.wl.key,
            self.cq.name,
            frozenset(self.frs_needing),
            tuple(sorted(self.requests.items())),
        )


class Preemptor(Protocol):
    """A target search (classic docs/scheduling.md#classic-preemption, or fair sharing
    docs/scheduling.md#fair-sharing-preemption) and its docs/scheduling.md#preemption-oracle
    oracle."""

    @property
    def tree(self) -> QuotaTree: ...

    @property
    def admitted_by_cq(self) -> Mapping[str, Sequence[Admitted]]: ...

    def find_targets(self, query: TargetQuery) -> list[Target]: ...

    def oracle(self, wl: WorkloadState, cq: ClusterQueueInfo) -> PreemptionOracle: ...


@dataclass(frozen=True, slots=True)
class Target:
    key: str
    cluster_queue: str
    reason: str  # InClusterQueue | InCohortReclamation | InCohortReclaimWhileBorrowing | ...


@dataclass(frozen=True, slots=True)
class Admitted:
    """A quota-holding workload as the cycle's snapshot sees it."""

    wl: WorkloadState
    cluster_queue: str
    usage: FRAmounts

    def uses_any(self, frs: set[FlavorResource]) -> bool:
        return any(fr in frs for fr in self.usage)


class AdmittedIndex(Mapping[str, Sequence[Admitted]]):
    """The quota holders of the cycle's snapshot, built per ClusterQueue on first use,
    so a cycle that preempts nothing never walks the admitted workloads."""

    def __init__(
        self,
        workloads: Mapping[str, WorkloadState],
        holders: Holders,
        counted: Mapping[str, FRAmounts],
        active: Iterable[str],
    ) -> None:
        self._workloads = workloads
        self._holders = holders
        self._counted = counted
        self._active = sorted(active)
        self._active_set = set(self._active)
        self._cache: dict[str, list[Admitted]] = {}

    def __getitem__(self, cq: str) -> Sequence[Admitted]:
        if cq not in self._active_set:
            raise KeyError(cq)
        found = self._cache.get(cq)
        if found is None:
            found = [
                Admitted(self._workloads[key], cq, self._counted[key])
                for key in self._holders.keys(cq)
                if key in self._counted
            ]
            self._cache[cq] = found
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._active)

    def __len__(self) -> int:
        return len(self._active)

    def by_key(self, key: str) -> Admitted | None:
        cq = self._holders.cluster_queue_of(key)
        if cq is None or cq not in self._active_set or key not in self._counted:
            return None
        return Admitted(self._workloads[key], cq, self._counted[key])

    def lowest_priority(self, cq: str) -> int | None:
        return self._holders.lowest_priority(cq) if cq in self._active_set else None


class OneStateSearch:
    """A target search for one nomination, during which the snapshot does not change.

    The docs/scheduling.md#preemption-oracle oracle searches per FR while flavors are assigned, and
    the assignment it leads to is searched again for its targets; for a head needing one FR both ask
    the same question, so each distinct question is answered once.
    """

    def __init__(self, inner: Preemptor) -> None:
        self._inner = inner
        self._answers: dict[tuple[object, ...], list[Target]] = {}

    @property
    def tree(self) -> QuotaTree:
        return self._inner.tree

    @property
    def admitted_by_cq(self) -> Mapping[str, Sequence[Admitted]]:
        return self._inner.admitted_by_cq

    def oracle(self, wl: WorkloadState, cq: ClusterQueueInfo) -> PreemptionOracle:
        return targets_oracle(self, self.tree, self.admitted_by_cq, wl, cq)

    def find_targets(self, query: TargetQuery) -> list[Target]:
        key = query.key()
        found = self._answers.get(key)
        if found is None:
            found = self._inner.find_targets(query)
            self._answers[key] = found
        return list(found)


@dataclass(slots=True)
class _Candidate:
    admitted: Admitted
    klass: str
    lca: str | None  # the cohort through which an other-CQ candidate was found


def targets_oracle(
    search: Preemptor,
    tree: QuotaTree,
    admitted_by_cq: Mapping[str, Sequence[Admitted]],
    wl: WorkloadState,
    cq: ClusterQueueInfo,
) -> PreemptionOracle:
    """docs/scheduling.md#preemption-oracle for any target search: no targets ->
    noPreemptionCandidates; otherwise the borrowing level with the targets gone, and preempt (own
    CQ) or reclaim (others)."""

    def evaluate(fr: FlavorResource, value: int) -> GranularMode:
        targets = search.find_targets(TargetQuery(wl, cq, {fr}, {fr: value}))
        if not targets:
            level, _ = tree.borrowing_level(cq.name, fr, value)
            return GranularMode(Mode.NO_CANDIDATES, level)
        removed = [
            a for t in targets for a in admitted_by_cq.get(t.cluster_queue, ()) if a.wl.key == t.key
        ]
        for a in removed:
            tree.withdraw_usage(a.cluster_queue, a.usage)
        try:
            level, _ = tree.borrowing_level(cq.name, fr, value)
        finally:
            for a in reversed(removed):
                tree.add_usage(a.cluster_queue, a.usage)
        own = any(t.cluster_queue == cq.name for t in targets)
        return GranularMode(Mode.PREEMPT if own else Mode.RECLAIM, level)

    return evaluate


def no_candidates_oracle(tree: QuotaTree, cq: str) -> PreemptionOracle:
    """The oracle when no workload may be preempted: docs/scheduling.md#preemption-oracle with an
    empty target list."""

    def oracle(fr: FlavorResource, value: int) -> GranularMode:
        level, _ = tree.borrowing_level(cq, fr, value)
        return GranularMode(Mode.NO_CANDIDATES, level)

    return oracle


Index = TypeVar("Index", bound=Mapping[str, Sequence[Admitted]])


@dataclass(eq=False)
class TargetSearch(ABC, Generic[Index]):
    """What both target searches hold, the snapshot they search (tree, admitted workloads per
    ClusterQueue, the instant, the eviction-ordering setting), and the oracle every search
    answers through (docs/scheduling.md#preemption-oracle)."""

    tree: QuotaTree
    admitted_by_cq: Index
    now: Instant
    eviction_ordering: bool

    def oracle(self, wl: WorkloadState, cq: ClusterQueueInfo) -> PreemptionOracle:
        return targets_oracle(self, self.tree, self.admitted_by_cq, wl, cq)

    @abstractmethod
    def find_targets(self, query: TargetQuery) -> list[Target]:
        """The workloads to evict so that the query's workload fits its requests on
        `frs_needing`; [] when no set of allowed victims makes room."""


class ClassicPreemptor(TargetSearch[AdmittedIndex]):
    """The docs/scheduling.md#classic-preemption target search for one preemptor on one snapshot."""

    # --------------------------------------------------------------- search
    def find_targets(self, query: TargetQuery) -> list[Target]:
        cq, frs_needing = query.cq, query.frs_needing
        if self._nothing_to_preempt(query.wl, cq):
            return []
        same, hierarchy, priority = self._candidates(query)
        if not (same or hierarchy or priority):
            return []
        sequence = self._sequence(cq.name, hierarchy, priority, same)
        forbidden = cq.preemption.borrow_within_cohort == "Never"
        others = bool(hierarchy or priority)
        if not others or (
            forbidden
            and any(
                self.tree.usage(cq.name, fr) >= self.tree.nominal(cq.name, fr) for fr in frs_needing
            )
        ):
            runs = [True]
        elif forbidden and not hierarchy:
            runs = [False, True]
        else:
            runs = [True, False]
        for allow_borrowing in runs:
            targets = self._run(
                cq, sequence, frs_needing, query.requests, allow_borrowing=allow_borrowing
            )
            if targets:
                return targets
        return []

    def _nothing_to_preempt(self, wl: WorkloadState, cq: ClusterQueueInfo) -> bool:
        """A cheap look at the priority index before any candidate list is built."""
        p = wl.priority
        policy = cq.preemption
        lowest = self.admitted_by_cq.lowest_priority(cq.name)
        if policy.within_cluster_queue != "Never" and lowest is not None:
            equal_ok = policy.within_cluster_queue == "LowerOrNewerEqualPriority"
            if lowest < p or (equal_ok and lowest <= p):
                return False
        if policy.reclaim_within_cohort == "Never" or self.tree.parent(NodeRef.cq(cq.name)) is None:
            return True
        if policy.reclaim_within_cohort == "Any":
            return False
        for other in self.tree.tree_cluster_queues(cq.name):
            low = self.admitted_by_cq.lowest_priority(other)
            if other != cq.name and low is not None and low < p:
                return False
        return True

    def _candidates(
        self, query: TargetQuery
    ) -> tuple[list[_Candidate], list[_Candidate], list[_Candidate]]:
        wl, cq, frs_needing, requests = query.wl, query.cq, query.frs_needing, query.requests
        p = wl.priority
        policy = cq.preemption
        preemptor_ts = wl.queue_order_timestamp(self.eviction_ordering)
        same: list[_Candidate] = []
        if policy.within_cluster_queue != "Never":
            for a in self.admitted_by_cq.get(cq.name, ()):
                if a.wl.key == wl.key or not a.uses_any(frs_needing):
                    continue
                if self._allowed(
                    policy.within_cluster_queue, p, preemptor_ts, a.wl, self.eviction_ordering
                ):
                    same.append(_Candidate(a, WITHIN_CQ, None))
        hierarchy: list[_Candidate] = []
        priority: list[_Candidate] = []
        me = NodeRef.cq(cq.name)
        if self.tree.parent(me) is None or policy.reclaim_within_cohort == "Never":
            return same, hierarchy, priority
        advantage, remaining = self.tree.fits_in_quota(me, requests)
        previous = me
        ancestor = self.tree.parent(me)
        while ancestor is not None:
            for a in self._collect(ancestor, previous, frs_needing):
                if a.cluster_queue == cq.name or a.wl.key == wl.key:
                    continue
                if not self._allowed(
                    policy.reclaim_within_cohort, p, preemptor_ts, a.wl, self.eviction_ordering
                ):
                    continue
                klass = self._classify(cq, p, a.wl.priority, advantage=advantage)
                cand = _Candidate(a, klass, ancestor.name)
                (hierarchy if klass == HIERARCHICAL_RECLAIM else priority).append(cand)
            fits, remaining = self.tree.fits_in_quota(ancestor, remaining)
            advantage = advantage or fits
            previous = ancestor
            ancestor = self.tree.parent(ancestor)
        return same, hierarchy, priority

    def _collect(
        self, node: NodeRef, skip: NodeRef, frs_needing: set[FlavorResource]
    ) -> list[Admitted]:
        """Admitted workloads in `node`'s subtree, except `skip`'s subtree and any child
        subtree that is within nominal for the FRs needing preemption."""
        out: list[Admitted] = []
        for child in self.tree.children(node):
            if child == skip or self.tree.within_nominal(child, frs_needing):
                continue
            if child.is_cq:
                out.extend(
                    a for a in self.admitted_by_cq.get(child.name, ()) if a.uses_any(frs_needing)
                )
            else:
                out.extend(self._collect(child, skip, frs_needing))
        return out

    @staticmethod
    def _allowed(
        policy: str,
        p: int,
        preemptor_ts: Instant,
        candidate: WorkloadState,
        eviction_ordering: bool,
    ) -> bool:
        """docs/scheduling.md#preemption-policy: may a preemptor of priority p preempt this
        candidate under `policy`?"""
        c = candidate.priority
        if policy == "LowerPriority":
            return c < p
        if policy == "LowerOrNewerEqualPriority":
            newer = preemptor_ts < candidate.queue_order_timestamp(eviction_ordering)
            return c < p or (c == p and newer)
        return policy == "Any"

    @staticmethod
    def _classify(cq: ClusterQueueInfo, p: int, c: int, *, advantage: bool) -> str:
        if advantage:
            return HIERARCHICAL_RECLAIM
        policy = cq.preemption
        if policy.borrow_within_cohort == "Never" or c >= p:
            return RECLAIM_WITHOUT_BORROWING
        threshold = policy.max_priority_threshold
        if threshold is not None and c > threshold:
            return RECLAIM_WITHOUT_BORROWING
        return RECLAIM_WHILE_BORROWING

    def _sort_key(self, preemptor_cq: str, c: _Candidate) -> tuple[bool, bool, int, int, str]:
        """docs/scheduling.md#candidate-order: evicted first, other CQs first, lower priority, most
        recently admitted, uid."""
        wl = c.admitted.wl
        reserved = wl.conditions.get(QUOTA_RESERVED)
        since = reserved.last_transition if reserved is not None and reserved.is_true else self.now
        return (
            not wl.conditions.is_true(EVICTED),
            c.admitted.cluster_queue == preemptor_cq,
            wl.priority,
            -since,
            wl.uid,
        )

    def _sequence(
        self,
        preemptor_cq: str,
        hierarchy: list[_Candidate],
        priority: list[_Candidate],
        same: list[_Candidate],
    ) -> list[_Candidate]:
        lists = [
            sorted(lst, key=lambda c: self._sort_key(preemptor_cq, c))
            for lst in (hierarchy, priority, same)
        ]
        evicted = [c for lst in lists for c in lst if c.admitted.wl.conditions.is_true(EVICTED)]
        rest = [c for lst in lists for c in lst if not c.admitted.wl.conditions.is_true(EVICTED)]
        return evicted + rest

    def _run(
        self,
        cq: ClusterQueueInfo,
        sequence: list[_Candidate],
        frs_needing: set[FlavorResource],
        requests: FRAmounts,
        *,
        allow_borrowing: bool,
    ) -> list[Target]:
        chosen: list[_Candidate] = []
        removed: list[Admitted] = []
        try:
            for cand in sequence:
                a = cand.admitted
                other = a.cluster_queue != cq.name
                if other and allow_borrowing and cand.klass == RECLAIM_WITHOUT_BORROWING:
                    continue
                if other and self._protected(a.cluster_queue, cand.lca, frs_needing):
                    continue
                self.tree.withdraw_usage(a.cluster_queue, a.usage)
                removed.append(a)
                chosen.append(cand)
                if self._fits(cq.name, requests, allow_borrowing=allow_borrowing):
                    return self._fill_back(cq.name, chosen, removed, requests, allow_borrowing)
            return []
        finally:
            for a in removed:
                self.tree.add_usage(a.cluster_queue, a.usage)

    def _protected(self, cq: str, lca: str | None, frs: set[FlavorResource]) -> bool:
        """An other-CQ candidate is skipped while its CQ, or a cohort on its path strictly
        below the LCA, is within nominal quota (docs/scheduling.md#runs-removal-and-fill-back)."""
        node = NodeRef.cq(cq)
        if self.tree.within_nominal(node, frs):
            return True
        parent = self.tree.parent(node)
        while parent is not None and parent.name != lca:
            if self.tree.within_nominal(parent, frs):
                return True
            parent = self.tree.parent(parent)
        return False

    def _fits(self, cq: str, requests: FRAmounts, *, allow_borrowing: bool) -> bool:
        for fr, value in requests.items():
            if value > self.tree.available(cq, fr):
                return False
            if not allow_borrowing and self.tree.usage(cq, fr) + value > self.tree.nominal(cq, fr):
                return False
        return True

    def _fill_back(
        self,
        cq: str,
        chosen: list[_Candidate],
        removed: list[Admitted],
        requests: FRAmounts,
        allow_borrowing: bool,
    ) -> list[Target]:
        """Put back every target that is not needed, newest-but-one first
        (docs/scheduling.md#runs-removal-and-fill-back)."""
        keep = [True] * len(chosen)
        for i in range(len(chosen) - 2, -1, -1):
            a = chosen[i].admitted
            self.tree.add_usage(a.cluster_queue, a.usage)
            if self._fits(cq, requests, allow_borrowing=allow_borrowing):
                keep[i] = False
                removed.remove(a)
            else:
                self.tree.withdraw_usage(a.cluster_queue, a.usage)
        return [
            Target(c.admitted.wl.key, c.admitted.cluster_queue, _REASON_OF_CLASS[c.klass])
            for c, k in zip(chosen, keep, strict=True)
            if k
        ]
