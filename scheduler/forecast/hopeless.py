"""When the rest of an instant's cycles of a forward run can admit nothing
(docs/forecasting.md#cost).

After a quota release the core flushes every parked head back and, under
BestEffortFIFO, tries each one again, one cycle each: a run over a deep queue spends
nearly all its time failing those heads, which makes it grow with the square of the
queue's depth. Those cycles can be skipped, without changing any answer, when they
cannot admit or preempt anything: in every ClusterQueue with workloads left, some
resource has, in every flavor of its group, less quota available (borrowing from the
Cohort included) than any workload that may still be tried there asks for, and no head
not tried yet outranks the lowest-priority holder. The heads left untried stay queued
instead of parked; the next release flushes every parked head of the Cohort's tree
back anyway, and until then neither the quota nor the holders change (every release
flushes the whole tree; nothing fits, and a preemption is a release), so whatever a
later instant tries fails as it would have.

"Any workload that may still be tried" is kept as it changes: at the start, every
workload queued in the ClusterQueue; a workload leaves when it is admitted and comes
back when it is pushed or requeued there (an eviction, a backoff that ends). That is a
superset of the heads the rest of an instant can offer, so its smallest request bounds
theirs. It matters for queues of mixed sizes: once the small workloads are admitted,
what is left asks for more than the quota a release leaves over, and the instant ends
without walking the whole queue.

The flavor scan's resume record (docs/scheduling.md#flavor-scan-resumption) cannot tell
the two runs apart: a failing head scans every flavor (no record), and a record left by
an earlier attempt at the same generation stopped early only at a flavor that fit or
could preempt, which needs a fit or a victim that same quota and those same holders do
not offer. That holds for one pod set, or for one flavor per group (whose record is
always "scanned to the end"); so a queue with several flavors in a group is covered only
when each of its workloads has one pod set.

Only ClusterQueues where that decides alone are covered: no partial admission,
preemption within the queue `Never` or `LowerPriority`, in a Cohort no reclaim and no
preemption while borrowing (the victims are the queue's own holders), popping by
priority (no queue plugin); and none with fair sharing or blockAdmission.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduler.core.changes import Changes
from scheduler.core.flavor_assigner import pod_set_requests
from scheduler.core.model import ClusterQueueInfo
from scheduler.core.quota import QuotaTree
from scheduler.core.state_view import ClusterStateView
from scheduler.core.workload import WorkloadState


@dataclass(frozen=True, slots=True)
class _Bound:
    """What a covered ClusterQueue's shortcut needs besides its waiting requests."""

    flavors: tuple[tuple[str, tuple[str, ...]], ...]  # (covered resource, its group's flavors)
    preempts: bool  # LowerPriority within the queue (else Never)


@dataclass(slots=True)
class Waiting:
    """The requests of the workloads that may still be tried in one ClusterQueue: per
    covered resource, how many ask for each amount, and the smallest amount asked."""

    requests: dict[str, dict[str, int]] = field(default_factory=dict)  # key -> resource -> total
    members: set[str] = field(default_factory=set)
    counts: dict[str, dict[int, int]] = field(default_factory=dict)  # resource -> amount -> count
    _least: dict[str, int] = field(default_factory=dict)

    def add(self, key: str) -> None:
        if key in self.members:
            return
        self.members.add(key)
        for resource, amount in self.requests[key].items():
            counts = self.counts.setdefault(resource, {})
            counts[amount] = counts.get(amount, 0) + 1
            least = self._least.get(resource)
            if least is None or amount < least:
                self._least[resource] = amount

    def remove(self, key: str) -> None:
        if key not in self.members:
            return
        self.members.discard(key)
        for resource, amount in self.requests[key].items():
            counts = self.counts[resource]
            counts[amount] -= 1
            if counts[amount] == 0:
                del counts[amount]
                if self._least.get(resource) == amount:
                    if counts:
                        self._least[resource] = min(counts)
                    else:
                        del self._least[resource]

    def least(self, resource: str) -> int | None:
        """The smallest request of `resource` among the members; None when there are none."""
        return self._least.get(resource)


@dataclass(slots=True)
class Hopeless:
    bounds: dict[str, _Bound]  # ClusterQueue -> bound; absent: not covered
    waiting: dict[str, Waiting]  # covered ClusterQueue -> what may still be tried there
    where: dict[str, str] = field(default_factory=dict)  # member key -> its ClusterQueue

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
        found = Hopeless({}, {})
        for name, info in s.objects.cluster_queues.items():
            bound = _bound(info, members.get(name, []))
            if bound is not None:
                found.cover(s, info, bound, members.get(name, []))
        return found

    def cover(
        self,
        s: ClusterStateView,
        info: ClusterQueueInfo,
        bound: _Bound,
        workloads: list[WorkloadState],
    ) -> None:
        """Take `info` in: what each of its workloads asks, and who is queued there now."""
        waiting = Waiting({wl.key: requests_of(wl, info) for wl in workloads})
        queue = s.queues.queue(info.name)
        for entry in queue.listing() if queue is not None else ():
            if entry.key not in waiting.requests:
                return  # queued there, but not the queue's by its LocalQueue: not covered
            waiting.add(entry.key)
        self.bounds[info.name] = bound
        self.waiting[info.name] = waiting
        for key in waiting.members:
            self.where[key] = info.name

    def observe(self, changes: Changes) -> None:
        """Follow a cycle's changes: admitted workloads leave what may still be tried,
        workloads pushed or requeued come back."""
        for key in changes.admitted:
            cq = self.where.pop(key, None)
            if cq is not None and cq in self.waiting:
                self.waiting[cq].remove(key)
        for cq, keys in changes.queues.items():
            waiting = self.waiting.get(cq)
            if waiting is None:
                continue
            if not keys <= waiting.requests.keys():
                # A workload this run did not expect there: no bound holds any more.
                del self.waiting[cq], self.bounds[cq]
                continue
            for key in keys:
                waiting.add(key)
                self.where[key] = cq

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
            waiting = self.waiting[name]
            if not any(_short(tree, name, r, fl, waiting.least(r)) for r, fl in bound.flavors):
                return False
            if bound.preempts:
                # The queue pops by priority: its next head outranks every head not tried.
                lowest = s.holders.lowest_priority(name)
                head = queue.peek(now)
                if lowest is not None and head is not None and head.priority > lowest:
                    return False
        return True


def _short(
    tree: QuotaTree, cq: str, resource: str, flavors: tuple[str, ...], least: int | None
) -> bool:
    """Whether every flavor has less of `resource` available than `least` (a request of
    zero, or none known, bounds nothing)."""
    if least is None or least <= 0:
        return False
    return all(tree.available(cq, (flavor, resource)) < least for flavor in flavors)


def requests_of(wl: WorkloadState, info: ClusterQueueInfo) -> dict[str, int]:
    """What `wl` asks of each resource `info` covers, over its pod sets."""
    totals: dict[str, int] = {}
    for _, _, amounts in pod_set_requests(wl, info):
        for resource, amount in amounts.items():
            totals[resource] = totals.get(resource, 0) + amount
    return {r: totals.get(r, 0) for g in info.groups for r in g.covered}


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
    for wl in workloads:
        if any(ps.min_count is not None for ps in wl.pod_sets):
            return None
        if not one_flavor and len(wl.pod_sets) != 1:
            return None  # pod sets may take different flavors (see the module's docstring)
    return _Bound(
        tuple((r, g.flavors) for g in info.groups for r in g.covered),
        policy.within_cluster_queue == "LowerPriority",
    )
