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
MAX_ENTRIES = 20_000  # past this the cache starts over (stale keys are never hit again)

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


class NominationCache:
    def __init__(self) -> None:
        self._entries: dict[NominationKey, Nomination] = {}
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
        self._tokens: dict[str, tuple[object, ...]] = {}
        version = s._tree.structure_version
        if version != self._scopes_version:
            self._scopes = {}
            self._scopes_version = version

    def key(self, s: Scheduler, cq: ClusterQueueInfo, wl: WorkloadState) -> NominationKey | None:
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
        return (
            id(cq),
            s._flavors_epoch,
            self._token(s, cq.name),
            wl.priority,
            timestamp,
            _pod_sets_key(wl),
            resume,
        )

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

    def get(self, key: NominationKey) -> Nomination | None:
        found = self._entries.get(key)
        if found is None:
            self.misses += 1
        else:
            self.hits += 1
        return found

    def put(
        self, key: NominationKey, nomination: Nomination, cq: ClusterQueueInfo, wl: WorkloadState
    ) -> None:
        if len(self._entries) >= MAX_ENTRIES:
            self._entries.clear()
        refs: list[object] = [cq, wl.pod_sets]
        self._entries[key] = Nomination(
            nomination.assignment,
            nomination.targets,
            nomination.why,
            nomination.counts,
            nomination.last_state,
            tuple(refs),
        )

    def _token(self, s: Scheduler, cq: str) -> tuple[object, ...]:
        token = self._tokens.get(cq)
        if token is None:
            scope = self._scopes.get(cq)
            if scope is None:
                scope = tuple(s._tree.tree_cluster_queues(cq))
                self._scopes[cq] = scope
            token = tuple(
                (c, c in self._active, s._tree.generation(c), s._holders.epoch(c)) for c in scope
            )
            for c in scope:
                self._tokens[c] = token
        return token


def _pod_sets_key(wl: WorkloadState) -> tuple[object, ...]:
    """Pod sets are never changed once built (ingest interns them by content), so the
    identity of the workload's pod sets and its reclaimable pods stand for everything
    the core reads of them."""
    return (id(wl.pod_sets), tuple(wl.reclaimable.items()) if wl.reclaimable else ())
