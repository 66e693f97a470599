"""Pod groups with real Pods (docs/cluster.md#pod-groups): the webhooks of
manifests/webhooks in force on kube-apiserver, kube-scheduler binding, kwok running, the
server with `integrations.frameworks: [batch/job, pod]`.

* Kueue v0.19.2's own example (`pods-kueue/kueue-pod-group.yaml`, applied unchanged but
  for its namespace) is one Workload named after the group, admitted whole, both Pods
  started; the role hash our webhook wrote on each Pod is the one Kueue's own code
  computes from the Pod as stored (the `kueue_role_hash` oracle, built from Kueue's
  module).
* A group of two roles gets a pod set per role, runs, and finishes `Pods succeeded: 3/3.`;
  its Pods are let go.
* A group short of Pods says why and makes no Workload; complete but beyond the quota it
  waits gated, then, deleted, its Workload is finished and its Pods go.
* A higher-priority Pod preempts a running group: each Pod gets `TerminationTarget` and
  is deleted.
* Kueue's webhook rules for the group keys are enforced.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.harness import ControlPlane, wait_for
from tests.e2e.nodes import RUN_FOR_ANNOTATION
from tests.e2e.pods import (
    GATE,
    KUEUE_EXAMPLES,
    QUEUE_LABEL,
    WORKLOADS,
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

NS = "pod-groups-e2e"
GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
COUNT = "kueue.x-k8s.io/pod-group-total-count"
ROLE_HASH = "kueue.x-k8s.io/role-hash"
CONFIG = integrations_config("batch/job", "pod")
# Kueue's example names the LocalQueue `user-queue`: two Pods of 3 CPUs.
QUEUES = pod_test_queues(NS, "pod-groups", "6", "4")


def group_pod(
    name: str, group: str, count: int, *, cpu: str = "1", run_for: str = "", **labels: str
) -> dict[str, Any]:
    annotations = {COUNT: str(count)}
    if run_for:
        annotations[RUN_FOR_ANNOTATION] = run_for
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {QUEUE_LABEL: "lq-pod-groups", GROUP_LABEL: group, **labels},
            "annotations": annotations,
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


def pods_of(plane: ControlPlane, group: str) -> list[dict[str, Any]]:
    found = plane.get_json("pods", "-n", NS, "-l", f"{GROUP_LABEL}={group}")["items"]
    return sorted(found, key=lambda p: p["metadata"]["name"])


def wait_group(plane: ControlPlane, group: str, what: str, test: Any) -> list[dict[str, Any]]:
    def probe() -> list[dict[str, Any]] | None:
        found = pods_of(plane, group)
        return found if test(found) else None

    result: list[dict[str, Any]] = wait_for(probe, timeout=90, what=f"group {group} {what}")
    return result


def stored_workload(plane: ControlPlane, name: str) -> dict[str, Any] | None:
    return stored(plane, ObjectRef(WORKLOADS, NS, name))


def wait_workload(plane: ControlPlane, name: str, what: str, test: Any) -> dict[str, Any]:
    return wait_object(plane, ObjectRef(WORKLOADS, NS, name), what, test)


def _cq_cpu(plane: ControlPlane) -> str | None:
    cq = plane.get_json("clusterqueues.kueue.x-k8s.io", "cq-pod-groups")
    for flavor in cq.get("status", {}).get("flavorsUsage") or []:
        for resource in flavor.get("resources") or []:
            if resource["name"] == "cpu":
                return str(resource["total"])
    return None


def running(pods: list[dict[str, Any]]) -> bool:
    return bool(pods) and all(p.get("status", {}).get("phase") == "Running" for p in pods)


def _gated(plane: ControlPlane) -> bool | None:
    """Is a group Pod stored gated with its role hash (our webhook in force)?"""
    result = create_pod(plane, group_pod("probe", "probe", 1), dry_run=True)
    if result.returncode != 0:
        return None
    stored = json.loads(result.stdout)
    held = GATE in (stored["spec"].get("schedulingGates") or [])
    return True if held and ROLE_HASH in stored["metadata"].get("annotations", {}) else None


SETUP = IntegrationSetup(CONFIG, NS, QUEUES, owners="pods", in_force=_gated)
server, plane = integration_fixtures(SETUP)


def test_kueues_group_example_is_one_workload_admitted_whole(
    plane: ControlPlane, kueue_role_hash: Path
) -> None:
    example = (KUEUE_EXAMPLES / "pods-kueue" / "kueue-pod-group.yaml").read_text()
    created = []
    for document in yaml.safe_load_all(example):  # each as stored, before it is started
        result = plane.kubectl(
            "create", "-n", NS, "-f", "-", "-o", "json", input=json.dumps(document), check=False
        )
        assert result.returncode == 0, result.stderr
        created.append(json.loads(result.stdout))
    for pod in created:
        assert pod["spec"]["schedulingGates"] == [GATE]
        assert pod["metadata"]["finalizers"] == ["kueue.x-k8s.io/managed"]
    # Kueue's own code, on the Pods as stored, names the same roles our webhook did.
    ours = [p["metadata"]["annotations"][ROLE_HASH] for p in created]
    assert ours == _kueue_hashes(kueue_role_hash, [p["spec"] for p in created])
    assert ours[0] == ours[1]  # the same shape: one role

    wl = wait_workload(plane, "sample-group", "admitted", lambda w: condition(w, "Admitted"))
    assert wl["metadata"]["annotations"]["kueue.x-k8s.io/is-group-workload"] == "true"
    owners = sorted(o["name"] for o in wl["metadata"]["ownerReferences"])
    assert owners == sorted(p["metadata"]["name"] for p in created)
    [pod_set] = wl["spec"]["podSets"]
    assert (pod_set["name"], pod_set["count"]) == (ours[0], 2)
    assert wl["status"]["admission"]["clusterQueue"] == "cq-pod-groups-examples"
    started = wait_group(plane, "sample-group", "running", running)
    for pod in started:
        assert pod["spec"]["nodeSelector"] == {"cloud.example.com/capacity": "on-demand"}
        assert pod["metadata"]["labels"]["kueue.x-k8s.io/podset"] == ours[0]
    first = min(p["metadata"]["name"] for p in created)
    wait_events(plane, NS, "Pod", first, ["CreatedWorkload", "Started"])
    plane.kubectl("delete", "pods", "-n", NS, "-l", f"{GROUP_LABEL}=sample-group", "--wait=false")
    wait_group(plane, "sample-group", "gone", lambda pods: not pods)


def test_a_group_of_two_roles_runs_and_finishes(plane: ControlPlane, kueue_role_hash: Path) -> None:
    pods = [group_pod("roles-leader", "roles", 3, cpu="2", run_for="2s")] + [
        group_pod(f"roles-worker-{i}", "roles", 3, run_for="2s") for i in range(2)
    ]
    created = []
    for pod in pods:
        result = create_pod(plane, pod)
        assert result.returncode == 0, result.stderr
        created.append(json.loads(result.stdout))
    hashes = [p["metadata"]["annotations"][ROLE_HASH] for p in created]
    assert hashes == _kueue_hashes(kueue_role_hash, [p["spec"] for p in created])
    leader, worker = hashes[0], hashes[1]
    assert leader != worker and hashes[2] == worker

    wl = wait_workload(plane, "roles", "finished", lambda w: condition(w, "Finished"))
    sets = [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]]
    assert sets == sorted([(leader, 1), (worker, 2)])
    finished = condition(wl, "Finished")
    assert finished is not None
    assert (finished["reason"], finished["message"]) == ("Succeeded", "Pods succeeded: 3/3.")
    assert condition(wl, "PodsReady") is not None
    done = wait_group(
        plane,
        "roles",
        "let go",
        lambda found: len(found) == 3 and all(not p["metadata"].get("finalizers") for p in found),
    )
    assert {p["status"]["phase"] for p in done} == {"Succeeded"}
    by_name = {p["metadata"]["name"]: p for p in done}
    assert by_name["roles-leader"]["metadata"]["labels"]["kueue.x-k8s.io/podset"] == leader


def test_a_succeeded_pods_quota_goes_back_while_its_group_runs(plane: ControlPlane) -> None:
    assert create_pod(plane, group_pod("reclaim-quick", "reclaim", 2, run_for="1s")).returncode == 0
    assert (
        create_pod(plane, group_pod("reclaim-slow", "reclaim", 2, run_for="600s")).returncode == 0
    )
    wl = wait_workload(
        plane, "reclaim", "given back a Pod", lambda w: w.get("status", {}).get("reclaimablePods")
    )
    [pod_set] = wl["spec"]["podSets"]
    assert wl["status"]["reclaimablePods"] == [{"name": pod_set["name"], "count": 1}]
    assert condition(wl, "Finished") is None
    slow = [p for p in pods_of(plane, "reclaim") if p["metadata"]["name"] == "reclaim-slow"]
    assert slow and slow[0]["status"]["phase"] == "Running"
    # The ClusterQueue counts the one Pod still running (its status written on its cadence).
    wait_for(lambda: _cq_cpu(plane) == "1" or None, timeout=60, what="cq-pod-groups usage 1")
    plane.kubectl("delete", "pods", "-n", NS, "-l", f"{GROUP_LABEL}=reclaim", "--wait=false")
    wait_group(plane, "reclaim", "gone", lambda pods: not pods)


def test_a_short_group_says_why_and_a_complete_one_beyond_the_quota_waits_and_moves(
    plane: ControlPlane,
) -> None:
    assert create_pod(plane, group_pod("big-a", "big", 2, cpu="3")).returncode == 0
    [warning] = [
        e
        for e in wait_events(plane, NS, "Pod", "big-a", ["ErrWorkloadCompose"])
        if e["reason"] == "ErrWorkloadCompose"
    ]
    assert warning["message"] == "'big' group has fewer runnable pods than expected"
    assert stored_workload(plane, "big") is None
    assert create_pod(plane, group_pod("big-b", "big", 2, cpu="3")).returncode == 0
    wl = wait_workload(
        plane, "big", "pending", lambda w: condition(w, "QuotaReserved", "False") is not None
    )
    assert condition(wl, "Admitted") is None
    for pod in pods_of(plane, "big"):
        assert pod["spec"]["schedulingGates"] == [GATE]
    # Relabelled while it waits, the group moves to a queue it fits in, and runs.
    plane.kubectl(
        "label", "pods", "-n", NS, "-l", f"{GROUP_LABEL}=big", f"{QUEUE_LABEL}=user-queue",
        "--overwrite",
    )  # fmt: skip
    moved = wait_workload(plane, "big", "admitted", lambda w: condition(w, "Admitted"))
    assert moved["spec"]["queueName"] == "user-queue"
    assert moved["metadata"]["uid"] == wl["metadata"]["uid"]
    wait_group(plane, "big", "running", running)
    plane.kubectl("delete", "pods", "-n", NS, "-l", f"{GROUP_LABEL}=big", "--wait=false")
    wait_group(plane, "big", "gone", lambda pods: not pods)
    # Its owners gone, the garbage collector deletes the Workload.
    wait_for(lambda: stored_workload(plane, "big") is None or None, timeout=90, what="big gone")


def test_a_group_missing_a_pod_waits_for_its_replacement(plane: ControlPlane) -> None:
    for name in ("repl-a", "repl-b"):
        assert create_pod(plane, group_pod(name, "repl", 2, cpu="3")).returncode == 0
    wait_workload(plane, "repl", "pending", lambda w: condition(w, "QuotaReserved", "False"))
    plane.kubectl("delete", "pod", "repl-b", "-n", NS, "--wait=false")
    waiting = wait_workload(
        plane, "repl", "waiting", lambda w: condition(w, "WaitingForReplacementPods")
    )
    found = condition(waiting, "WaitingForReplacementPods")
    assert found is not None
    assert (found["reason"], found["message"]) == (
        "PodsFailed",
        "Some Failed pods need replacement",
    )
    # The replacement owns the Workload too, and the group is whole again.
    assert create_pod(plane, group_pod("repl-c", "repl", 2, cpu="3")).returncode == 0
    whole = wait_workload(
        plane, "repl", "whole", lambda w: condition(w, "WaitingForReplacementPods", "False")
    )
    owners = {o["name"] for o in whole["metadata"]["ownerReferences"]}
    assert {"repl-a", "repl-c"} <= owners
    wait_events(plane, NS, "Workload", "repl", ["OwnerReferencesAdded"])
    plane.kubectl("delete", "pods", "-n", NS, "-l", f"{GROUP_LABEL}=repl", "--wait=false")
    wait_group(plane, "repl", "gone", lambda pods: not pods)


def test_a_higher_priority_pod_preempts_a_running_group(plane: ControlPlane) -> None:
    for i in range(2):
        assert create_pod(plane, group_pod(f"low-{i}", "low", 2, cpu="2")).returncode == 0
    wait_group(plane, "low", "running", running)
    urgent = group_pod("urgent", "urgent", 1, cpu="2")
    urgent["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "pod-groups-urgent"
    assert create_pod(plane, urgent).returncode == 0
    wait_group(plane, "low", "stopped", lambda pods: not pods)
    stopped = wait_events(plane, NS, "Pod", "low-0", ["Stopped"])
    [message] = [e["message"] for e in stopped if e["reason"] == "Stopped"]
    assert message.startswith("Preempted to accommodate a workload"), message
    wait_group(plane, "urgent", "running", running)
    wait_for(lambda: stored_workload(plane, "low") is None or None, timeout=90, what="low gone")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("no count", f"metadata.annotations[{COUNT}]: Required value"),
        ("count zero", "group total count should be greater than zero"),
    ],
)
def test_kueues_rules_for_the_group_keys(plane: ControlPlane, change: str, expected: str) -> None:
    pod = group_pod("refused", "refused", 2)
    if change == "no count":
        del pod["metadata"]["annotations"][COUNT]
    else:
        pod["metadata"]["annotations"][COUNT] = "0"
    result = create_pod(plane, pod)
    assert result.returncode != 0
    assert 'admission webhook "vpod.queuescope.io" denied the request' in result.stderr
    assert expected in result.stderr


def _kueue_hashes(binary: Path, specs: list[dict[str, Any]]) -> list[str]:
    """Kueue's own role hash of each spec (build.py --role-hash)."""
    result = subprocess.run(
        [str(binary)], input=json.dumps(specs), capture_output=True, text=True, check=True
    )
    return result.stdout.split()
