"""What the store keeps of a Workload: the fields its readers use, and a digest that
changes with everything but the status and the bookkeeping a status write bumps."""

from __future__ import annotations

import copy
from typing import Any

from scheduler.runtime.kube.records import (
    WorkloadRecord,
    content_digest,
    slim_job,
    slim_pod,
    slim_statefulset,
)
from scheduler.runtime.kube.resources import JOBS, WORKLOADS


def workload() -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": "w",
            "namespace": "team",
            "uid": "u-1",
            "resourceVersion": "7",
            "generation": 1,
            "labels": {"kueue.x-k8s.io/job-uid": "job-1"},
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "job-1"}
            ],
        },
        "spec": {
            "queueName": "main",
            "active": False,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "nodeSelector": {"pool": "a"},
                            "tolerations": [{"key": "gpu", "operator": "Exists", "value": ""}],
                            "containers": [{"name": "c", "image": "busybox"}],
                        }
                    },
                }
            ],
        },
        "status": {"conditions": [{"type": "Finished", "status": "True", "reason": "x"}]},
    }


def test_a_record_keeps_what_the_writers_and_the_job_integration_read() -> None:
    r = WorkloadRecord.of(workload())
    assert (r.key, r.namespace, r.name, r.uid, r.resource_version) == (
        "team/w", "team", "w", "u-1", "7",
    )  # fmt: skip
    assert r.active is False
    assert r.job_uid == "job-1"
    assert [(o.kind, o.name) for o in r.owners] == [("Job", "j")]
    # The empty toleration value is dropped, as a Job returned by the server has none.
    assert r.placement == ({"pool": "a"}, [{"key": "gpu", "operator": "Exists"}])
    assert r.condition("Finished") is not None and r.condition("Admitted") is None
    body = r.status_body({"conditions": []})
    assert body["metadata"] == {
        "name": "w", "namespace": "team", "uid": "u-1", "resourceVersion": "7",
    }  # fmt: skip
    assert "spec" not in body and body["status"] == {"conditions": []}


def test_the_owner_is_found_by_kind_and_api_version() -> None:
    obj = workload()
    volcano = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "v", "uid": "v-1"}
    obj["metadata"]["ownerReferences"].insert(0, volcano)
    r = WorkloadRecord.of(obj)
    job = r.owner(JOBS)
    assert job is not None and (job.name, job.uid) == ("j", "job-1")
    assert r.owner(WORKLOADS) is None
    del obj["metadata"]["ownerReferences"][1]
    assert WorkloadRecord.of(obj).owner(JOBS) is None  # a Job of another group is not one


def test_an_empty_status_and_no_placement_keep_nothing() -> None:
    obj = workload()
    obj["status"] = {}
    del obj["spec"]["podSets"][0]["template"]["spec"]["nodeSelector"]
    del obj["spec"]["podSets"][0]["template"]["spec"]["tolerations"]
    r = WorkloadRecord.of(obj)
    assert r.status is None and r.placement is None


def test_the_digest_ignores_status_and_write_bookkeeping_only() -> None:
    base = workload()
    echo = copy.deepcopy(base)
    echo["status"] = {"admission": {"clusterQueue": "cq"}}
    echo["metadata"]["resourceVersion"] = "8"
    echo["metadata"]["generation"] = 2
    echo["metadata"]["managedFields"] = [{"manager": "x"}]
    assert content_digest(echo) == content_digest(base)
    for part, key, value in (
        ("spec", "priority", 3),
        ("metadata", "labels", {"extra": "1"}),
        ("metadata", "annotations", {"a": "b"}),
    ):
        changed = copy.deepcopy(base)
        changed[part][key] = value
        assert content_digest(changed) != content_digest(base)


def test_the_resource_version_is_given_back_as_it_came() -> None:
    for version in ("7", "5105", "007", "", "abc", "12a"):
        obj = workload()
        obj["metadata"]["resourceVersion"] = version
        r = WorkloadRecord.of(obj)
        assert r.resource_version == version
        assert r.status_body({})["metadata"]["resourceVersion"] == version
    # A plain decimal is kept as an int (half the bytes of the string).
    assert WorkloadRecord.of(workload()).version == 7


def _merged(kept: dict[str, Any], dropped: dict[str, Any]) -> dict[str, Any]:
    """`kept` with `dropped`'s keys added at every depth (lists: `dropped`'s wins)."""
    out = copy.deepcopy(kept)
    for key, value in dropped.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def test_a_slim_job_keeps_what_the_job_integration_reads_and_not_the_containers() -> None:
    condition = {"type": "Complete", "status": "True", "reason": "Done"}
    kept: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "j",
            "namespace": "team",
            "uid": "u-1",
            "resourceVersion": "9",
            "labels": {"kueue.x-k8s.io/queue-name": "main"},
        },
        "spec": {
            "suspend": True,
            "parallelism": 3,
            "completions": 5,
            "completionMode": "Indexed",
            "template": {
                "metadata": {"labels": {"app": "a"}, "annotations": {"n": "1"}},
                "spec": {
                    "nodeSelector": {"pool": "a"},
                    "tolerations": [{"key": "gpu", "operator": "Exists"}],
                },
            },
        },
        "status": {
            "ready": 1,
            "succeeded": 2,
            "startTime": "2026-01-01T00:00:01Z",
            "completedIndexes": "0,2",
            "failedIndexes": "4",
            "conditions": [condition],
        },
    }
    dropped: dict[str, Any] = {
        "metadata": {
            "annotations": {"big": "x" * 100},
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "backoffLimit": 6,
            "template": {
                "spec": {
                    "containers": [{"name": "c", "image": "x", "resources": {}}],
                    "restartPolicy": "Never",
                },
            },
        },
        # Only the conditions the integration reads are kept.
        "status": {"conditions": [{"type": "SuccessCriteriaMet", "status": "True"}, condition]},
    }
    job = _merged(kept, dropped)
    assert job["spec"]["template"]["spec"]["containers"]  # the input really has them
    assert slim_job(job) == kept
    # Empty parts are left out.
    bare = {"metadata": {"name": "k"}, "spec": {"template": {"spec": {"containers": []}}}}
    assert slim_job(bare) == {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "k"}}
    # A JobSet's Job keeps its controller's reference; no other owner is kept.
    owned = {
        "metadata": {
            "name": "k",
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "CronJob", "name": "c", "uid": "1"},
                {
                    "apiVersion": "jobset.x-k8s.io/v1alpha2",
                    "kind": "JobSet",
                    "name": "js",
                    "uid": "2",
                    "controller": True,
                    "blockOwnerDeletion": True,
                },
            ],
        }
    }
    assert slim_job(owned)["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "name": "js",
            "uid": "2",
            "controller": True,
        }
    ]


def test_a_slim_pod_keeps_what_the_pod_integration_reads() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "team",
            "uid": "u",
            "resourceVersion": "3",
            "labels": {"kueue.x-k8s.io/managed": "true"},
            "finalizers": ["kueue.x-k8s.io/managed"],
            "deletionTimestamp": "2026-01-01T00:00:00Z",
            "ownerReferences": [
                {"kind": "ReplicaSet", "name": "other", "uid": "r"},
                {
                    "apiVersion": "apps/v1",
                    "kind": "StatefulSet",
                    "name": "web",
                    "uid": "s",
                    "controller": True,
                    "blockOwnerDeletion": True,
                },
            ],
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": '{"kind": "Pod"}',
                "team": "a",
            },
        },
        "spec": {
            "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
            "nodeSelector": {"pool": "a"},
            "containers": [{"name": "c", "image": "x"}],
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "PodScheduled", "status": "True"},
            ],
            "containerStatuses": [{"name": "c"}],
        },
    }
    slim = slim_pod(pod)
    # Only the controller, as much as tells which StatefulSet's Pod it is.
    assert slim["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "name": "web",
            "uid": "s",
            "controller": True,
        }
    ]
    assert slim["metadata"]["finalizers"] == ["kueue.x-k8s.io/managed"]
    assert slim["metadata"]["annotations"] == {"team": "a"}
    assert pod["metadata"]["annotations"]["team"] == "a"  # the object is left as it was
    assert "kubectl.kubernetes.io/last-applied-configuration" in pod["metadata"]["annotations"]
    assert slim["spec"] == {
        "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
        "nodeSelector": {"pool": "a"},
    }
    assert slim["status"] == {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}],
    }


def test_a_slim_statefulset_keeps_what_its_integration_reads() -> None:
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": "web",
            "namespace": "team",
            "uid": "s",
            "resourceVersion": "7",
            "generation": 2,
            "labels": {"kueue.x-k8s.io/queue-name": "main"},
            "annotations": {"note": "x" * 100},
        },
        "spec": {
            "replicas": 3,
            "serviceName": "web",
            "template": {
                "metadata": {
                    "labels": {"app": "web"},
                    "annotations": {"kueue.x-k8s.io/pod-suspending-parent": "statefulset"},
                },
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
        "status": {"replicas": 3, "readyReplicas": 2, "currentRevision": "web-1"},
    }
    assert slim_statefulset(sts) == {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": "web",
            "namespace": "team",
            "uid": "s",
            "resourceVersion": "7",
            "generation": 2,
            "labels": {"kueue.x-k8s.io/queue-name": "main"},
        },
        "spec": {
            "replicas": 3,
            "template": {
                "metadata": {"annotations": {"kueue.x-k8s.io/pod-suspending-parent": "statefulset"}}
            },
        },
        "status": {"replicas": 3, "readyReplicas": 2},
    }
