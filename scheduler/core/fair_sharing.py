"""Fair sharing (docs/scheduling.md#fair-sharing): Dominant Resource Share, the admission tournament
and fair-sharing preemption.

Everything here runs on the cycle's snapshot (a :class:`QuotaTree`). Usage is only
ever changed temporarily and put back before control returns, by exact inverse
operations, so the tree (usages *and* allocatable generations) is unchanged after
every public call. Temporary removals go through ``add_usage`` with negated amounts,
which propagates exactly like ``remove_usage`` (docs/scheduling.md#changing-usage) but does not bump
the CQ's generation: a simulation is not a workload leaving the CQ.

Floating point appears only in DRS values, with the operation order of
docs/scheduling.md#dominant-resource-share, so every result equals IEEE-754 double arithmetic. Every
iteration over CQs and cohorts is by name (D3); remaining ties fall back to UID then
``namespace/name`` (D2) or to the smaller cohort name (D10).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cmp_to_key
from typing import Generic, Protocol, TypeVar

from scheduler.core.clock import Instant
from scheduler.core.model import ClusterQueueInfo
from scheduler.core.preemption import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_FAIR_SHARING,
    Admitted,
    Target,
    TargetQuery,
    TargetSearch,
)
from scheduler.core.quota import NodeRef, QuotaTree
from scheduler.core.resources import FlavorResource
from scheduler.core.workload import EVICTED, QUOTA_RESERVED, WorkloadState

MAX_WEIGHTED_SHARE = 9223372036854775807
"""``fairSharing.weightedShare`` of a node with weight 0 that borrows (max int64)."""

LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"
DEFAULT_STRATEGIES: tuple[str, ...] = (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)
_VALID_STRATEGIES: frozenset[tuple[str, ...]] = frozenset(
    {
        (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,),
        (LESS_THAN_INITIAL_SHARE,),
        DEFAULT_STRATEGIES,
    }
)


# --------------------------------------------------- docs/scheduling.md#dominant-resource-share DRS


@dataclass(frozen=True, slots=True)
class Share:
    """A node's Dominant Resource Share (docs/scheduling.md#dominant-resource-share).

    ``ratio`` is the unweighted share (borrowed * 1000 / lendable of the dominant
    resource), ``resource`` that resource (``None`` when the node does not borrow
    anything that could be lent to it), ``weight`` the node's fair-sharing weight.
    """

    ratio: float
    resource: str | None
    weight: float

    @property
    def is_zero(self) -> bool:
        return self.ratio == 0.0

    @property
    def is_infinite(self) -> bool:
        """Weight 0 and a positive share: worse than any other share."""
        return self.weight == 0.0 and self.ratio > 0.0

    @property
    def weighted(self) -> float:
        """``ratio / weight`` (``inf`` for weight 0 with a positive share, 0 for no share)."""
        if self.ratio == 0.0:
            return 0.0
        if self.weight == 0.0:
            return math.inf
        return self.ratio / self.weight


def _cmp_float(a: float, b: float) -> int:
    return (a > b) - (a < b)


def compare(a: Share, b: Share) -> int:
    """-1, 0 or 1 as share ``a`` is better (lower), equal to or worse than ``b``
    (docs/scheduling.md#dominant-resource-share).

    A weight-0 node with a positive share is worse than any other; two such nodes
    compare by their unweighted ratios; all others compare ``ratio / weight``.
    """
    if a.is_infinite and b.is_infinite:
        return _cmp_float(a.ratio, b.ratio)
    if a.is_infinite:
        return 1
    if b.is_infinite:
        return -1
    # A huge finite ratio / weight may round to inf; it still beats weight 0 above.
    return _cmp_float(a.weighted, b.weighted)


def weighted_share(share: Share) -> int:
    """``status.fairSharing.weightedShare`` (docs/scheduling.md#dominant-resource-share,
    # queue-and-cohort-status): 0 without a share, max int64 for weight 0, else ``ceil(ratio /
    # weight)`` (clamped to max int64)."""
    if share.ratio == 0.0:
        return 0
    if share.weight == 0.0:
        return MAX_WEIGHTED_SHARE
    value = share.ratio / share.weight
    if value >= MAX_WEIGHTED_SHARE:  # beyond int64 (absurd weights); upstream overflows
        return MAX_WEIGHTED_SHARE
    return math.ceil(value)


def lendable(tree: QuotaTree, cohort: NodeRef) -> dict[str, int]:
    """Per resource: Σ over the FRs of that resource present in the root's SQ of
    ``pot(cohort, fr)`` (docs/scheduling.md#dominant-resource-share, with ``cohort`` the parent of
    the node being measured)."""
    root = tree.root(cohort)
    out: dict[str, int] = {}
    for fr in sorted(tree.subtree_quotas(root)):
        out[fr[1]] = out.get(fr[1], 0) + tree.potential(cohort, fr)
    return out


def dominant_resource_share(
    tree: QuotaTree, node: NodeRef, extra: Mapping[FlavorResource, int] | None = None
) -> Share:
    """DRS of ``node`` (docs/scheduling.md#dominant-resource-share), optionally with the extra
    request ``extra`` added to the node's *own* usage, literally ``U(n, fr) + R[fr]``.

    For a CQ that is exactly "the CQ with this workload". For a cohort, ``extra`` must
    be the amount that would reach the cohort; to measure a CQ's ancestors with a
    workload added to the CQ use :func:`shares_with_usage`.
    """
    weight = tree.weight(node)
    parent = tree.parent(node)
    if parent is None:
        return Share(0.0, None, weight)
    borrowed: dict[str, int] = {}
    for fr, quota in tree.subtree_quotas(node).items():
        amount = tree.node_usage(node, fr) + (extra.get(fr, 0) if extra else 0) - quota
        if amount > 0:
            borrowed[fr[1]] = borrowed.get(fr[1], 0) + amount
    if not borrowed:
        return Share(0.0, None, weight)
    lend = lendable(tree, parent)
    best = 0.0
    best_resource: str | None = None
    for resource in sorted(borrowed):  # ascending: a tie keeps the smaller name
        lr = lend.get(resource, 0)
        if lr <= 0:
            continue
        ratio = float(borrowed[resource]) * 1000.0 / float(lr)
        if best_resource is None or ratio > best:
            best, best_resource = ratio, resource
    if best_resource is None:
        return Share(0.0, None, weight)
    return Share(best, best_resource, weight)


def _add(tree: QuotaTree, cq: str, amounts: Mapping[FlavorResource, int]) -> None:
    tree.add_usage(cq, amounts)


def _sub(tree: QuotaTree, cq: str, amounts: Mapping[FlavorResource, int]) -> None:
    # add_usage with negative amounts is the docs/scheduling.md#changing-usage removal without a
    # generation bump.
    tree.add_usage(cq, {fr: -v for fr, v in amounts.items()})


def shares_with_usage(
    tree: QuotaTree, cq: str, amounts: Mapping[FlavorResource, int]
) -> list[tuple[NodeRef, Share]]:
    """DRS of ``cq`` and of each of its ancestors (bottom-up, root included) with
    ``amounts`` temporarily added to the CQ as the tree propagates it
    (docs/scheduling.md#changing-usage)."""
    _add(tree, cq, amounts)
    try:
        return [(n, dominant_resource_share(tree, n)) for n in tree.path_to_root(NodeRef.cq(cq))]
    finally:
        _sub(tree, cq, amounts)


# -------------------------------------------- docs/scheduling.md#fair-sharing-tournament tournament


class FairEntry(Protocol):
    """What the tournament needs to know about a nominated entry."""

    @property
    def cq_name(self) -> str: ...

    @property
    def priority(self) -> int: ...

    @property
    def timestamp(self) -> int:
        """Queue-order timestamp (docs/scheduling.md#queue-order-timestamp)."""
        ...

    @property
    def uid(self) -> str: ...

    @property
    def key(self) -> str:
        """``namespace/name``."""
        ...

    @property
    def usage(self) -> Mapping[FlavorResource, int]:
        """The assignment's usage per FR."""
        ...


E = TypeVar("E", bound=FairEntry)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class FairItem(Generic[T]):
    """A ready-made :class:`FairEntry` carrying an arbitrary payload (e.g. a cycle entry)."""

    cq_name: str
    priority: int
    timestamp: int
    uid: str
    key: str
    usage: Mapping[FlavorResource, int]
    payload: T


class FairSharingOrder(Generic[E]):
    """docs/scheduling.md#fair-sharing-tournament: yields the cycle's entries one at a time,
    recomputing every DRS at each yield on the (possibly mutated) tree, so usage admitted between
    yields counts.

    At most one entry per CQ (one head per CQ per cycle, docs/scheduling.md#heads).
    """

    __slots__ = ("_by_cq", "_tree")

    def __init__(self, entries: Iterable[E], tree: QuotaTree) -> None:
        self._tree = tree
        self._by_cq: dict[str, E] = {}
        for e in entries:
            if e.cq_name in self._by_cq:
                raise ValueError(f"two entries for ClusterQueue {e.cq_name!r}")
            self._by_cq[e.cq_name] = e

    def __len__(self) -> int:
        return len(self._by_cq)

    def __iter__(self) -> Iterator[E]:
        """Pop lazily: the caller may change the tree between items."""
        while (e := self.pop_next()) is not None:
            yield e

    def pop_next(self) -> E | None:
        if not self._by_cq:
            return None
        tree = self._tree
        first = min(self._by_cq)  # step 1 (D3)
        if (
            not tree.has_cluster_queue(first)
            or tree.cohort_of(first) is None
            or tree.in_cycle(first)
        ):
            return self._by_cq.pop(first)  # step 2
        root = tree.root(NodeRef.cq(first))
        shares = self._shares(first)
        winner = self._tournament(root.name, shares)
        assert winner is not None  # `first` itself is in this tree
        del self._by_cq[winner.cq_name]
        return winner

    def _shares(self, member: str) -> dict[tuple[str, str], Share]:
        """Step 3 over the root tree of CQ ``member``: each entry's DRS with its usage
        added, keyed by (the cohort it competes in, the entry's CQ), for the CQ and
        each ancestor below the root."""
        tree = self._tree
        out: dict[tuple[str, str], Share] = {}
        for cq in tree.tree_cluster_queues(member):
            e = self._by_cq.get(cq)
            if e is None:
                continue
            for node, share in shares_with_usage(tree, cq, e.usage):
                parent = tree.parent(node)
                if parent is not None:
                    out[(parent.name, cq)] = share
        return out

    def _tournament(self, cohort: str, shares: Mapping[tuple[str, str], Share]) -> E | None:
        """Step 4: the winner of ``cohort``'s subtree, or None if it has no entry."""
        tree = self._tree
        candidates: list[E] = []
        for child in tree.child_cohorts(cohort):
            w = self._tournament(child, shares)
            if w is not None:
                candidates.append(w)
        candidates.extend(
            self._by_cq[cq] for cq in tree.child_cluster_queues(cohort) if cq in self._by_cq
        )
        if not candidates:
            return None

        def order(a: E, b: E) -> int:
            c = compare(shares[(cohort, a.cq_name)], shares[(cohort, b.cq_name)])
            if c:
                return c
            if a.priority != b.priority:
                return -1 if a.priority > b.priority else 1
            if a.timestamp != b.timestamp:
                return -1 if a.timestamp < b.timestamp else 1
            return _cmp_str((a.uid, a.key), (b.uid, b.key))

        return min(candidates, key=cmp_to_key(order))


def _cmp_str(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    return (a > b) - (a < b)


# -------------------------------------------- docs/scheduling.md#fair-sharing-preemption preemption


def _policy_allows(
    policy: str, p: int, preemptor_ts: Instant, candidate: WorkloadState, eviction_ordering: bool
) -> bool:
    """docs/scheduling.md#preemption-policy: may a preemptor of priority ``p`` preempt ``candidate``
    under ``policy``?"""
    c = candidate.priority
    if policy == "LowerPriority":
        return c < p
    if policy == "LowerOrNewerEqualPriority":
        return c < p or (
            c == p and preemptor_ts < candidate.queue_order_timestamp(eviction_ordering)
        )
    return policy == "Any"


def _candidate_key(
    a: Admitted, preemptor_cq: str, now: Instant
) -> tuple[bool, bool, int, int, str, str, str]:
    """docs/scheduling.md#candidate-order keys (1)-(5): evicted first, other CQs first, lower
    priority, most recent ``QuotaReserved=True`` transition (missing: now), UID; then CQ and key,
    which only matter if two candidates share a UID."""
    wl = a.wl
    reserved = wl.conditions.get(QUOTA_RESERVED)
    since = reserved.last_transition if reserved is not None and reserved.is_true else now
    return (
        not wl.conditions.is_true(EVICTED),
        a.cluster_queue == preemptor_cq,
        wl.priority,
        -since,
        wl.uid,
        a.cluster_queue,
        wl.key,
    )


class _TargetOrdering:
    """docs/scheduling.md#fair-sharing-preemption step 3: which CQ to take candidates from next.

    ``next_target`` re-evaluates every DRS on the current tree, so removals made by
    the caller between calls count. Candidates keep the order they were given in.
    """

    def __init__(
        self,
        tree: QuotaTree,
        preemptor_cq: str,
        candidates: Iterable[Admitted],
        sort_key: _SortKey,
    ) -> None:
        self.tree = tree
        self.preemptor_cq = preemptor_cq
        self.sort_key = sort_key
        self.by_cq: dict[str, deque[Admitted]] = {}
        for a in candidates:
            self.by_cq.setdefault(a.cluster_queue, deque()).append(a)
        me = NodeRef.cq(preemptor_cq)
        self.has_cohort = tree.parent(me) is not None and not tree.in_cycle(preemptor_cq)
        self.ancestors = {n.name for n in tree.path_to_root(me)[1:]}
        self.root = tree.root(me).name if self.has_cohort else None
        self.pruned_cqs: set[str] = set()
        self.pruned_cohorts: set[str] = set()

    def has(self, cq: str) -> bool:
        return bool(self.by_cq.get(cq))

    def pop(self, cq: str) -> Admitted:
        return self.by_cq[cq].popleft()

    def drop(self, cq: str) -> None:
        self.pruned_cqs.add(cq)

    def next_target(self) -> str | None:
        if self.root is None:
            # Without a cohort only the preemptor's CQ is ever yielded.
            if self.preemptor_cq in self.pruned_cqs or not self.has(self.preemptor_cq):
                return None
            return self.preemptor_cq
        while self.root not in self.pruned_cohorts:
            cq = self._next(self.root)
            if cq is not None:
                return cq
        return None

    def _next(self, cohort: str) -> str | None:
        tree = self.tree
        best_cq: str | None = None
        best_cq_share: Share | None = None
        for name in tree.child_cluster_queues(cohort):
            if name in self.pruned_cqs:
                continue
            share = dominant_resource_share(tree, NodeRef.cq(name))
            if not self.has(name) or (share.is_zero and name != self.preemptor_cq):
                self.pruned_cqs.add(name)
                continue
            if best_cq is None or best_cq_share is None:
                best_cq, best_cq_share = name, share
                continue
            c = compare(share, best_cq_share)
            if c > 0 or (
                c == 0
                and self.sort_key(self.by_cq[name][0]) < self.sort_key(self.by_cq[best_cq][0])
            ):
                best_cq, best_cq_share = name, share

        best_co: str | None = None
        best_co_share: Share | None = None
        for name in tree.child_cohorts(cohort):
            if name in self.pruned_cohorts:
                continue
            share = dominant_resource_share(tree, NodeRef.cohort(name))
            if share.is_zero and name not in self.ancestors:
                self.pruned_cohorts.add(name)
                continue
            # Strictly greater: among equal shares the smallest name stays (D10).
            if best_co_share is None or compare(share, best_co_share) > 0:
                best_co, best_co_share = name, share

        if best_co is None and best_cq is None:
            self.pruned_cohorts.add(cohort)
            return None
        # A cohort wins a tie against a CQ.
        if (
            best_co is not None
            and best_co_share is not None
            and (best_cq_share is None or compare(best_co_share, best_cq_share) >= 0)
        ):
            return self._next(best_co)
        return best_cq


class _SortKey(Protocol):
    def __call__(self, a: Admitted, /) -> tuple[bool, bool, int, int, str, str, str]: ...


class FairPreemptor(TargetSearch[Mapping[str, Sequence[Admitted]]]):
    """The docs/scheduling.md#fair-sharing-preemption target search for one preemptor on one
    snapshot, with the configured ``strategies`` (empty: the default pair of
    docs/scheduling.md#configuration).
    """

    def __init__(
        self,
        tree: QuotaTree,
        admitted_by_cq: Mapping[str, Sequence[Admitted]],
        now: Instant,
        eviction_ordering: bool,
        strategies: Sequence[str] = DEFAULT_STRATEGIES,
    ) -> None:
        chosen = tuple(strategies) or DEFAULT_STRATEGIES
        if chosen not in _VALID_STRATEGIES:
            raise ValueError(f"invalid fair-sharing preemption strategies {list(chosen)!r}")
        super().__init__(tree, admitted_by_cq, now, eviction_ordering)
        self.strategies = chosen

    # --------------------------------------------------------------- search
    def find_targets(self, query: TargetQuery) -> list[Target]:
        candidates = self._candidates(query.wl, query.cq, query.frs_needing)
        if not candidates:
            return []
        name = query.cq.name

        def sort_key(a: Admitted) -> tuple[bool, bool, int, int, str, str, str]:
            return _candidate_key(a, name, self.now)

        candidates.sort(key=sort_key)
        search = _Search(self.tree, name, query.requests, sort_key)
        return search.run(candidates, self.strategies)

    def _candidates(
        self, wl: WorkloadState, cq: ClusterQueueInfo, frs_needing: set[FlavorResource]
    ) -> list[Admitted]:
        """Step 1 (unsorted)."""
        policy = cq.preemption
        p = wl.priority
        ts = wl.queue_order_timestamp(self.eviction_ordering)
        out: list[Admitted] = []
        if policy.within_cluster_queue != "Never":
            out.extend(
                a
                for a in self.admitted_by_cq.get(cq.name, ())
                if a.wl.key != wl.key
                and a.uses_any(frs_needing)
                and _policy_allows(policy.within_cluster_queue, p, ts, a.wl, self.eviction_ordering)
            )
        tree = self.tree
        if (
            policy.reclaim_within_cohort == "Never"
            or tree.cohort_of(cq.name) is None
            or tree.in_cycle(cq.name)
        ):
            return out
        for other in tree.tree_cluster_queues(cq.name):
            if other == cq.name:
                continue
            node = NodeRef.cq(other)
            if not any(tree.borrows(node, fr, 0) for fr in sorted(frs_needing)):
                continue
            out.extend(
                a
                for a in self.admitted_by_cq.get(other, ())
                if a.wl.key != wl.key
                and a.uses_any(frs_needing)
                and _policy_allows(
                    policy.reclaim_within_cohort, p, ts, a.wl, self.eviction_ordering
                )
            )
        return out


class _Search:
    """One docs/scheduling.md#fair-sharing-preemption search (steps 2-7). Every usage change is
    recorded so that ``run`` leaves the tree exactly as it found it, whatever happens."""

    def __init__(
        self, tree: QuotaTree, cq: str, requests: Mapping[FlavorResource, int], sort_key: _SortKey
    ) -> None:
        self.tree = tree
        self.cq = cq
        self.requests = requests
        self.sort_key = sort_key
        self.targets: list[Target] = []
        self.removed: list[Admitted] = []  # parallel to targets
        self.put_back: set[int] = set()  # indices of `removed` re-added by fill-back
        self.simulated = False
        me = NodeRef.cq(cq)
        self.path = tree.path_to_root(me) if tree.cohort_of(cq) is not None else [me]

    def run(self, candidates: list[Admitted], strategies: tuple[str, ...]) -> list[Target]:
        try:
            _add(self.tree, self.cq, self.requests)  # step 2
            self.simulated = True
            fits, retry = self._first(candidates, strategies[0])
            if not fits and len(strategies) > 1:
                fits = self._second(retry)
            _sub(self.tree, self.cq, self.requests)
            self.simulated = False
            if not fits:
                return []
            return self._fill_back()
        finally:
            if self.simulated:
                _sub(self.tree, self.cq, self.requests)
                self.simulated = False
            for i in range(len(self.removed) - 1, -1, -1):
                if i not in self.put_back:
                    a = self.removed[i]
                    _add(self.tree, a.cluster_queue, a.usage)
            self.removed = []
            self.put_back = set()

    # ----------------------------------------------------------- strategies
    def _first(self, candidates: list[Admitted], strategy: str) -> tuple[bool, list[Admitted]]:
        """Step 4: returns (fits, retry list)."""
        ordering = _TargetOrdering(self.tree, self.cq, candidates, self.sort_key)
        retry: list[Admitted] = []
        while (target_cq := ordering.next_target()) is not None:
            if target_cq == self.cq:
                self._take(ordering.pop(target_cq), IN_CLUSTER_QUEUE)
                if self._fits_simulated():
                    return True, retry
                continue
            preemptor_new, target_old, target_node = self._shares(target_cq)
            while ordering.has(target_cq):
                a = ordering.pop(target_cq)
                if strategy == LESS_THAN_INITIAL_SHARE:
                    holds = compare(preemptor_new, target_old) < 0
                else:
                    target_new = self._share_without(target_node, a)
                    holds = compare(preemptor_new, target_new) <= 0
                if holds:
                    self._take(a, IN_COHORT_FAIR_SHARING)
                    if self._fits_simulated():
                        return True, retry
                    break  # shares changed: choose the target CQ again
                retry.append(a)
        return False, retry

    def _second(self, retry: list[Admitted]) -> bool:
        """Step 6: ``LessThanInitialShare`` over the retry list, one try per CQ."""
        ordering = _TargetOrdering(self.tree, self.cq, retry, self.sort_key)
        while (target_cq := ordering.next_target()) is not None:
            preemptor_new, target_old, _ = self._shares(target_cq)
            if compare(preemptor_new, target_old) < 0:
                self._take(ordering.pop(target_cq), IN_COHORT_FAIR_SHARING)
                if self._fits_simulated():
                    return True
            ordering.drop(target_cq)
        return False

    # ----------------------------------------------------------- shares
    def _shares(self, target_cq: str) -> tuple[Share, Share, NodeRef]:
        """(preemptorNew, targetOld, target's almost-LCA) for a target CQ of the tree."""
        tree = self.tree
        target_path = tree.path_to_root(NodeRef.cq(target_cq))
        on_target = set(target_path)
        lca_index = next(i for i, n in enumerate(self.path) if n in on_target)
        lca = self.path[lca_index]
        preemptor_almost = self.path[lca_index - 1]
        target_almost = target_path[target_path.index(lca) - 1]
        return (
            dominant_resource_share(tree, preemptor_almost),
            dominant_resource_share(tree, target_almost),
            target_almost,
        )

    def _share_without(self, target_node: NodeRef, a: Admitted) -> Share:
        """targetNew: the target almost-LCA's DRS with ``a``'s usage removed."""
        _sub(self.tree, a.cluster_queue, a.usage)
        try:
            return dominant_resource_share(self.tree, target_node)
        finally:
            _add(self.tree, a.cluster_queue, a.usage)

    # ----------------------------------------------------------- fit
    def _take(self, a: Admitted, reason: str) -> None:
        _sub(self.tree, a.cluster_queue, a.usage)
        self.removed.append(a)
        self.targets.append(Target(a.wl.key, a.cluster_queue, reason))

    def _fits(self) -> bool:
        """docs/scheduling.md#runs-removal-and-fill-back fit with borrowing allowed: every request
        <= Available(CQ)."""
        return all(v <= self.tree.available(self.cq, fr) for fr, v in self.requests.items())

    def _fits_simulated(self) -> bool:
        """Step 7: the fit test with the preemptor's simulated usage taken out."""
        _sub(self.tree, self.cq, self.requests)
        try:
            return self._fits()
        finally:
            _add(self.tree, self.cq, self.requests)

    def _fill_back(self) -> list[Target]:
        """docs/scheduling.md#runs-removal-and-fill-back fill-back (borrowing allowed): from the
        second-to-last target back to the first, put the target back and keep it out of the list if
        the preemptor still fits. The targets keep their relative order."""
        for i in range(len(self.targets) - 2, -1, -1):
            a = self.removed[i]
            _add(self.tree, a.cluster_queue, a.usage)
            self.put_back.add(i)
            if not self._fits():
                _sub(self.tree, a.cluster_queue, a.usage)
                self.put_back.discard(i)
        return [t for i, t in enumerate(self.targets) if i not in self.put_back]
