"""The Workload of a single Pod (docs/cluster.md#plain-pods) and Kueue's naming rule,
shared with Jobs (docs/scheduling.md#workload-names)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scheduler.api import ApiError, PriorityClass, WorkloadPriorityClass
from scheduler.api.job_workload import job_workload_name
from scheduler.api.live import decode_live_as
from scheduler.api.plain_pod import Pod
from scheduler.api.pod_workload import pod_to_workload, pod_workload_name
from scheduler.api.workload_names import workload_name
from tests.unit.api.support import decode

UID = "11111111-2222-3333-4444-555555555555"


def test_names_follow_kueues_rule() -> None:
    # Worked out with sha1sum: printf 'Pod\n\nsleep\n<uid>' | sha1sum, and
    # printf 'Job\nbatch\nsample-job\n<uid>' | sha1sum.
    assert pod_workload_name("sleep", UID) == "pod-sleep-bbcc1"
    job_uid = "3b0b0c6e-0000-4000-8000-000000000001"
    assert job_workload_name("sample-job", job_uid) == "job-sample-job-902a1"
    assert len(workload_name("Pod", "", "x" * 300, "u")) == 253
    assert workload_name("Pod", "", "a", "u-1") != workload_name("Pod", "", "a", "u-2")


def raw_pod(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "sleep",
            "namespace": "team",
            "uid": UID,
            "creationTimestamp": "2026-01-01T00:00:07Z",
            "labels": {"kueue.x-k8s.io/queue-name": "main"},
            "managedFields": [{"manager": "kubectl"}],
        },
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "resources": {"requests": {"cpu": "500m"}},
                    "livenessProbe": {"exec": {"command": ["true"]}},
                }
            ],
            "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
            "volumes": [{"name": "v", "emptyDir": {}}],
            **spec,
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


def test_a_pod_becomes_one_pod_set_owned_by_the_pod() -> None:
    pod = decode_live_as(Pod, raw_pod(), source="v1/pods")
    wl = pod_to_workload(pod, {}, {})
    meta = wl.metadata
    assert (meta.name, meta.namespace) == ("pod-sleep-bbcc1", "team")
    assert meta.labels == {"kueue.x-k8s.io/job-uid": UID}
    assert meta.owner_references == [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "sleep",
            "uid": UID,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    [pod_set] = wl.spec.pod_sets
    assert (pod_set.name, pod_set.count) == ("main", 1)
    spec = pod_set.template.spec.to_dict()
    # The whole spec, as Kueue copies it (fields the model does not type are kept).
    assert spec["volumes"] == [{"name": "v", "emptyDir": {}}]
    assert spec["containers"][0]["livenessProbe"] == {"exec": {"command": ["true"]}}
    assert wl.spec.queue_name == "main" and wl.spec.priority == 0


def test_priority_from_the_label_then_the_pods_class() -> None:
    wpc = decode(
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\n"
        "metadata: {name: high}\nvalue: 100\n"
    )
    pc = decode(
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: batch}\nvalue: 7\n"
    )
    assert isinstance(wpc, WorkloadPriorityClass) and isinstance(pc, PriorityClass)
    raw = raw_pod(priorityClassName="batch")
    by_class = pod_to_workload(decode_live_as(Pod, raw, source="t"), {}, {"batch": pc})
    assert (by_class.spec.priority, by_class.spec.priority_class_source) == (
        7,
        "scheduling.k8s.io/priorityclass",
    )
    labelled = copy.deepcopy(raw)
    labelled["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high"
    by_label = pod_to_workload(decode_live_as(Pod, labelled, source="t"), {"high": wpc}, {})
    assert by_label.spec.priority == 100
    with pytest.raises(ApiError, match=r'spec\.priorityClassName: PriorityClass "batch" not found'):
        pod_to_workload(decode_live_as(Pod, raw, source="t"), {}, {})


def test_a_pod_without_containers_is_reported_with_its_field() -> None:
    raw = raw_pod()
    del raw["spec"]["containers"]
    with pytest.raises(ApiError, match=r"spec\.containers") as info:
        decode_live_as(Pod, raw, source="v1/pods")
    assert (info.value.kind, info.value.name) == ("Pod", "sleep")
