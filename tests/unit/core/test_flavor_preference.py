"""flavorFungibility.preference (docs/api-versions.md): which flavor wins when both
whenCanBorrow and whenCanPreempt are TryNextFlavor and no flavor simply fits."""

from __future__ import annotations

import pytest

from scheduler.core.flavor_assigner import GranularMode, Mode
from tests.unit.core.builders import Cluster, admitted_workload, local_queue, workload
from tests.unit.core.test_flavor_assigner import (
    CPU,
    NS,
    assigner,
    chosen,
    cq_flavors,
    preempt_oracle,
    setup,
)


def _cluster(preference: str | None) -> Cluster:
    """cq-a: f0 is its own but full (preempting `old` frees it, borrowing level 0);
    f1 has no own quota and fits only by borrowing from cq-l (level 1)."""
    cq = cq_flavors(
        "cq-a",
        {"f0": 2, "f1": 0},
        cohort="co",
        when_can_borrow="TryNextFlavor",
        when_can_preempt="TryNextFlavor",
    )
    if preference is not None:
        cq["spec"]["flavorFungibility"]["preference"] = preference
    return setup(
        cq,
        cq_flavors("cq-l", {"f1": 4}, cohort="co"),
        local_queue(NS, "lq", "cq-a"),
        admitted_workload(NS, "old", "lq", "cq-a", {CPU: "2"}, flavor_name="f0"),
        workload(NS, "w", "lq", {CPU: "2"}),
    )


@pytest.mark.parametrize("preference", [None, "BorrowingOverPreemption"])
def test_borrowing_over_preemption_is_the_default(preference: str | None) -> None:
    c = _cluster(preference)
    a = assigner(c, "cq-a", preempt_oracle).assign(c.wl(f"{NS}/w"))
    assert chosen(a) == "f1"
    assert a.pod_sets[0].flavors[CPU].mode == GranularMode(Mode.FIT, 1)


def test_preemption_over_borrowing_prefers_the_own_quota() -> None:
    c = _cluster("PreemptionOverBorrowing")
    a = assigner(c, "cq-a", preempt_oracle).assign(c.wl(f"{NS}/w"))
    assert chosen(a) == "f0"
    assert a.pod_sets[0].flavors[CPU].mode == GranularMode(Mode.PREEMPT, 0)


def test_a_flavor_without_preemption_candidates_never_wins_over_one_that_admits() -> None:
    # The default oracle finds no targets in f0: borrowing in f1 is the only way in.
    c = _cluster("PreemptionOverBorrowing")
    c.cycle()
    assert c.flavors_of(f"{NS}/w") == [{CPU: "f1"}]


def test_preferred_over_orders() -> None:
    own_preempt, borrowed_fit = GranularMode(Mode.PREEMPT, 0), GranularMode(Mode.FIT, 1)
    no_targets = GranularMode(Mode.NO_CANDIDATES, 0)
    assert borrowed_fit.preferred_over(own_preempt)
    assert own_preempt.preferred_over(borrowed_fit, preemption_over_borrowing=True)
    assert borrowed_fit.preferred_over(no_targets, preemption_over_borrowing=True)
    assert not no_targets.preferred_over(borrowed_fit, preemption_over_borrowing=True)
