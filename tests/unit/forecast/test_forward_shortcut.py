"""docs/forecasting.md#cost: skipping the cycles that cannot admit anything (`Hopeless`)
changes no forecast."""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.core.changes import Changes
from scheduler.core.clock import MICROS_PER_SECOND, ManualClock
from scheduler.core.cycle import run_cycle
from scheduler.core.ingest import scheduler_config
from scheduler.core.scheduler import Scheduler
from scheduler.forecast.forward import ForwardResult, forward_run, pending_keys
from scheduler.forecast.hopeless import Hopeless
from scheduler.forecast.predictors import WalltimePredictor
from tests.unit.runtime.support import cluster, flavor, local_queue, namespace, workload

T0 = 1_767_225_600 * MICROS_PER_SECOND
Json = dict[str, Any]


def queue(strategy: str, preemption: str, cpu: int) -> Json:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "namespaceSelector": {},
            "queueingStrategy": strategy,
            "preemption": {"withinClusterQueue": preemption},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "default", "resources": [{"name": "cpu", "nominalQuota": cpu}]}
                    ],
                }
            ],
        },
    }


def state(seed: int, strategy: str, preemption: str, uniform: bool) -> Scheduler:
    rng = random.Random(seed)
    clock = ManualClock(T0)
    s = Scheduler(clock, scheduler_config(None))
    cluster(s, namespace("team"), flavor(), queue(strategy, preemption, 8))
    cluster(s, local_queue("team", "main", "cq"))
    fill(s, clock, rng, ["main"], 1 if uniform else 4)
    return s


def fill(
    s: Scheduler, clock: ManualClock, rng: random.Random, queues: list[str], max_cpu: int
) -> None:
    """60 workloads of 1 to `max_cpu` cpu and mixed priorities, spread over `queues`:
    the first 20 admitted as far as they fit, the others arriving 30 s later."""
    for i in range(60):
        if i == 20:  # the first ones hold quota, the others arrive later
            while run_cycle(s).admitted:
                pass
            clock.set(T0 + 30 * MICROS_PER_SECOND)
        cpu = 1 if max_cpu == 1 else rng.randint(1, max_cpu)
        priority = rng.choice((0, 10)) if i % 3 else 0
        lq = queues[rng.randrange(len(queues))] if i % 5 and len(queues) > 1 else queues[0]
        data = workload("team", f"w{i:02d}", lq, str(cpu), priority=priority)
        data["spec"]["maximumExecutionTimeSeconds"] = rng.randint(60, 900)
        cluster(s, data)
    while run_cycle(s).admitted:
        pass


@pytest.mark.parametrize("strategy", ["BestEffortFIFO", "StrictFIFO"])
@pytest.mark.parametrize("preemption", ["Never", "LowerPriority"])
@pytest.mark.parametrize("uniform", [True, False])
def test_the_shortcut_changes_no_wait(strategy: str, preemption: str, uniform: bool) -> None:
    for seed in range(4):
        s = state(seed, strategy, preemption, uniform)
        targets = pending_keys(s)
        assert len(targets) > 20
        fast = forward_run(s, WalltimePredictor(), targets)
        full = forward_run(s, WalltimePredictor(), targets, shortcut=False)
        assert fast.waits == full.waits, (seed, strategy, preemption, uniform)
        assert fast.end == full.end
        assert fast.cycles <= full.cycles


def both_runs(s: Scheduler) -> tuple[ForwardResult, ForwardResult]:
    """The forward run of every pending workload with the shortcut, then without."""
    targets = pending_keys(s)
    fast = forward_run(s, WalltimePredictor(), targets)
    return fast, forward_run(s, WalltimePredictor(), targets, shortcut=False)


def test_the_shortcut_skips_the_failing_tail_of_a_best_effort_queue() -> None:
    s = state(0, "BestEffortFIFO", "Never", uniform=True)
    fast, full = both_runs(s)
    assert fast.waits == full.waits
    assert fast.cycles * 2 < full.cycles


def test_a_head_that_can_preempt_keeps_the_cycles_going() -> None:
    """No quota is free and the first head (4 cpu) cannot preempt enough; the next (1
    cpu) can preempt the one lower-priority holder: the cycles must go on to it."""
    clock = ManualClock(T0)
    s = Scheduler(clock, scheduler_config(None))
    cluster(s, namespace("team"), flavor(), queue("BestEffortFIFO", "LowerPriority", 8))
    cluster(s, local_queue("team", "main", "cq"))
    holders = [workload("team", f"h{i}", "main", "1", priority=10) for i in range(7)]
    cluster(s, *holders, workload("team", "low", "main", "1", priority=0))
    while run_cycle(s).admitted:
        pass
    clock.set(T0 + 30 * MICROS_PER_SECOND)
    cluster(s, workload("team", "big", "main", "4", priority=10))
    clock.set(T0 + 31 * MICROS_PER_SECOND)
    cluster(s, workload("team", "small", "main", "1", priority=10))
    targets = pending_keys(s)
    assert targets == ["team/big", "team/small"]
    full = forward_run(s, WalltimePredictor(), targets, shortcut=False)
    assert full.waits["team/small"] == 0.0
    assert forward_run(s, WalltimePredictor(), targets).waits == full.waits


# ----------------------------------------------------------- several flavors per group


def two_flavor_queue(  # noqa: PLR0913 - one ClusterQueue's knobs
    name: str,
    strategy: str,
    preemption: str,
    *,
    cohort: str | None = None,
    borrowing_limit: int | None = None,
    when_can_borrow: str = "Borrow",
    when_can_preempt: str = "TryNextFlavor",
) -> Json:
    """Two flavors of cpu: 5 of "small" then 4 of "large" (and, in a Cohort, a
    borrowing limit on both)."""

    def quota(flavor_name: str, cpu: int) -> Json:
        resource: Json = {"name": "cpu", "nominalQuota": cpu}
        if borrowing_limit is not None:
            resource["borrowingLimit"] = borrowing_limit
        return {"name": flavor_name, "resources": [resource]}

    spec: Json = {
        "namespaceSelector": {},
        "queueingStrategy": strategy,
        "preemption": {"withinClusterQueue": preemption},
        "flavorFungibility": {"whenCanBorrow": when_can_borrow, "whenCanPreempt": when_can_preempt},
        "resourceGroups": [
            {"coveredResources": ["cpu"], "flavors": [quota("small", 5), quota("large", 4)]}
        ],
    }
    return cluster_queue_doc(name, spec, cohort)


def several_flavors_state(  # noqa: PLR0913 - the knobs of the scenarios compared
    seed: int,
    strategy: str,
    preemption: str,
    *,
    cohort: bool,
    when_can_borrow: str = "Borrow",
    when_can_preempt: str = "TryNextFlavor",
    uniform: bool = False,
) -> Scheduler:
    """One queue with two flavors, or two of them in a Cohort (borrowing up to 3 cpu of
    each flavor from the other); mixed sizes (1 to 5 cpu, or 1 each) and priorities."""
    rng = random.Random(seed)
    clock = ManualClock(T0)
    s = Scheduler(clock, scheduler_config(None))
    names = ["cq-a", "cq-b"] if cohort else ["cq-a"]
    cluster(s, namespace("team"), flavor("small"), flavor("large"))
    for name in names:
        cluster(
            s,
            two_flavor_queue(
                name,
                strategy,
                preemption,
                cohort="co" if cohort else None,
                borrowing_limit=3 if cohort else None,
                when_can_borrow=when_can_borrow,
                when_can_preempt=when_can_preempt,
            ),
            local_queue("team", name, name),
        )
    fill(s, clock, rng, names, 1 if uniform else 5)
    return s


@pytest.mark.parametrize("strategy", ["BestEffortFIFO", "StrictFIFO"])
@pytest.mark.parametrize("preemption", ["Never", "LowerPriority"])
@pytest.mark.parametrize("cohort", [False, True])
@pytest.mark.parametrize("uniform", [False, True])
@pytest.mark.parametrize(
    ("when_can_borrow", "when_can_preempt"),
    [("Borrow", "TryNextFlavor"), ("TryNextFlavor", "Preempt")],
)
def test_the_shortcut_changes_no_wait_with_several_flavors(  # noqa: PLR0913 - the grid
    strategy: str,
    preemption: str,
    cohort: bool,
    uniform: bool,
    when_can_borrow: str,
    when_can_preempt: str,
) -> None:
    for seed in range(4):
        s = several_flavors_state(
            seed,
            strategy,
            preemption,
            cohort=cohort,
            when_can_borrow=when_can_borrow,
            when_can_preempt=when_can_preempt,
            uniform=uniform,
        )
        targets = pending_keys(s)
        assert len(targets) > 20
        fast = forward_run(s, WalltimePredictor(), targets)
        full = forward_run(s, WalltimePredictor(), targets, shortcut=False)
        case = (seed, strategy, preemption, cohort, uniform, when_can_borrow, when_can_preempt)
        assert fast.waits == full.waits, case
        assert fast.end == full.end, case
        assert fast.cycles <= full.cycles, case


@pytest.mark.parametrize("cohort", [False, True])
def test_the_shortcut_covers_several_flavors_and_borrowing(cohort: bool) -> None:
    """BestEffortFIFO with two flavors, alone or borrowing in a Cohort: the failing
    tail of each release is skipped (it was not before: one flavor per group only)."""
    s = several_flavors_state(0, "BestEffortFIFO", "Never", cohort=cohort, uniform=True)
    hopeless = Hopeless.of(s)
    assert hopeless is not None
    assert sorted(hopeless.bounds) == (["cq-a", "cq-b"] if cohort else ["cq-a"])
    fast, full = both_runs(s)
    assert fast.waits == full.waits
    assert fast.cycles * 2 < full.cycles


def test_several_flavors_and_several_pod_sets_are_not_covered() -> None:
    """Pod sets of one workload may take different flavors, and the scan's resume
    record then depends on which heads were tried: such a queue is run in full."""
    s = several_flavors_state(1, "BestEffortFIFO", "Never", cohort=False)
    two = workload("team", "two-pod-sets", "cq-a", "1")
    second = dict(two["spec"]["podSets"][0], name="second")
    two["spec"]["podSets"] = [two["spec"]["podSets"][0], second]
    cluster(s, two)
    hopeless = Hopeless.of(s)
    assert hopeless is not None
    assert "cq-a" not in hopeless.bounds
    fast, full = both_runs(s)
    assert fast.waits == full.waits
    assert fast.cycles == full.cycles


def test_a_queue_that_may_reclaim_in_its_cohort_is_not_covered() -> None:
    s = several_flavors_state(2, "BestEffortFIFO", "Never", cohort=True)
    reclaiming = two_flavor_queue("cq-c", "BestEffortFIFO", "Never", cohort="co")
    reclaiming["spec"]["preemption"]["reclaimWithinCohort"] = "Any"
    cluster(s, reclaiming, local_queue("team", "cq-c", "cq-c"))
    hopeless = Hopeless.of(s)
    assert hopeless is not None
    assert sorted(hopeless.bounds) == ["cq-a", "cq-b"]


# ------------------------------------------------ the bound follows what is still queued


def one_queue(strategy: str, preemption: str, cpu: int) -> tuple[Scheduler, ManualClock]:
    """ClusterQueue "cq" of `cpu` cpu, with LocalQueue team/main, and nothing queued."""
    clock = ManualClock(T0)
    s = Scheduler(clock, scheduler_config(None))
    cluster(s, namespace("team"), flavor(), queue(strategy, preemption, cpu))
    cluster(s, local_queue("team", "main", "cq"))
    return s, clock


def small_ones_admitted() -> Scheduler:
    """3 cpu of quota: two one-cpu workloads hold 2, three two-cpu ones wait."""
    s, clock = one_queue("BestEffortFIFO", "Never", 3)
    cluster(s, *(workload("team", f"small{i}", "main", "1") for i in range(2)))
    while run_cycle(s).admitted:
        pass
    clock.set(T0 + 30 * MICROS_PER_SECOND)
    big = [workload("team", f"big{i}", "main", "2") for i in range(3)]
    for data in big:
        data["spec"]["maximumExecutionTimeSeconds"] = 600
    cluster(s, *big)
    return s


def test_the_bound_is_the_smallest_request_still_queued() -> None:
    """A holder asks for 1 cpu and 1 cpu is free, but every queued workload asks for 2:
    nothing can be admitted before a release, whatever the holders once asked."""
    s = small_ones_admitted()
    hopeless = Hopeless.of(s)
    assert hopeless is not None
    assert sorted(hopeless.waiting["cq"].members) == ["team/big0", "team/big1", "team/big2"]
    assert hopeless.waiting["cq"].least("cpu") == 2000  # millicores
    assert hopeless.holds(s)


def test_the_bound_follows_admissions_and_requeues() -> None:
    s = small_ones_admitted()
    hopeless = Hopeless.of(s)
    assert hopeless is not None
    waiting = hopeless.waiting["cq"]
    hopeless.observe(Changes(queues={"cq": {"team/small0"}}))  # evicted and requeued
    assert waiting.least("cpu") == 1000
    assert not hopeless.holds(s)  # the one-cpu workload fits in the free cpu
    hopeless.observe(Changes(admitted=["team/small0", "team/big0"]))
    assert sorted(waiting.members) == ["team/big1", "team/big2"]
    assert waiting.least("cpu") == 2000
    hopeless.observe(Changes(admitted=["team/big1", "team/big2"]))
    assert waiting.least("cpu") is None


def test_a_workload_the_run_did_not_expect_uncovers_its_queue() -> None:
    s = small_ones_admitted()
    hopeless = Hopeless.of(s)
    assert hopeless is not None
    hopeless.observe(Changes(queues={"cq": {"team/unknown"}}))
    assert "cq" not in hopeless.bounds
    assert not hopeless.holds(s)


def test_the_shortcut_ends_the_instant_once_the_small_ones_are_admitted() -> None:
    s = small_ones_admitted()
    fast, full = both_runs(s)
    assert fast.waits == full.waits
    assert fast.cycles < full.cycles


def cluster_queue_doc(name: str, spec: Json, cohort: str | None) -> Json:
    """A ClusterQueue of `spec`, in `cohort` if one is given."""
    if cohort is not None:
        spec["cohort"] = cohort
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    }
