"""A JobSet -> its Workload as Kueue's JobSet integration makes it, and what the
integration reads of a raw JobSet (docs/cluster.md#jobsets)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.api.errors import ApiError
from scheduler.api.jobset import (
    ended,
    jobset_workload,
    pods_ready,
    replicated_jobs,
)
from scheduler.api.jobset_model import JobSet
from scheduler.api.priority import PriorityClass, WorkloadPriorityClass
from scheduler.api.workload_names import workload_name

EXAMPLE = (
    Path(__file__).resolve().parents[4]
    / "shared/kueue-examples/v0.19.2/site/static/examples/jobs/sample-jobset.yaml"
)
PC = PriorityClass.model_validate(
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "pc-high"},
        "value": 500,
    }
)
WPC = WorkloadPriorityClass.model_validate(
    {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "wpc"},
        "value": 9000,
    }
)


def replicated(name: str, replicas: int, **job_spec: Any) -> dict[str, Any]:
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                **job_spec,
                "template": {
                    "spec": {
                        "containers": [
                            {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}
                        ]
                    }
                },
            }
        },
    }


def jobset(*jobs: dict[str, Any], **labels: str) -> JobSet:
    return JobSet.model_validate(
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "train", "namespace": "ml", "uid": "u-1", "labels": labels},
            "spec": {"replicatedJobs": list(jobs)},
        }
    )


@pytest.mark.skipif(not EXAMPLE.is_file(), reason="Kueue's examples are not beside the project")
def test_kueues_sample_jobset_makes_a_pod_set_per_replicated_job() -> None:
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["metadata"]["name"] = "sleep-job-x"  # generateName, as the server fills it
    workload = jobset_workload(JobSet.model_validate(doc), {}, {})
    assert workload.spec.queue_name == "user-queue"
    assert [(p.name, p.count) for p in workload.spec.pod_sets] == [("workers", 1), ("driver", 1)]
    requests = [p.template.spec.containers[0].resources.requests for p in workload.spec.pod_sets]
    assert [str(r["cpu"]) for r in requests] == ["1", "2"]


def test_counts_are_replicas_times_pods_per_replica() -> None:
    """A replica's Pods: its Job's parallelism (1 unset), at most its completions."""
    made = jobset_workload(
        jobset(
            replicated("a", 3, parallelism=4, completions=2),
            replicated("b", 2, parallelism=2),
            replicated("c", 1),
        ),
        {},
        {},
    )
    assert [(p.name, p.count) for p in made.spec.pod_sets] == [("a", 6), ("b", 4), ("c", 1)]


def test_named_and_owned_by_kueues_rule() -> None:
    made = jobset_workload(jobset(replicated("a", 1), **{"kueue.x-k8s.io/queue-name": "q"}), {}, {})
    assert made.metadata.name == workload_name("JobSet", "jobset.x-k8s.io", "train", "u-1")
    assert made.metadata.name.startswith("jobset-train-")
    [owner] = made.metadata.owner_references
    assert (owner["apiVersion"], owner["kind"], owner["controller"]) == (
        "jobset.x-k8s.io/v1alpha2",
        "JobSet",
        True,
    )


def test_priority_from_the_label_else_the_first_template_naming_a_class() -> None:
    second = replicated("b", 1)
    second["template"]["spec"]["template"]["spec"]["priorityClassName"] = "pc-high"
    pods = jobset(replicated("a", 1), second)
    made = jobset_workload(pods, {}, {"pc-high": PC})
    assert (made.spec.priority, made.spec.priority_class_name) == (500, "pc-high")
    labelled = jobset(replicated("a", 1), second, **{"kueue.x-k8s.io/priority-class": "wpc"})
    made = jobset_workload(labelled, {"wpc": WPC}, {"pc-high": PC})
    assert (made.spec.priority, made.spec.priority_class_name) == (9000, "wpc")
    with pytest.raises(ApiError) as missing:
        jobset_workload(pods, {}, {})
    assert missing.value.errors[0].path == (
        "spec.replicatedJobs[1].template.spec.template.spec.priorityClassName"
    )


def test_what_the_integration_reads_of_a_raw_jobset() -> None:
    raw: dict[str, Any] = {
        "spec": {"replicatedJobs": [{"name": "a", "replicas": 2}, {"name": "b"}, "junk"]},
        "status": {
            "replicatedJobsStatus": [
                {"name": "a", "ready": 1, "succeeded": 1},
                {"name": "b", "ready": 0},
            ],
            "conditions": [{"type": "Failed", "status": "True"}],
        },
    }
    assert [r["name"] for r in replicated_jobs(raw)] == ["a", "b"]
    assert not pods_ready(raw)  # 2 of 3 replicas
    raw["status"]["replicatedJobsStatus"][1]["ready"] = 1
    assert pods_ready(raw)
    assert ended(raw) == (True, True)
    raw["status"]["conditions"].append({"type": "Completed", "status": "True"})
    assert ended(raw) == (True, False)
    assert ended({}) == (False, False)
