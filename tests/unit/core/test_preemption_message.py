"""Kueue v0.19.2's preemption message (docs/scheduling.md#condition-messages): the
ClusterQueues' paths from their root cohort."""

from __future__ import annotations

from scheduler.core.preemption import NodeRef, cluster_queue_path


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
