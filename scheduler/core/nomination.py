"""Nomination results kept across heads and cycles (docs/scheduling.md#cycle-snapshot,
#flavor-assignment, #classic-preemption).

A nomination (flavor assignment, then the preemption target search when it says
Preempt) is a pure function of the ClusterQueue's spec, the flavors, the quota and the
quota holders of the ClusterQueue's whole tree, and a few fields of the head. Under
load the same question is asked again and again: the heads of one ClusterQueue are
mostly workloads of a few shapes, and a tree that admitted nothing since the last
cycle answers every head as before. So results are kept under a key made of exactly
those inputs:

* the `ClusterQueueInfo` object (replaced, never mutated, on a spec change) and the
  flavors epoch of the scheduler;
* per ClusterQueue of the tree: whether it is active, its allocatable generation (the
  tree's structure and quotas, and every release of usage) and its holder epoch (every
  workload that starts or stops holding quota there, or is evicted while holding it);
* of the head: priority, its queue-order timestamp where a policy compares it, per pod
  set its identity (pod sets are never changed once built, and ingest interns them by
  content, so the pod sets of equal specs are one object) and its current count, and
  its flavor-scan resume state (docs/scheduling.md#flavor-scan-resumption) while that is valid.

The first two kinds of input are the same for every head of one tree in one cycle: they
form the tree's token, and the cache keeps, per tree, only the nominations made under
its current token. A new token (an admission, a release, a spec change) drops the
tree's older nominations, which no key could ask for again; kept, they would be
thousands of long-lived objects that every full pass of the garbage collector walks
(docs/benchmarks.md, "The nominations a tree no longer asks for").

A head that itself holds quota (it would be excluded from its own candidates) is never
cached. Fair sharing is never cached: its target search reads shares of the whole
forest. With :data:`VERIFY` set, every hit is recomputed and compared (the tests run the
conformance scenarios that way).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scheduler.core.blockers import PendingWhy
from scheduler.core.flavor_assigner import Assignment, pod_set_requests
from scheduler.core.model import ClusterQueueInfo
from scheduler.core.preemption import Target
from scheduler.core.workload import LastAssignment, WorkloadState

if TYPE_CHECKING:
    from scheduler.core.scheduler import Scheduler

ENABLED = True  # off: every nomination is computed (tests compare both ways)
VERIFY = False  # recompute every hit and fail if it differs (tests only)
MAX_ENTRIES = 20_000  # per tree and token; past this the tree's nominations start over

_NEWER_EQUAL = "LowerOrNewerEqualPriority"

NominationKey = tuple[object, ...]


@dataclass(frozen=True, slots=True)
class Nomination:
    """What a nomination decides for an entry (the parts of `Entry` it sets)."""

    assignment: Assignment
    targets: tuple[Target, ...]
    why: PendingWhy  # why the head stays pending if it is not admitted
    counts: dict[int, int] | None
    last_state: LastAssignment
    # Objects whose id() is part of the key, kept alive so no id is ever reused.
    refs: tuple[object, ...] = field(default=(), compare=False)


@dataclass(slots=True)
class _TreeNominations:
    """The nominations of one tree under one token (the per-tree inputs of the key)."""

    token: tuple[object, ...]
    entries: dict[NominationKey, Nomination] = field(default_factory=dict)


class NominationCache:
    def __init__(self) -> None:
        # Per tree, named by its first ClusterQueue (trees partition the ClusterQueues).
        self._trees: dict[str, _TreeNominations] = {}
        self._scopes: dict[str, tuple[str, ...]] = {}
        self._scopes_version = -1
        self._requests: dict[
            tuple[object, ...], tuple[list[tuple[str, dict[str, int]]], tuple[object, ...]]
        ] = {}
        self.hits = 0
        self.misses = 0

    def begin_cycle(self, s: Scheduler, active: frozenset[str]) -> None:
        """Called once per cycle, before any nomination, with the active CQs."""
        self._active = active
        self._cycle_trees: dict[str, _TreeNominations] = {}  # per CQ, its tree's this cycle
        version = s._tree.structure_version
        if version != self._scopes_version:
            self._scopes = {}
            self._scopes_version = version
            self._trees = {}

    def key(self, s: Scheduler, cq: ClusterQueueInfo, wl: WorkloadState) -> NominationKey | None:
        """The head's part of the key (the tree's part is its token), or None: not cached."""
        if not ENABLED or s.config.fair_sharing or s._holders.cluster_queue_of(wl.key) is not None:
            return None
        policy = cq.preemption
        timestamp = (
            wl.queue_order_timestamp(s.config.eviction_ordering)
            if _NEWER_EQUAL in (policy.within_cluster_queue, policy.reclaim_within_cohort)
            else None
        )
        last = wl.last_assignment
        resume = (
            tuple(last.tried_flavor_idx.items())
            if last is not None and last.generation == s._tree.generation(cq.name)
            else None
        )
        return (id(cq), wl.priority, timestamp, _pod_sets_key(wl), resume)

    def resource_requests(
        self, cq: ClusterQueueInfo, wl: WorkloadState
    ) -> list[tuple[str, dict[str, int]]]:
        """The per-pod-set totals a pending workload's status shows (shared, read-only:
        heads of one shape are requeued over and over)."""
        computed = None
        key = (id(cq), _pod_sets_key(wl))
        found = self._requests.get(key) if ENABLED else None
        if found is None or VERIFY:
            computed = [
                (ps.name, dict(sorted(totals.items())))
                for ps, _count, totals in pod_set_requests(wl, cq)
            ]
            if found is not None and found[0] != computed:
                raise AssertionError(f"cached requests of {wl.key} differ: {found[0]}")
        if found is None:
            assert computed is not None
            if len(self._requests) >= MAX_ENTRIES:
                self._requests.clear()
            found = (computed, (cq, wl.pod_sets))
            if ENABLED:
                self._requests[key] = found
        return found[0]

    def get(self, s: Scheduler, cq: ClusterQueueInfo, key: NominationKey) -> Nomination | None:
        found = self._tree_of(s, cq.name).entries.get(key)
        if found is None:
            self.misses += 1
        else:
            self.hits += 1
        return found

    def put(
        self,
        s: Scheduler,
        key: NominationKey,
        nomination: Nomination,
        cq: ClusterQueueInfo,
        wl: WorkloadState,
    ) -> None:
        entries = self._tree_of(s, cq.name).entries
        if len(entries) >= MAX_ENTRIES:
            entries.clear()
        refs: list[object] = [cq, wl.pod_sets]
        entries[key] = Nomination(
            nomination.assignment,
            nomination.targets,
            nomination.why,
            nomination.counts,
            nomination.last_state,
            tuple(refs),
        )

    def size(self) -> int:
        """How many nominations are kept, over every tree."""
        return sum(len(tree.entries) for tree in self._trees.values())

    def _tree_of(self, s: Scheduler, cq: str) -> _TreeNominations:
        """The nominations of `cq`'s tree under its token this cycle (a new token: none)."""
        tree = self._cycle_trees.get(cq)
        if tree is None:
            scope = self._scopes.get(cq)
            if scope is None:
                scope = tuple(s._tree.tree_cluster_queues(cq))
                self._scopes[cq] = scope
            token = (
                s._flavors_epoch,
                tuple(
                    (c, c in self._active, s._tree.generation(c), s._holders.epoch(c))
                    for c in scope
                ),
            )
            name = scope[0] if scope else cq
            tree = self._trees.get(name)
            if tree is None or tree.token != token:
                tree = self._trees[name] = _TreeNominations(token)
            for c in scope:
                self._cycle_trees[c] = tree
            self._cycle_trees[cq] = tree
        return tree


def _pod_sets_key(wl: WorkloadState) -> tuple[object, ...]:
    """Pod sets are never changed once built (ingest interns them by content), so the
    identity of the workload's pod sets and its reclaimable pods stand for everything
    the core reads of them."""
    return (id(wl.pod_sets), tuple(wl.reclaimable.items()) if wl.reclaimable else ())
