"""docs/forecasting.md#cost: a deep BestEffortFIFO queue offered one workload that fits at
a time (`Withheld`) admits what the core's walk over every head admits, when it does."""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.core.clock import MICROS_PER_SECOND, ManualClock
from scheduler.core.cycle import run_cycle
from scheduler.core.ingest import scheduler_config
from scheduler.core.scheduler import Scheduler
from scheduler.forecast.hopeless import Hopeless
from scheduler.forecast.withheld import Withheld
from tests.unit.forecast.test_forward_shortcut import (
    both_runs,
    cluster_queue_doc,
    one_queue,
    small_ones_admitted,
)
from tests.unit.runtime.support import cluster, flavor, local_queue, namespace, workload

T0 = 1_767_225_600 * MICROS_PER_SECOND
Json = dict[str, Any]


def cpu_and_memory_queue(
    name: str, *, cohort: str | None = None, preemption: str = "Never"
) -> Json:
    spec: Json = {
        "namespaceSelector": {"matchLabels": {"team": "yes"}},
        "queueingStrategy": "BestEffortFIFO",
        "preemption": {"withinClusterQueue": preemption},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": "default",
                        "resources": [
                            {"name": "cpu", "nominalQuota": 12},
                            {"name": "memory", "nominalQuota": "48Gi"},
                        ],
                    }
                ],
            }
        ],
    }
    return cluster_queue_doc(name, spec, cohort)


def deep_mixed_state(seed: int, depth: int = 150, preemption: str = "Never") -> Scheduler:
    """A queue of 12 cpu and 48Gi; `depth` workloads of 1 to 6 cpu and 2, 8 or 24Gi with
    two priorities, a few in a namespace the queue does not select; the first ones admitted
    as far as they fit, the rest arriving later."""
    rng = random.Random(seed)
    clock = ManualClock(T0)
    s = Scheduler(clock, scheduler_config(None))
    team = namespace("team")
    team["metadata"]["labels"] = {"team": "yes"}
    queue_doc = cpu_and_memory_queue("cq", preemption=preemption)
    cluster(s, team, namespace("other"), flavor(), queue_doc)
    cluster(s, local_queue("team", "main", "cq"), local_queue("other", "main", "cq"))
    for i in range(depth):
        if i == 10:
            while run_cycle(s).admitted:
                pass
            clock.set(T0 + 30 * MICROS_PER_SECOND)
        ns = "other" if i % 37 == 5 else "team"
        data = workload(
            ns, f"w{i:03d}", "main", str(rng.randint(1, 6)), priority=rng.choice((0, 10))
        )
        data["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"][
            "memory"
        ] = f"{rng.choice((2, 8, 24))}Gi"
        data["spec"]["maximumExecutionTimeSeconds"] = rng.randint(60, 7200)
        cluster(s, data)
    while run_cycle(s).admitted:
        pass
    return s


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("preemption", ["Never", "LowerPriority"])
def test_the_same_workloads_start_at_the_same_instants(seed: int, preemption: str) -> None:
    """Under LowerPriority the workloads that may preempt are offered too, some preempt,
    and their victims queue again the usual way, ahead of the withheld ones."""
    s = deep_mixed_state(seed, preemption=preemption)
    withheld = Withheld.of(s, Hopeless.of(s))
    assert list(withheld.queues) == ["cq"]
    fast, full = both_runs(s)
    assert fast.waits == full.waits
    assert fast.end == full.end
    assert fast.cycles * 5 < full.cycles


def test_only_the_queue_selects_is_withheld() -> None:
    s = deep_mixed_state(0)
    withheld = Withheld.of(s, Hopeless.of(s))
    kept = {key for heap in withheld.queues["cq"].shapes.values() for _, key in heap}
    queued = s.queues.queue("cq")
    assert queued is not None
    still = {entry.key for entry in queued.listing()}
    assert still, "the workloads of the namespace the queue does not select stay queued"
    assert all(key.startswith("other/") for key in still)
    assert not any(key.startswith("other/") for key in kept)


def test_a_workload_refused_for_another_reason_ends_the_shortcut() -> None:
    """The flavor's node labels refuse one workload whose request fits: offered, tried and
    not admitted, it sends every withheld workload back to the queue."""
    s = small_ones_admitted()
    refused = workload("team", "refused", "main", "1")
    refused["spec"]["podSets"][0]["template"]["spec"]["nodeSelector"] = {"zone": "elsewhere"}
    labelled = flavor()
    labelled["spec"] = {"nodeLabels": {"zone": "here"}}
    cluster(s, labelled, refused)
    withheld = Withheld.of(s, Hopeless.of(s))
    assert "cq" in withheld.queues
    withheld.offer(s)
    assert withheld.queues["cq"].offered == "team/refused"
    s.follow_changes()
    run_cycle(s)
    withheld.observe(s, s.take_changes())
    assert "cq" not in withheld.queues
    queued = s.queues.queue("cq")
    assert queued is not None
    assert {e.key for e in queued.listing()} >= {"team/big0", "team/big1", "team/big2"}
    fast, full = both_runs(small_ones_admitted_with(refused, labelled))
    assert fast.waits == full.waits


def small_ones_admitted_with(*docs: Json) -> Scheduler:
    s = small_ones_admitted()
    cluster(s, *docs)
    return s


def test_a_strict_fifo_queue_is_not_withheld() -> None:
    """Its head blocks the queue: nothing is walked."""
    s, _ = one_queue("StrictFIFO", "Never", 3)
    cluster(s, *(workload("team", f"w{i}", "main", "2") for i in range(4)))
    assert Withheld.of(s, Hopeless.of(s)).queues == {}


def test_a_queue_in_a_cohort_is_not_withheld() -> None:
    clock = ManualClock(T0)
    s = Scheduler(clock, scheduler_config(None))
    team = namespace("team")
    team["metadata"]["labels"] = {"team": "yes"}
    cluster(s, team, flavor(), cpu_and_memory_queue("cq", cohort="co"))
    cluster(s, local_queue("team", "main", "cq"))
    cluster(s, *(workload("team", f"w{i}", "main", "2") for i in range(4)))
    assert Withheld.of(s, Hopeless.of(s)).queues == {}
