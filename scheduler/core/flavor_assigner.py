"""Flavor assignment (docs/scheduling.md#flavor-assignment): which flavor each pod set's resources
use.

The assigner is a pure function of the ClusterQueue, the quota snapshot, the
workload and a preemption oracle. It never mutates the snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from enum import IntEnum
from functools import lru_cache

from scheduler.api.quantity import format_resource
from scheduler.core.blockers import Blocker, BlockerKind, PendingWhy, PodSetBlockers
from scheduler.core.model import ClusterQueueInfo, FlavorInfo, ResourceGroupInfo
from scheduler.core.quota import QuotaTree
from scheduler.core.resources import FlavorResource, FRAmounts
from scheduler.core.selectors import (
    SelectorError,
    first_untolerated_taint,
    flavor_matches_pod,
    format_taint,
)
from scheduler.core.workload import LastAssignment, PodSetSpec, WorkloadState


class Mode(IntEnum):
    """Internal preemption modes, worst to best (docs/scheduling.md#assignment-modes)."""

    NO_FIT = 0
    NO_CANDIDATES = 1
    PREEMPT = 2
    RECLAIM = 3
    FIT = 4

    @property
    def public(self) -> str:
        if self is Mode.NO_FIT:
            return NO_FIT
        if self is Mode.FIT:
            return FIT
        return PREEMPT


# Reasons quote the same few amounts over and over (exact Fraction arithmetic each
# time); the string depends on nothing else.
_quantity = lru_cache(maxsize=4096)(format_resource)

# Public modes.
NO_FIT = "NoFit"
PREEMPT = "Preempt"
FIT = "Fit"
_PUBLIC_RANK = {NO_FIT: 0, PREEMPT: 1, FIT: 2}


@dataclass(frozen=True, slots=True)
class GranularMode:
    mode: Mode
    level: int

    def preferred_over(
        self, other: GranularMode | None, *, preemption_over_borrowing: bool = False
    ) -> bool:
        """docs/scheduling.md#preference-between-modes: preemption mode first, then the lower
        borrowing level; with the ClusterQueue's `flavorFungibility.preference:
        PreemptionOverBorrowing`, the borrowing level first (a mode without preemption candidates
        still ranks below every mode that can admit)."""
        if self.mode is Mode.NO_FIT:
            return False
        if other is None or other.mode is Mode.NO_FIT:
            return True
        if preemption_over_borrowing:
            return self._preferred_borrowing_first(other)
        if self.mode != other.mode:
            return self.mode > other.mode
        return self.level < other.level

    def _preferred_borrowing_first(self, other: GranularMode) -> bool:
        """`preferred_over` under `PreemptionOverBorrowing`, both modes able to fit."""
        if (self.mode is Mode.NO_CANDIDATES) != (other.mode is Mode.NO_CANDIDATES):
            return other.mode is Mode.NO_CANDIDATES
        if self.level != other.level:
            return self.level < other.level
        return self.mode > other.mode


def _worse(
    a: GranularMode, b: GranularMode, *, preemption_over_borrowing: bool = False
) -> GranularMode:
    """The worse of two modes under docs/scheduling.md#preference-between-modes's relation."""
    better = a.preferred_over(b, preemption_over_borrowing=preemption_over_borrowing)
    return b if better else a


@dataclass(slots=True)
class _Scan:
    """What one `assign` carries across its pod sets."""

    last: LastAssignment | None  # where the previous attempt stopped, if still valid
    assumed: FRAmounts = field(default_factory=dict)  # taken by earlier pod sets
    tried: dict[tuple[int, str], int] = field(default_factory=dict)  # (pod set, resource) -> idx


PreemptionOracle = Callable[[FlavorResource, int], GranularMode]
"""docs/scheduling.md#preemption-oracle: given one FR and the value that does not fit, what
preemption could do."""


@dataclass(slots=True)
class FlavorChoice:
    flavor: str
    mode: GranularMode


@dataclass(slots=True)
class PodSetAssignmentResult:
    name: str
    count: int
    requests: dict[str, int]  # totals for `count` pods, with `pods` when covered
    flavors: dict[str, FlavorChoice] = field(default_factory=dict)
    reasons: list[Blocker] = field(default_factory=list)
    error: str | None = None

    @property
    def public_mode(self) -> str:
        if self.error is not None:
            return NO_FIT
        if not self.reasons:
            return FIT
        if not self.flavors and self.requests:
            return NO_FIT
        worst = FIT
        for choice in self.flavors.values():
            m = choice.mode.mode.public
            if _PUBLIC_RANK[m] < _PUBLIC_RANK[worst]:
                worst = m
        return worst

    def blockers(self) -> PodSetBlockers:
        """Why this pod set got no flavors, reasons in the order of their text."""
        if self.error is not None:
            return PodSetBlockers(self.name, (Blocker(BlockerKind.OTHER, self.error),), error=True)
        return PodSetBlockers(self.name, tuple(sorted(self.reasons, key=_message_of)))

    def message(self) -> str:
        return self.blockers().render()


@dataclass(slots=True)
class Assignment:
    """The result of one assignment; never changed once `assign` returns it (cached
    nominations share it between heads), so what is derived from it is kept."""

    pod_sets: list[PodSetAssignmentResult]
    complete: bool  # every pod set was evaluated and got flavors
    last_state: LastAssignment
    _mode: str | None = field(default=None, init=False, repr=False, compare=False)
    _borrowing: int | None = field(default=None, init=False, repr=False, compare=False)
    _usage: FRAmounts | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def mode(self) -> str:
        mode = self._mode
        if mode is None:
            mode = self._mode = self._compute_mode()
        return mode

    def _compute_mode(self) -> str:
        if not self.complete:
            return NO_FIT
        worst = FIT
        for ps in self.pod_sets:
            m = ps.public_mode
            if _PUBLIC_RANK[m] < _PUBLIC_RANK[worst]:
                worst = m
        return worst

    @property
    def borrowing(self) -> int:
        level = self._borrowing
        if level is None:
            level = self._borrowing = max(
                (c.mode.level for ps in self.pod_sets for c in ps.flavors.values()),
                default=0,
            )
        return level

    def usage(self) -> FRAmounts:
        """Per FR, the total requested (a new dict: callers keep and change it)."""
        usage = self._usage
        if usage is None:
            usage = self._usage = {}
            for ps in self.pod_sets:
                for resource, choice in ps.flavors.items():
                    fr = (choice.flavor, resource)
                    usage[fr] = usage.get(fr, 0) + ps.requests.get(resource, 0)
        return dict(usage)

    def frs_needing_preemption(self) -> set[FlavorResource]:
        return {
            (c.flavor, r)
            for ps in self.pod_sets
            for r, c in ps.flavors.items()
            if c.mode.mode.public == PREEMPT
        }

    def why(self) -> PendingWhy:
        """The pod sets that did not fit, with their blockers."""
        return PendingWhy(tuple(ps.blockers() for ps in self.pod_sets if ps.public_mode != FIT))

    def message(self) -> str:
        return self.why().message


def _message_of(blocker: Blocker) -> str:
    return blocker.message


def pod_set_requests(
    wl: WorkloadState, cq: ClusterQueueInfo, counts: Mapping[int, int] | None = None
) -> list[tuple[PodSetSpec, int, dict[str, int]]]:
    """Per pod set: (spec, count, totals) with reclaimable pods and `pods` applied
    (docs/scheduling.md#quantities)."""
    out: list[tuple[PodSetSpec, int, dict[str, int]]] = []
    for i, ps in enumerate(wl.pod_sets):
        count = wl.current_count(ps)
        if counts is not None and i in counts:
            count = counts[i]
        totals = {r: v * count for r, v in ps.per_pod.items()}
        if cq.covers_pods:
            totals["pods"] = count
        out.append((ps, count, totals))
    return out


@dataclass(eq=False)
class FlavorAssigner:
    """Assigns flavors to one workload's pod sets in `cq`, on the cycle's snapshot `tree`,
    asking `oracle` what preemption could free (docs/scheduling.md#preemption-oracle)."""

    cq: ClusterQueueInfo
    tree: QuotaTree
    flavors: Mapping[str, FlavorInfo]
    oracle: PreemptionOracle
    _: KW_ONLY
    fair_sharing: bool
    # resources.quotaCheckStrategy IgnoreUndeclared (docs/scheduling.md#configuration-in-v1beta2)
    ignore_undeclared: bool = False

    def _can_preempt_while_borrowing(self) -> bool:
        p = self.cq.preemption
        if p.borrow_within_cohort != "Never":
            return True
        return self.fair_sharing and p.reclaim_within_cohort != "Never"

    def assign(
        self,
        wl: WorkloadState,
        counts: Mapping[int, int] | None = None,
        last: LastAssignment | None = None,
    ) -> Assignment:
        generation = self.tree.generation(self.cq.name)
        if last is not None and last.generation != generation:
            last = None
        scan = _Scan(last)
        results: list[PodSetAssignmentResult] = []
        complete = True
        for index, (ps, count, totals) in enumerate(pod_set_requests(wl, self.cq, counts)):
            result = PodSetAssignmentResult(name=ps.name, count=count, requests=totals)
            results.append(result)
            if not self._assign_pod_set(index, ps, result, scan):
                complete = False
                break
        return Assignment(results, complete, LastAssignment(scan.tried, generation))

    def _assign_pod_set(
        self, index: int, ps: PodSetSpec, result: PodSetAssignmentResult, scan: _Scan
    ) -> bool:
        assumed, last, tried = scan.assumed, scan.last, scan.tried
        # Resume indices count only for pod sets that end up with flavors
        # (docs/scheduling.md#flavor-scan-resumption).
        pending_tried: dict[tuple[int, str], int] = {}
        for resource in sorted(result.requests):
            if resource in result.flavors:
                continue
            group = self.cq.group_for(resource)
            if group is None and self.ignore_undeclared:
                # Not the ClusterQueue's business: no flavor, no quota, not in the admission.
                del result.requests[resource]
                continue
            if group is None:
                result.flavors.clear()
                result.reasons = [
                    Blocker(BlockerKind.OTHER, f"resource {resource} unavailable in ClusterQueue")
                ]
                return False
            start = 0
            if last is not None:
                start = last.tried_flavor_idx.get((index, resource), -1) + 1
            try:
                choice, reasons, last_idx = self._scan_group(ps, group, result, assumed, start)
            except SelectorError as err:
                result.flavors.clear()
                result.error = str(err)
                return False
            requested = [r for r in group.covered if r in result.requests]
            if choice is None:
                result.flavors.clear()
                result.reasons = reasons
                return False
            for r in requested:
                result.flavors[r] = FlavorChoice(choice.flavor, choice.mode)
                pending_tried[(index, r)] = last_idx
                fr = (choice.flavor, r)
                assumed[fr] = assumed.get(fr, 0) + result.requests[r]
            if choice.mode.mode is not Mode.FIT:
                result.reasons.extend(reasons)
        tried.update(pending_tried)
        return True

    def _scan_group(
        self,
        ps: PodSetSpec,
        group: ResourceGroupInfo,
        result: PodSetAssignmentResult,
        assumed: FRAmounts,
        start: int,
    ) -> tuple[FlavorChoice | None, list[Blocker], int]:
        requested = sorted(r for r in group.covered if r in result.requests)
        label_keys = {
            key
            for name in group.flavors
            if (info := self.flavors.get(name)) is not None
            for key in info.node_labels
        }
        reasons: list[Blocker] = []
        best: FlavorChoice | None = None
        last_idx = start
        pob = self.cq.fungibility_preference == "PreemptionOverBorrowing"
        n = len(group.flavors)
        for idx in range(start, n):
            last_idx = idx
            name = group.flavors[idx]
            info = self.flavors.get(name)
            if info is None:
                reasons.append(
                    Blocker(BlockerKind.FLAVOR_NOT_FOUND, f"flavor {name} not found", name)
                )
                continue
            taint = first_untolerated_taint(info.taints, [*ps.tolerations, *info.tolerations])
            if taint is not None:
                text = f"untolerated taint {format_taint(taint)} in flavor {name}"
                reasons.append(Blocker(BlockerKind.TAINT, text, name))
                continue
            if not flavor_matches_pod(ps.pod_spec, info.node_labels, label_keys):
                text = f"flavor {name} doesn't match node affinity"
                reasons.append(Blocker(BlockerKind.NODE_AFFINITY, text, name))
                continue
            mode: GranularMode | None = None
            for r in requested:
                fr = (name, r)
                m = self._evaluate(fr, assumed.get(fr, 0), result.requests[r], reasons)
                mode = m if mode is None else _worse(mode, m, preemption_over_borrowing=pob)
                if m.mode is Mode.NO_FIT:
                    break
            if mode is None:
                mode = GranularMode(Mode.FIT, 0)
            choice = FlavorChoice(name, mode)
            if not self._should_try_next(mode):
                best = choice
                break
            if mode.preferred_over(best.mode if best else None, preemption_over_borrowing=pob):
                best = choice
        if last_idx == n - 1:
            last_idx = -1
        return best, reasons, last_idx

    def _should_try_next(self, m: GranularMode) -> bool:
        """docs/scheduling.md#fungibility flavor fungibility."""
        if m.mode in (Mode.NO_FIT, Mode.NO_CANDIDATES):
            return True
        if m.mode in (Mode.PREEMPT, Mode.RECLAIM) and self.cq.when_can_preempt == "TryNextFlavor":
            return True
        return m.level > 0 and self.cq.when_can_borrow == "TryNextFlavor"

    def _evaluate(
        self, fr: FlavorResource, assumed: int, request: int, reasons: list[Blocker]
    ) -> GranularMode:
        """docs/scheduling.md#evaluating-one-flavor-and-resource for one FR."""
        flavor, resource = fr
        cq = self.cq.name
        val = assumed + request
        potential = self.tree.potential_available(cq, fr)
        if val > potential:
            maximum = _quantity(resource, potential)
            text = (
                f"insufficient quota for {resource} in flavor {flavor}, previously considered "
                f"podsets requests ({_quantity(resource, assumed)}) + current podset "
                f"request ({_quantity(resource, request)}) > maximum capacity ({maximum})"
            )
            reasons.append(
                Blocker(BlockerKind.CAPACITY, text, flavor, resource, maximum, val, potential)
            )
            return GranularMode(Mode.NO_FIT, 0)
        level, may_reclaim = self.tree.borrowing_level(cq, fr, val)
        available = self.tree.available(cq, fr)
        if val <= available:
            return GranularMode(Mode.FIT, level)
        more = _quantity(resource, val - available)
        text = f"insufficient unused quota for {resource} in flavor {flavor}, {more} more needed"
        reasons.append(Blocker(BlockerKind.QUOTA, text, flavor, resource, more, val, available))
        nominal = self.tree.nominal(cq, fr)
        if val <= nominal or may_reclaim or self._can_preempt_while_borrowing():
            return self.oracle(fr, val)
        return GranularMode(Mode.NO_FIT, level)
