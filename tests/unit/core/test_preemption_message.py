"""Kueue v0.19.2's preemption message (docs/scheduling.md#condition-messages): the
ClusterQueues' paths from their root cohort."""

from __future__ import annotations

from scheduler.core.preemption import NodeRef, cluster_queue_path
from tests.unit.core.builders import (
    Cluster,
    cohort,
    flavor,
    local_queue,
    namespace,
    simple_cq,
    workload,
)


class Tree:
    def __init__(self, parents: dict[str, str]) -> None:
        self.parents = parents

    def parent(self, node: NodeRef) -> NodeRef | None:
        found = self.parents.get(node.name if node.is_cq else f"cohort:{node.name}")
        return NodeRef.cohort(found) if found else None


def test_a_cluster_queue_without_a_cohort_is_its_own_path() -> None:
    assert cluster_queue_path(Tree({}), "standalone") == "/standalone"


def test_the_path_runs_from_the_root_cohort_down() -> None:
    tree = Tree({"cq-a": "team-x", "cohort:team-x": "org"})
    assert cluster_queue_path(tree, "cq-a") == "/org/team-x/cq-a"


def test_a_cohort_cycle_ends_the_path_once_round() -> None:
    tree = Tree({"cq": "a", "cohort:a": "b", "cohort:b": "a"})
    assert cluster_queue_path(tree, "cq") == "/b/a/cq"


def test_a_victim_remembers_its_preemptor_across_an_update() -> None:
    """The cluster side names the preemptor in its Events (docs/cluster.md#events), so the
    victim keeps its key, also when its object is applied again before the write."""
    c = Cluster()
    c.apply(
        namespace("team-a"),
        flavor("default"),
        cohort("org"),
        simple_cq("cq-a", 2, cohort="org", preemption={"withinClusterQueue": "LowerPriority"}),
        local_queue("team-a", "lq-a", "cq-a"),
        workload("team-a", "low", "lq-a", {"cpu": "2"}, priority=0),
    )
    c.cycle()
    c.apply(workload("team-a", "high", "lq-a", {"cpu": "2"}, priority=10, created=1))
    c.cycle()
    victim = c.s.objects.workloads["team-a/low"]
    assert victim.preempted_by == "team-a/high"
    evicted = victim.conditions.get("Evicted")
    assert evicted is not None
    assert evicted.message.endswith("; preemptor path: /org/cq-a; preemptee path: /org/cq-a")
    c.apply(workload("team-a", "low", "lq-a", {"cpu": "2"}, priority=0, labels={"x": "y"}))
    assert c.s.objects.workloads["team-a/low"].preempted_by == "team-a/high"
