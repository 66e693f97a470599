"""The `pod` integration with real Pods (docs/cluster.md#plain-pods): the webhooks of
manifests/webhooks in force on kube-apiserver, kube-scheduler binding, kwok running.

The server runs with `integrations.frameworks: [batch/job, pod]`:
* a Pod naming a LocalQueue is stored behind the gate `kueue.x-k8s.io/admission` with the
  label and finalizer `kueue.x-k8s.io/managed`; its Workload is admitted, the gate lifted
  with the flavor's node labels, kube-scheduler binds it to that flavor's Node, kwok runs
  it to success; the Workload finishes `Succeeded` and the finalizer is released;
* a Pod beyond the quota stays gated (kube-scheduler never sees it), relabelled to
  another LocalQueue its Workload follows, and deleting it finishes its Workload and lets
  it go;
* a Pod of higher priority preempts a running one: the victim gets the
  `TerminationTarget` condition and is deleted, the urgent one runs;
* Kueue v0.19.2's own example Pod (`pods-kueue/kueue-pod.yaml`, applied unchanged but for
  its namespace) is admitted and runs (its pod group example: test_pod_groups.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.bulk import server_metrics
from tests.e2e.cluster import ClusterModeServer
from tests.e2e.harness import ControlPlane, wait_for
from tests.e2e.nodes import RUN_FOR_ANNOTATION
from tests.e2e.pods import (
    GATE,
    KUEUE_EXAMPLES,
    MANAGED,
    QUEUE_LABEL,
    IntegrationSetup,
    ObjectRef,
    condition,
    create_pod,
    integration_fixtures,
    integrations_config,
    pod_test_queues,
    stored,
    wait_events,
    wait_object,
)

pytestmark = pytest.mark.realcluster

NS = "plain-pods-e2e"
ON_DEMAND = {"type": "kwok", "cloud.example.com/capacity": "on-demand"}
CONFIG = integrations_config("batch/job", "pod")
POD_EXAMPLES = KUEUE_EXAMPLES / "pods-kueue"
# Kueue's own Pod examples name the LocalQueue `user-queue` and ask for 3 CPUs.
QUEUES = pod_test_queues(NS, "plain-pods", "3", "2")


def pod(
    name: str,
    *,
    cpu: str = "1",
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {QUEUE_LABEL: "lq-plain-pods", **(labels or {})},
            "annotations": annotations or {},
        },
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": {"type": "kwok"},
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
            ],
        },
    }


def stored_pod(plane: ControlPlane, name: str) -> dict[str, Any] | None:
    return stored(plane, ObjectRef("pod", NS, name))


def wait_pod(plane: ControlPlane, name: str, what: str, test: Any) -> dict[str, Any]:
    return wait_object(plane, ObjectRef("pod", NS, name), what, test)


def wait_gone(plane: ControlPlane, name: str) -> None:
    wait_for(
        lambda: True if stored_pod(plane, name) is None else None,
        timeout=90,
        what=f"pod {name} gone",
        interval=0.3,
    )


def workload_of_pod(plane: ControlPlane, name: str, what: str, test: Any) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        for wl in plane.get_json("workloads.kueue.x-k8s.io", "-n", NS)["items"]:
            owners = wl["metadata"].get("ownerReferences") or []
            if any(o["kind"] == "Pod" and o["name"] == name for o in owners) and test(wl):
                return dict(wl)
        return None

    result: dict[str, Any] = wait_for(probe, timeout=90, what=f"workload of {name} {what}")
    return result


def _gated(plane: ControlPlane) -> bool | None:
    """Is a Pod that names a LocalQueue stored gated (our webhook in force)?"""
    result = create_pod(plane, pod("probe"), dry_run=True)
    if result.returncode != 0:
        return None
    gates = json.loads(result.stdout)["spec"].get("schedulingGates") or []
    return True if GATE in gates else None


SETUP = IntegrationSetup(CONFIG, NS, QUEUES, owners="pods", in_force=_gated)
server, plane = integration_fixtures(SETUP)


def test_a_pod_waits_behind_its_gate_then_runs_on_its_flavor_and_finishes(
    plane: ControlPlane, server: ClusterModeServer
) -> None:
    result = create_pod(plane, pod("short", annotations={RUN_FOR_ANNOTATION: "2s"}))
    assert result.returncode == 0, result.stderr
    created = json.loads(result.stdout)
    # As stored by kube-apiserver, after our mutating webhook.
    assert created["spec"]["schedulingGates"] == [GATE]
    assert created["metadata"]["finalizers"] == [MANAGED]
    assert created["metadata"]["labels"][MANAGED] == "true"

    running = wait_pod(plane, "short", "bound", lambda p: p["spec"].get("nodeName"))
    assert running["spec"]["nodeSelector"] == ON_DEMAND
    assert running["spec"]["nodeName"].startswith("kwok-on-demand")
    assert not running["spec"].get("schedulingGates")
    labels = running["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/podset"] == "main"
    assert labels["kueue.x-k8s.io/local-queue-name"] == "lq-plain-pods"
    assert labels["kueue.x-k8s.io/cluster-queue-name"] == "cq-plain-pods"

    wl = workload_of_pod(plane, "short", "finished", lambda w: condition(w, "Finished"))
    assert wl["metadata"]["name"].startswith("pod-short-")
    assert wl["status"]["admission"]["podSetAssignments"][0]["flavors"] == {"cpu": "on-demand"}
    assert condition(wl, "Finished")["reason"] == "Succeeded"  # type: ignore[index]
    done = wait_pod(plane, "short", "released", lambda p: not p["metadata"].get("finalizers"))
    assert done["status"]["phase"] == "Succeeded"
    events = wait_events(plane, NS, "Pod", "short", ["CreatedWorkload", "Started"])
    started = next(e for e in events if e["reason"] == "Started")
    assert started["message"] == "Admitted by clusterQueue cq-plain-pods"
    assert started["reportingComponent"] == "queuescope"
    metrics = server_metrics(server)
    for action in ("workloads_created", "started", "released"):
        series = f'queuescope_integration_actions_total{{action="{action}",integration="pod"}}'
        assert metrics[series] >= 1, (series, metrics)


def test_a_pod_beyond_the_quota_stays_gated_moves_with_its_label_and_goes_once_deleted(
    plane: ControlPlane,
) -> None:
    assert create_pod(plane, pod("too-big", cpu="100")).returncode == 0
    wl = workload_of_pod(
        plane, "too-big", "pending", lambda w: condition(w, "QuotaReserved", "False")
    )
    assert condition(wl, "Admitted") is None
    waiting = stored_pod(plane, "too-big")
    assert waiting is not None
    assert waiting["spec"]["schedulingGates"] == [GATE]
    assert not waiting["spec"].get("nodeName")
    # kube-scheduler reports it gated, not unschedulable.
    assert condition(waiting, "PodScheduled", "False")["reason"] == "SchedulingGated"  # type: ignore[index]

    # Relabelled while it waits: its Workload follows to that queue.
    plane.kubectl("label", "pod", "too-big", "-n", NS, f"{QUEUE_LABEL}=user-queue", "--overwrite")
    moved = workload_of_pod(
        plane, "too-big", "moved", lambda w: w["spec"]["queueName"] == "user-queue"
    )
    assert moved["metadata"]["name"] == wl["metadata"]["name"]

    plane.kubectl("delete", "pod", "too-big", "-n", NS, "--wait=false")
    wait_gone(plane, "too-big")  # the finalizer was released


def test_a_higher_priority_pod_preempts_a_running_one(plane: ControlPlane) -> None:
    assert create_pod(plane, pod("low", cpu="2")).returncode == 0
    wait_pod(plane, "low", "running", lambda p: p.get("status", {}).get("phase") == "Running")
    urgent = pod("urgent", cpu="2", labels={"kueue.x-k8s.io/priority-class": "plain-pods-urgent"})
    assert create_pod(plane, urgent).returncode == 0
    # Stopped with the TerminationTarget condition, then deleted; the Event keeps why.
    wait_gone(plane, "low")
    stopped = wait_events(plane, NS, "Pod", "low", ["Stopped"])
    [message] = [e["message"] for e in stopped if e["reason"] == "Stopped"]
    assert message.startswith("Preempted to accommodate a workload"), message
    running = wait_pod(
        plane, "urgent", "running", lambda p: p.get("status", {}).get("phase") == "Running"
    )
    assert running["spec"]["nodeName"].startswith("kwok-on-demand")


def test_kueues_pod_example_runs(plane: ControlPlane) -> None:
    single = (POD_EXAMPLES / "kueue-pod.yaml").read_text()
    result = plane.kubectl("create", "-n", NS, "-f", "-", "-o", "name", input=single, check=False)
    assert result.returncode == 0, result.stderr
    name = result.stdout.strip().removeprefix("pod/")
    assert name.startswith("kueue-sleep-")
    running = wait_pod(
        plane, name, "running", lambda p: p.get("status", {}).get("phase") == "Running"
    )
    assert running["spec"]["nodeSelector"] == {"cloud.example.com/capacity": "on-demand"}
    wl = workload_of_pod(plane, name, "admitted", lambda w: condition(w, "Admitted"))
    assert wl["status"]["admission"]["clusterQueue"] == "cq-plain-pods-examples"


def test_a_pod_that_cannot_have_a_workload_says_why_and_waits(plane: ControlPlane) -> None:
    orphan = pod("no-class", labels={"kueue.x-k8s.io/priority-class": "plain-pods-missing"})
    assert create_pod(plane, orphan).returncode == 0
    [warning] = [
        e
        for e in wait_events(plane, NS, "Pod", "no-class", ["ErrWorkloadCompose"])
        if e["reason"] == "ErrWorkloadCompose"
    ]
    assert warning["type"] == "Warning"
    assert 'WorkloadPriorityClass "plain-pods-missing" not found' in warning["message"]
    waiting = stored_pod(plane, "no-class")
    assert waiting is not None and waiting["spec"]["schedulingGates"] == [GATE]
