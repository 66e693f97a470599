"""The runtime's what-if (scheduler/runtime/what_if.py): a request body in, through the
same decoding and Job integration as every ingested object, JSON out."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
import yaml

from scheduler.api.decode import decode_object
from scheduler.api.dry_run import DryRunError
from scheduler.api.integrations import PLAIN_PODS, Integrations
from scheduler.api.priority import WorkloadPriorityClass
from scheduler.api.workload_names import workload_name
from scheduler.runtime.what_if import WhatIfService
from tests.unit.core.builders import Cluster, flavor, local_queue, namespace, simple_cq, workload
from tests.unit.runtime.support import jobset, statefulset

WPC = {
    "apiVersion": "kueue.x-k8s.io/v1beta1",
    "kind": "WorkloadPriorityClass",
    "metadata": {"name": "urgent"},
    "value": 1000,
}


def _service() -> tuple[Cluster, WhatIfService]:
    c = Cluster()
    c.apply(namespace("team-a"), flavor("default"), simple_cq("cq-a", 4))
    c.apply(local_queue("team-a", "lq-a", "cq-a"))
    c.apply(workload("team-a", "taken", "lq-a", {"cpu": "1"}))
    c.advance(10)  # what is asked about is created after `taken`
    wpc = decode_object(WPC)
    assert isinstance(wpc, WorkloadPriorityClass)
    return c, WhatIfService(c.s, lambda: ({"urgent": wpc}, {}))


def _job(**labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"generateName": "train-", "labels": labels},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
                }
            }
        },
    }


def test_a_job_gets_the_request_namespace_queue_and_its_priority_class() -> None:
    _, service = _service()
    body = yaml.safe_dump(_job(**{"kueue.x-k8s.io/priority-class": "urgent"})).encode()
    answer = service.dry_run("team-a", "lq-a", body)
    assert answer["workload"]["namespace"] == "team-a"
    assert answer["workload"]["localQueueName"] == "lq-a"
    assert answer["workload"]["priority"] == 1000
    assert answer["workload"]["name"].startswith("job-train-what-if-")
    assert answer["decision"] == "Admitted"
    assert answer["positionInClusterQueue"] == 0  # before `taken`, of priority 0


def test_a_missing_priority_class_is_422_naming_the_label() -> None:
    _, service = _service()
    body = json.dumps(_job(**{"kueue.x-k8s.io/priority-class": "nope"})).encode()
    with pytest.raises(DryRunError) as err:
        service.dry_run("team-a", "lq-a", body)
    assert err.value.code == 422
    assert err.value.causes[0].field == "metadata.labels[kueue.x-k8s.io/priority-class]"


def test_a_v1beta2_workload_named_like_an_existing_one_is_evaluated_as_new() -> None:
    c, service = _service()
    doc = workload("team-a", "taken", None, {"cpu": "1"})
    doc["apiVersion"] = "kueue.x-k8s.io/v1beta2"
    answer = service.dry_run("team-a", "lq-a", json.dumps(doc).encode())
    assert answer["workload"]["name"] == "taken-what-if"
    assert answer["positionInClusterQueue"] == 1
    assert answer["pendingWorkloadsInClusterQueue"] == 2
    assert set(c.s.objects.workloads) == {"team-a/taken"}


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"\xff\xfe", 400),
        (b"[1, 2]", 400),
        (b"", 400),
        (b'{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}', 422),
        # a "billion laughs": nine aliases nested would expand to 10^9 strings
        (b"a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n", 400),
        (b"[" * 5000 + b"]" * 5000, 400),
        (b'{"a":' * 150 + b"1" + b"}" * 150, 400),
    ],
)
def test_bodies_that_are_not_a_job_or_workload(body: bytes, code: int) -> None:
    _, service = _service()
    with pytest.raises(DryRunError) as err:
        service.dry_run("team-a", "lq-a", body)
    assert err.value.code == code


def _pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "sleep"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
    }


def test_a_pod_is_asked_about_with_the_pod_integration_on() -> None:
    c, _ = _service()
    service = WhatIfService(c.s, lambda: ({}, {}), integrations=PLAIN_PODS)
    answer = service.dry_run("team-a", "lq-a", json.dumps(_pod()).encode())
    assert answer["workload"]["name"].startswith("pod-sleep-")
    assert answer["workload"]["localQueueName"] == "lq-a"
    off = WhatIfService(c.s, lambda: ({}, {}))
    with pytest.raises(DryRunError) as err:
        off.dry_run("team-a", "lq-a", json.dumps(_pod()).encode())
    assert err.value.code == 422
    assert "does not list `pod` in integrations.frameworks" in str(err.value)


def _statefulset(replicas: int = 3, queue: str | None = None) -> bytes:
    return yaml.safe_dump(statefulset("team-a", "web", queue, replicas=replicas)).encode()


def test_a_statefulset_is_asked_about_with_the_statefulset_integration_on() -> None:
    """docs/simulate.md#statefulsets: its one Workload of all its replicas, named with
    the stand-in uid of a manifest without one (as a Job's), so the same every time."""
    c, _ = _service()
    service = WhatIfService(c.s, lambda: ({}, {}), integrations=Integrations(statefulsets=True))
    answer = service.dry_run("team-a", "lq-a", _statefulset())
    uid = str(uuid.uuid5(uuid.NAMESPACE_URL, "apps/v1/StatefulSet/team-a/web"))
    assert answer["workload"]["name"] == workload_name("StatefulSet", "apps", "web", uid)
    assert answer["workload"]["localQueueName"] == "lq-a"
    assert answer["positionInClusterQueue"] == 1  # behind `taken`, of the same priority
    assert answer["assignment"]["podSets"] == [
        {"name": "main", "count": 3, "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "3"}}
    ]
    # Five replicas are more than the ClusterQueue holds: all or none.
    blockers = service.dry_run("team-a", "lq-a", _statefulset(5))["pendingReason"]["blockers"]
    assert "current podset request (5) > maximum capacity (4)" in blockers[0]["message"]
    with pytest.raises(DryRunError) as err:
        service.dry_run("team-a", "lq-a", _statefulset(0))
    assert err.value.code == 422
    assert err.value.causes[0].field == "spec.replicas"
    with pytest.raises(DryRunError) as err:
        service.dry_run("team-a", "lq-a", _statefulset(queue="other"))
    assert err.value.causes[0].field == "metadata.labels[kueue.x-k8s.io/queue-name]"
    off = WhatIfService(c.s, lambda: ({}, {}), integrations=PLAIN_PODS)
    with pytest.raises(DryRunError) as err:
        off.dry_run("team-a", "lq-a", _statefulset())
    assert err.value.code == 422
    assert "does not list `statefulset` in integrations.frameworks" in str(err.value)


def test_a_jobset_is_asked_about_with_the_jobset_integration_on() -> None:
    """docs/simulate.md#jobsets: its one Workload of a pod set per replicated Job."""
    c, _ = _service()
    service = WhatIfService(c.s, lambda: ({}, {}), integrations=Integrations(jobsets=True))
    body = yaml.safe_dump(jobset("team-a", "train", None)).encode()
    answer = service.dry_run("team-a", "lq-a", body)
    uid = str(uuid.uuid5(uuid.NAMESPACE_URL, "jobset.x-k8s.io/v1alpha2/JobSet/team-a/train"))
    assert answer["workload"]["name"] == workload_name("JobSet", "jobset.x-k8s.io", "train", uid)
    assert [p["name"] for p in answer["assignment"]["podSets"]] == ["workers", "driver"]
    assert [p["count"] for p in answer["assignment"]["podSets"]] == [2, 1]
    off = WhatIfService(c.s, lambda: ({}, {}))
    with pytest.raises(DryRunError) as err:
        off.dry_run("team-a", "lq-a", body)
    assert err.value.code == 422
    assert "does not list `jobset.x-k8s.io/jobset` in integrations.frameworks" in str(err.value)
