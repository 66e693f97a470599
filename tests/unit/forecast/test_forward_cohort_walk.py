"""docs/forecasting.md#cost: the walk over the BestEffortFIFO queues of a Cohort's tree,
counted instead of run (`CohortWalk`), admits what the core's walk admits, when it does."""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.core.clock import MICROS_PER_SECOND, ManualClock
from scheduler.core.cycle import run_cycle
from scheduler.core.ingest import scheduler_config
from scheduler.core.scheduler import Scheduler
from scheduler.forecast import cohort_walk
from scheduler.forecast.cohort_walk import CohortWalk
from scheduler.forecast.forward import ForwardResult
from scheduler.forecast.hopeless import Hopeless
from tests.unit.core.builders import cohort
from tests.unit.forecast.test_forward_shortcut import both_runs, cluster_queue_doc
from tests.unit.runtime.support import cluster, flavor, local_queue, namespace, workload

T0 = 1_767_225_600 * MICROS_PER_SECOND
Json = dict[str, Any]


def best_effort_queue(  # noqa: PLR0913 - one ClusterQueue's knobs
    name: str,
    parent: str,
    cpu: int,
    *,
    strategy: str = "BestEffortFIFO",
    preemption: str = "Never",
    borrowing_limit: int | None = None,
    lending_limit: int | None = None,
) -> Json:
    quota: Json = {"name": "cpu", "nominalQuota": cpu}
    if borrowing_limit is not None:
        quota["borrowingLimit"] = borrowing_limit
    if lending_limit is not None:
        quota["lendingLimit"] = lending_limit
    spec: Json = {
        "namespaceSelector": {},
        "queueingStrategy": strategy,
        "preemption": {"withinClusterQueue": preemption},
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "default", "resources": [quota]}],
            }
        ],
    }
    return cluster_queue_doc(name, spec, parent)


def tree_state(seed: int, queues: list[Json], depth: int = 120, *extra: Json) -> Scheduler:
    """`queues` in their Cohorts (and `extra` objects); `depth` workloads of 1 to 8 cpu and
    two priorities spread over them, the first ones admitted as far as they fit, the rest
    arriving later."""
    rng = random.Random(seed)
    clock = ManualClock(T0)
    s = Scheduler(clock, scheduler_config(None))
    cluster(s, namespace("team"), flavor(), *extra)
    names = [doc["metadata"]["name"] for doc in queues]
    for doc in queues:
        name = doc["metadata"]["name"]
        cluster(s, doc, local_queue("team", name, name))
    for i in range(depth):
        if i == 20:
            while run_cycle(s).admitted:
                pass
            clock.set(T0 + 30 * MICROS_PER_SECOND)
        data = workload(
            "team",
            f"w{i:03d}",
            rng.choice(names),
            str(rng.randint(1, 8)),
            priority=rng.choice((0, 10)),
        )
        data["spec"]["maximumExecutionTimeSeconds"] = rng.randint(60, 7200)
        cluster(s, data)
    while run_cycle(s).admitted:
        pass
    return s


def counted(s: Scheduler) -> list[tuple[str, ...]]:
    return [tree.members for tree in CohortWalk.of(s, Hopeless.of(s)).trees]


def assert_same(fast: ForwardResult, full: ForwardResult) -> None:
    assert len(full.waits) > 50
    assert fast.waits == full.waits
    assert fast.end == full.end


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("queues", [2, 3, 5])
def test_the_same_workloads_start_at_the_same_instants(seed: int, queues: int) -> None:
    """Queues of a flat Cohort, all borrowing: their heads compete for the same unused
    quota, a head within its nominal quota holds it back from the others' heads, and a
    head skipped for that waits while the others walk on (with five queues, several
    skipped heads wait at once)."""
    docs = [best_effort_queue(f"cq{i}", "co", 16) for i in range(queues)]
    s = tree_state(seed, docs)
    assert counted(s) == [tuple(f"cq{i}" for i in range(queues))]
    fast, full = both_runs(s)
    assert_same(fast, full)
    assert fast.cycles * 3 < full.cycles


@pytest.mark.parametrize("seed", range(3))
def test_a_tree_of_cohorts_with_limits(seed: int) -> None:
    """Two Cohorts under a root that has quota of its own; borrowing and lending limits."""
    docs = [
        best_effort_queue("a1", "left", 10, borrowing_limit=6),
        best_effort_queue("a2", "left", 6, lending_limit=2),
        best_effort_queue("b1", "right", 12),
    ]
    root_quota = [
        {
            "coveredResources": ["cpu"],
            "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 4}]}],
        }
    ]
    s = tree_state(
        seed,
        docs,
        120,
        cohort("root", groups=root_quota),
        cohort("left", "root"),
        cohort("right", "root"),
    )
    assert counted(s) == [("a1", "a2", "b1")]
    assert_same(*both_runs(s))


def test_a_tree_with_a_queue_not_covered_is_run_in_full() -> None:
    """A StrictFIFO queue with workloads in the tree: its blocked head is tried every cycle,
    which this count does not know; the tree is not counted (and the answers are the
    walk's)."""
    docs = [best_effort_queue("cq0", "co", 16), best_effort_queue("cq1", "co", 16)]
    docs.append(best_effort_queue("strict", "co", 4, strategy="StrictFIFO"))
    s = tree_state(0, docs, 80)
    assert counted(s) == []
    fast, full = both_runs(s)
    assert fast.waits == full.waits


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("queues", [2, 3])
@pytest.mark.parametrize("never_first", [False, True])
def test_trees_that_may_preempt_start_the_same(seed: int, queues: int, never_first: bool) -> None:
    """Queues with preemption `LowerPriority` within the queue (all of them, or all but
    the first): holders of priority 0 and heads of priority 10 make preemptions, and a
    preemptor that waits for its victims stays its queue's first workload; the count runs
    only in the stretches where no head has a victim."""
    docs = [
        best_effort_queue(
            f"cq{i}", "co", 16, preemption="Never" if never_first and i == 0 else "LowerPriority"
        )
        for i in range(queues)
    ]
    s = tree_state(seed, docs, 160)
    assert counted(s) == [tuple(f"cq{i}" for i in range(queues))]
    fast, full = both_runs(s)
    assert_same(fast, full)
    assert fast.cycles * 2 < full.cycles


def test_a_head_that_gains_a_victim_ends_the_count_until_a_release(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A workload of priority 0 admitted while one of priority 10 waits in its queue gives
    that one a victim: the tree is run in full from there, and counted again from a
    later release where no head has one."""
    states: list[str] = []
    offer = CohortWalk.offer

    def recorded(self: CohortWalk, s: Scheduler) -> None:
        offer(self, s)
        for tree in self.trees:
            if not states or states[-1] != tree.state:
                states.append(tree.state)

    monkeypatch.setattr(CohortWalk, "offer", recorded)
    docs = [best_effort_queue(f"cq{i}", "co", 16, preemption="LowerPriority") for i in range(2)]
    s = tree_state(1, docs, 160)
    fast, full = both_runs(s)
    assert_same(fast, full)
    # Counted, abandoned for a victim, waiting for a release where none has one, counted.
    run = [cohort_walk.ACTIVE, cohort_walk.ABANDONED, cohort_walk.WAITING, cohort_walk.ACTIVE]
    assert any(states[k : k + 4] == run for k in range(len(states)))


def test_a_workload_refused_for_another_reason_ends_the_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The flavor's node labels refuse one small workload whose request fits: offered and
    parked by the core, it ends the count for the tree, and the answers stay the walk's."""
    ended: list[tuple[str, ...]] = []
    abandon = cohort_walk.abandon

    def recorded(s: Scheduler, tree: Any) -> None:
        ended.append(tree.members)
        abandon(s, tree)

    monkeypatch.setattr(cohort_walk, "abandon", recorded)
    docs = [best_effort_queue(f"cq{i}", "co", 16) for i in range(2)]
    labelled = flavor()
    labelled["spec"] = {"nodeLabels": {"zone": "here"}}
    s = tree_state(1, docs, 100, labelled)
    refused = workload("team", "refused", "cq0", "1", priority=10)
    refused["spec"]["podSets"][0]["template"]["spec"]["nodeSelector"] = {"zone": "elsewhere"}
    refused["spec"]["maximumExecutionTimeSeconds"] = 600
    cluster(s, refused)
    fast, full = both_runs(s)
    assert "team/refused" not in full.waits
    assert_same(fast, full)
    assert ended == [("cq0", "cq1")]


def test_nothing_is_withheld_before_the_first_release() -> None:
    """Until quota is given back, some of the queues' workloads are parked by the core and
    others not tried yet: the walk's order is not known, so the count waits for the flush
    that puts every workload back in its queue."""
    docs = [best_effort_queue(f"cq{i}", "co", 16) for i in range(2)]
    s = tree_state(0, docs, 60)
    walk = CohortWalk.of(s, Hopeless.of(s))
    before = {name: len(q) for name in ("cq0", "cq1") if (q := s.queues.queue(name)) is not None}
    walk.offer(s)
    after = {name: len(q) for name in ("cq0", "cq1") if (q := s.queues.queue(name)) is not None}
    assert before == after
    assert sum(before.values()) > 20


@pytest.mark.parametrize("holder_priority", [0, 10])
def test_no_count_starts_while_a_head_has_a_victim(holder_priority: int) -> None:
    """At a release, workloads of priority 10 wait in a queue where one of
    `holder_priority` holds quota: with 0 it is their victim and the tree is run in full,
    nothing withheld, until a later release; with 10 the count starts."""
    s = Scheduler(ManualClock(T0), scheduler_config(None))
    docs = [best_effort_queue(f"cq{i}", "co", 16, preemption="LowerPriority") for i in range(2)]
    cluster(s, namespace("team"), flavor())
    for doc in docs:
        name = doc["metadata"]["name"]
        cluster(s, doc, local_queue("team", name, name))
    cluster(
        s,
        workload("team", "holder", "cq0", "8", priority=holder_priority),
        workload("team", "done", "cq0", "8", priority=10),
        workload("team", "full", "cq1", "16", priority=10),
    )
    while run_cycle(s).admitted:
        pass
    assert sorted(s.holders.all_keys()) == ["team/done", "team/full", "team/holder"]
    for i in range(5):
        cluster(s, workload("team", f"x{i}", "cq0", "4", priority=10))
        cluster(s, workload("team", f"y{i}", "cq1", "4", priority=0))
    walk = CohortWalk.of(s, Hopeless.of(s))
    [tree] = walk.trees
    assert s.finish("team/done")
    walk.offer(s)
    queued = {n: len(q) for n in ("cq0", "cq1") if (q := s.queues.queue(n)) is not None}
    if holder_priority == 0:
        assert tree.state == cohort_walk.WAITING
        assert queued == {"cq0": 5, "cq1": 5}
    else:
        assert tree.state == cohort_walk.ACTIVE
        assert queued == {"cq0": 1, "cq1": 1}  # the offered heads alone
