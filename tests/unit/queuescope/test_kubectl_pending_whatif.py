"""`kubectl pending what-if` without a cluster: reading the file, choosing the LocalQueue,
rendering the answer; the real round trip is in tests/e2e/test_whatif.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from queuescope import kubectl_pending, kubectl_pending_whatif
from queuescope.kubectl_pending_whatif import path_of, queue_of, read_object, text

ANSWER = {
    "kind": "WorkloadWhatIf",
    "workload": {
        "name": "job-train-1a2b3",
        "namespace": "team-a",
        "priority": 100,
        "localQueueName": "lq-a",
        "clusterQueueName": "cq-a",
    },
    "evaluatedAt": "2026-01-01T00:00:00Z",
    "decision": "Preempting",
    "admitted": False,
    "atHead": True,
    "positionInClusterQueue": 0,
    "positionInLocalQueue": 0,
    "pendingWorkloadsInClusterQueue": 3,
    "pendingWorkloadsInLocalQueue": 1,
    "assignment": {
        "mode": "Preempt",
        "podSets": [
            {
                "name": "main",
                "count": 2,
                "flavors": {"cpu": "default"},
                "resourceUsage": {"cpu": "4"},
            }
        ],
    },
    "borrowing": [{"flavor": "default", "resource": "cpu", "amount": "1"}],
    "preemption": {
        "victims": [
            {
                "namespace": "team-a",
                "name": "low",
                "clusterQueueName": "cq-a",
                "priority": 1,
                "reason": "InClusterQueue",
            }
        ],
        "hiddenVictims": 2,
    },
}


def test_the_text_names_every_part_of_the_answer() -> None:
    lines = text(ANSWER).splitlines()
    assert lines == [
        "Workload:   team-a/job-train-1a2b3 (priority 100)",
        "LocalQueue: lq-a -> ClusterQueue cq-a",
        "Decision:   Preempting: the next scheduling cycle would evict workloads to make "
        "room, then admit it",
        "Position:   0 of 3 in the ClusterQueue, 0 of 1 in the LocalQueue (0-based)",
        "Flavors:    main x2: cpu=default (4)",
        "Borrowing:  1 cpu of flavor default from the cohort",
        "Preempts:   team-a/low (priority 1, InClusterQueue); 2 more in namespaces you may "
        "not list",
    ]


def test_a_pending_answer_shows_why_and_when() -> None:
    answer = {
        **ANSWER,
        "decision": "Pending",
        "borrowing": [],
        "pendingReason": {"message": "couldn't assign flavors to pod set main: ..."},
        "estimatedStart": {
            "p50": "2026-01-01T00:10:00Z",
            "low": "2026-01-01T00:05:00Z",
            "high": "2026-01-01T00:30:00Z",
            "method": "rate",
            "madeAt": "2026-01-01T00:00:00Z",
            "snapshot": "7",
        },
    }
    del answer["preemption"]
    out = text(answer)
    assert "Why:        couldn't assign flavors to pod set main: ..." in out
    assert (
        "Start:      about 2026-01-01T00:10:00Z, between 2026-01-01T00:05:00Z and "
        "2026-01-01T00:30:00Z (rate)" in out
    )


def test_the_local_queue_comes_from_the_object(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: t\n"
        "  labels: {kueue.x-k8s.io/queue-name: lq-a}\n"
    )
    assert queue_of(read_object(str(job))) == "lq-a"
    assert queue_of({"kind": "Workload", "spec": {"queueName": "lq-b"}}) == "lq-b"
    assert path_of("v1beta1", "team a", "lq/x") == (
        "/apis/visibility.kueue.x-k8s.io/v1beta1/namespaces/team%20a/localqueues/lq%2Fx/whatif"
    )


def test_a_file_of_two_objects_is_refused_naming_it(tmp_path: Path) -> None:
    both = tmp_path / "both.yaml"
    both.write_text("a: 1\n---\nb: 2\n")
    with pytest.raises(kubectl_pending.PluginError, match=r"both\.yaml: expected one") as err:
        read_object(str(both))
    assert err.value.code == kubectl_pending.EXIT_USAGE


def test_the_listing_command_hands_what_if_over(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("apiVersion: batch/v1\nkind: Job\nmetadata: {name: t}\n")
    # No LocalQueue anywhere: the subcommand's own usage error, so the hook ran it.
    code = kubectl_pending.main(["what-if", "-f", str(job), "-n", "team-a"])
    assert code == kubectl_pending.EXIT_USAGE
    assert "no LocalQueue: pass --localqueue" in capsys.readouterr().err
    assert kubectl_pending_whatif.parser().prog == "kubectl pending what-if"
