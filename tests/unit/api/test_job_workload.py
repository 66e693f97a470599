"""Job -> Workload as Kueue's Job integration creates it
(docs/scheduling.md#priority-resolution)."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime

import pytest

from scheduler.api import (
    ApiError,
    Job,
    PriorityClass,
    WorkloadPriorityClass,
    job_to_workload,
    load_yaml,
    source_of,
)
from scheduler.api.job_workload import job_workload_name
from tests.unit.api.support import decode, has_error

CLASSES = """
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: wpc-high}
value: 1000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: pc-medium}
value: 100
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: default-b}
value: 7
globalDefault: true
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: default-a}
value: 5
globalDefault: true
"""


def classes() -> tuple[dict[str, WorkloadPriorityClass], dict[str, PriorityClass]]:
    wpcs: dict[str, WorkloadPriorityClass] = {}
    pcs: dict[str, PriorityClass] = {}
    for d in load_yaml(CLASSES, "classes.yaml"):
        if isinstance(d.obj, WorkloadPriorityClass):
            wpcs[d.obj.metadata.name] = d.obj
        elif isinstance(d.obj, PriorityClass):
            pcs[d.obj.metadata.name] = d.obj
    return wpcs, pcs


def job(labels: str = "", annotations: str = "{}", spec: str = "", pod: str = "") -> Job:
    obj = decode(
        textwrap.dedent(
            f"""
            apiVersion: batch/v1
            kind: Job
            metadata:
              name: sample-job
              namespace: team-a
              uid: 3b0b0c6e-0000-4000-8000-000000000001
              creationTimestamp: "2026-01-01T00:00:07Z"
              labels: {{kueue.x-k8s.io/queue-name: user-queue{labels}}}
              annotations: {annotations}
            spec:
              parallelism: 3
              {spec}
              template:
                spec:
                  restartPolicy: Never
                  {pod}
                  containers:
                  - name: main
                    resources: {{requests: {{cpu: 1}}}}
            """
        )
    )
    assert isinstance(obj, Job)
    return obj


def test_basic_conversion() -> None:
    source = job()
    wl = job_to_workload(source, {}, {})
    meta = wl.metadata
    assert meta.name == job_workload_name("sample-job", "3b0b0c6e-0000-4000-8000-000000000001")
    assert meta.name.startswith("job-sample-job-")
    assert len(meta.name) == len("job-sample-job-") + 5
    assert meta.namespace == "team-a"
    assert meta.labels == {"kueue.x-k8s.io/job-uid": "3b0b0c6e-0000-4000-8000-000000000001"}
    assert meta.creation_timestamp == datetime(2026, 1, 1, 0, 0, 7, tzinfo=UTC)
    assert meta.owner_references[0]["kind"] == "Job"
    assert meta.owner_references[0]["uid"] == "3b0b0c6e-0000-4000-8000-000000000001"
    assert wl.spec.queue_name == "user-queue"
    [pod_set] = wl.spec.pod_sets
    assert (pod_set.name, pod_set.count, pod_set.min_count) == ("main", 3, None)
    assert pod_set.template == source.spec.template
    assert source_of(wl) == source_of(source)


def test_name_is_stable_and_depends_on_uid() -> None:
    assert (
        job_to_workload(job(), {}, {}).metadata.name == job_to_workload(job(), {}, {}).metadata.name
    )
    assert job_workload_name("a", "uid-1") != job_workload_name("a", "uid-2")
    assert len(job_workload_name("x" * 300, "u")) == 253


def test_job_without_uid_gets_a_deterministic_one() -> None:
    obj = decode(
        """
        apiVersion: batch/v1
        kind: Job
        metadata: {name: j}
        spec: {template: {spec: {containers: [{name: c}]}}}
        """
    )
    assert isinstance(obj, Job)
    first, second = job_to_workload(obj, {}, {}), job_to_workload(obj, {}, {})
    assert first.metadata.labels == second.metadata.labels
    assert first.metadata.namespace == "default"
    assert first.spec.queue_name == ""


def test_count_is_parallelism_capped_by_completions() -> None:
    assert job_to_workload(job(spec="completions: 2"), {}, {}).spec.pod_sets[0].count == 2
    assert job_to_workload(job(spec="completions: 10"), {}, {}).spec.pod_sets[0].count == 3


def test_min_parallelism_annotation() -> None:
    wl = job_to_workload(job(annotations="{kueue.x-k8s.io/job-min-parallelism: '2'}"), {}, {})
    assert wl.spec.pod_sets[0].min_count == 2


@pytest.mark.parametrize("value", ["'0'", "'3'", "'x'"])
def test_invalid_min_parallelism_rejects_the_job(value: str) -> None:
    text = textwrap.dedent(
        f"""
        apiVersion: batch/v1
        kind: Job
        metadata:
          name: j
          annotations: {{kueue.x-k8s.io/job-min-parallelism: {value}}}
        spec: {{parallelism: 3, template: {{spec: {{containers: [{{name: c}}]}}}}}}
        """
    )
    has_error(text, "metadata.annotations[kueue.x-k8s.io/job-min-parallelism]", "")


class TestPriority:
    def test_workload_priority_class_label_wins(self) -> None:
        wpcs, pcs = classes()
        wl = job_to_workload(
            job(
                labels=", kueue.x-k8s.io/priority-class: wpc-high",
                pod="priorityClassName: pc-medium",
            ),
            wpcs,
            pcs,
        )
        assert (wl.spec.priority, wl.spec.priority_class_name, wl.spec.priority_class_source) == (
            1000,
            "wpc-high",
            "kueue.x-k8s.io/workloadpriorityclass",
        )

    def test_pod_priority_class(self) -> None:
        wpcs, pcs = classes()
        wl = job_to_workload(job(pod="priorityClassName: pc-medium"), wpcs, pcs)
        assert (wl.spec.priority, wl.spec.priority_class_name, wl.spec.priority_class_source) == (
            100,
            "pc-medium",
            "scheduling.k8s.io/priorityclass",
        )

    def test_global_default_lowest_value(self) -> None:
        wpcs, pcs = classes()
        wl = job_to_workload(job(), wpcs, pcs)
        assert (wl.spec.priority, wl.spec.priority_class_name, wl.spec.priority_class_source) == (
            5,
            "default-a",
            "scheduling.k8s.io/priorityclass",
        )

    def test_nothing_means_zero(self) -> None:
        wl = job_to_workload(job(), {}, {})
        assert (wl.spec.priority, wl.spec.priority_class_name, wl.spec.priority_class_source) == (
            0,
            "",
            "",
        )

    def test_missing_workload_priority_class(self) -> None:
        _, pcs = classes()
        with pytest.raises(ApiError) as info:
            job_to_workload(job(labels=", kueue.x-k8s.io/priority-class: nope"), {}, pcs)
        err = info.value
        assert err.path == "metadata.labels[kueue.x-k8s.io/priority-class]"
        assert err.detail == 'WorkloadPriorityClass "nope" not found'
        assert (err.source, err.index) == ("test.yaml", 0)
        assert 'Job "team-a/sample-job"' in str(err)

    def test_missing_pod_priority_class(self) -> None:
        wpcs, pcs = classes()
        with pytest.raises(ApiError) as info:
            job_to_workload(job(pod="priorityClassName: nope"), wpcs, pcs)
        assert info.value.path == "spec.template.spec.priorityClassName"
        assert info.value.detail == 'PriorityClass "nope" not found'

    def test_error_can_be_relocated(self) -> None:
        with pytest.raises(ApiError) as info:
            job_to_workload(job(pod="priorityClassName: nope"), {}, {})
        moved = info.value.at("jobs/j.yaml", 4)
        assert str(moved).startswith(
            'jobs/j.yaml: document 4 (Job "team-a/sample-job"): spec.template'
        )
