"""docs/forecasting.md#cost: skipping the cycles that cannot admit anything (`Hopeless`)
changes no forecast."""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.core.clock import MICROS_PER_SECOND, ManualClock
from scheduler.core.cycle import run_cycle
from scheduler.core.ingest import scheduler_config
from scheduler.core.scheduler import Scheduler
from scheduler.forecast.forward import forward_run, pending_keys
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
    for i in range(60):
        if i == 20:  # the first ones hold quota, the others arrive later
            while run_cycle(s).admitted:
                pass
            clock.set(T0 + 30 * MICROS_PER_SECOND)
        cpu = 1 if uniform else rng.randint(1, 4)
        priority = rng.choice((0, 10)) if i % 3 else 0
        data = workload("team", f"w{i:02d}", "main", str(cpu), priority=priority)
        data["spec"]["maximumExecutionTimeSeconds"] = rng.randint(60, 900)
        cluster(s, data)
    while run_cycle(s).admitted:
        pass
    return s


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


def test_the_shortcut_skips_the_failing_tail_of_a_best_effort_queue() -> None:
    s = state(0, "BestEffortFIFO", "Never", uniform=True)
    targets = pending_keys(s)
    fast = forward_run(s, WalltimePredictor(), targets)
    full = forward_run(s, WalltimePredictor(), targets, shortcut=False)
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
