"""Preemption as seen by flavor assignment and nomination (§8.7, §6.4 step 8b).

This module owns the seam between flavor assignment and the target search. The
search itself (classic §8 and fair sharing §9.3) plugs in here.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.core.flavor_assigner import GranularMode, Mode, PreemptionOracle
from scheduler.core.quota import QuotaTree
from scheduler.core.resources import FlavorResource


@dataclass(frozen=True, slots=True)
class Target:
    key: str
    reason: str  # InClusterQueue | InCohortReclamation | InCohortReclaimWhileBorrowing | ...


def no_candidates_oracle(tree: QuotaTree, cq: str) -> PreemptionOracle:
    """The oracle when no workload may be preempted: §8.7 with an empty target list."""

    def oracle(fr: FlavorResource, value: int) -> GranularMode:
        level, _ = tree.borrowing_level(cq, fr, value)
        return GranularMode(Mode.NO_CANDIDATES, level)

    return oracle
