"""A running Job's reclaimable Pods as Kueue's Job integration counts them
(docs/cluster.md#reclaimable-pods)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.job_reclaimable import reclaimable_pods, terminal_indexes


def job(parallelism: int | None, completions: int | None, **status: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    return {"spec": spec, "status": status}


@pytest.mark.parametrize(
    ("parallelism", "completions", "succeeded", "expected"),
    [
        (3, 6, 2, 0),  # four still to run: every parallel slot is needed
        (3, 6, 4, 1),  # two to run on three slots
        (3, 6, 6, 3),  # done: all three
        (3, 6, 7, 3),  # more than needed counts as done
        (3, None, 1, 1),  # completions default to the parallelism
        (1, 5, 4, 0),  # a single-Pod Job reclaims nothing
        (None, None, 1, 0),
        (4, 8, 0, 0),  # nothing terminal yet
    ],
)
def test_non_indexed_jobs_count_their_succeeded_pods(
    parallelism: int | None, completions: int | None, succeeded: int, expected: int
) -> None:
    assert reclaimable_pods(job(parallelism, completions, succeeded=succeeded)) == expected


def test_indexed_jobs_count_completed_and_failed_indexes() -> None:
    indexed = job(4, 6, succeeded=0, completedIndexes="0-2", failedIndexes="5")
    indexed["spec"]["completionMode"] = "Indexed"
    assert reclaimable_pods(indexed) == 2  # 4 terminal, 2 to run on 4 slots
    # succeeded is not what an Indexed Job is counted by
    indexed["status"] = {"succeeded": 6}
    assert reclaimable_pods(indexed) == 0


def test_terminal_indexes_are_a_union_below_completions() -> None:
    assert terminal_indexes("", "", 5) == 0
    assert terminal_indexes("0,2-3", "", 5) == 3
    assert terminal_indexes("0-3", "2-4", 10) == 5  # overlapping lists count once
    assert terminal_indexes("0-9", "", 4) == 4  # beyond completions: scaled down
    assert terminal_indexes("7", "", 4) == 0
    assert terminal_indexes("1,x,3-2,-1,4", "", 10) == 2  # malformed parts skipped
    assert terminal_indexes("0-3", "", 0) == 0
