"""The `deployment` integration with real Deployments (docs/cluster.md#deployments): the
webhooks of manifests/webhooks in force on kube-apiserver, kube-controller-manager's
Deployment and ReplicaSet controllers making the Pods, kube-scheduler binding, kwok
running them.

The server runs with `integrations.frameworks: [batch/job, deployment]` (not `pod`):
* Kueue v0.19.2's own `serving-workloads/sample-deployment.yaml`, applied unchanged but
  for its namespace, has its pod template marked; each of its three Pods is its own
  Workload, admitted, and runs on the flavor's Node, with no finalizer;
* a replica beyond the quota waits behind its gate; while replicas are ready the queue
  name cannot change;
* a Job of higher priority preempts replicas: each is deleted, and the Pod its
  ReplicaSet makes instead waits behind the gate for quota;
* scaled to zero, the Pods go and their Workloads finish;
* a plain Pod that names a LocalQueue is not managed (only `pod` would manage it);
* Kueue's `serving-workloads/sample-hami.yaml`, with the resource transformations its
  documentation gives, is charged the totals over its virtual GPUs.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.harness import ControlPlane, wait_for
from tests.e2e.pods import (
    KUEUE_EXAMPLES,
    MANAGED,
    QUEUE_LABEL,
    IntegrationSetup,
    PodJob,
    condition,
    create_marked,
    flavor_queue,
    gated,
    integration_fixtures,
    integrations_config,
    priority_class,
    template_marked,
    unsuspended,
    wait_job,
)
from tests.e2e.pods import (
    running_pod as running,
)

pytestmark = pytest.mark.realcluster

NS = "deployments-e2e"
NAME = "nginx-deployment"  # Kueue's example's name
# With the resource transformations Kueue's HAMi example needs
# (docs/scheduling.md#resource-transformations).
CONFIG = integrations_config("batch/job", "deployment") + (
    "resources:\n  transformations:\n"
    + "".join(
        f"  - {{input: nvidia.com/{r}, strategy: Replace, multiplyBy: nvidia.com/gpu,"
        f" outputs: {{nvidia.com/total-{r}: '1'}}}}\n"
        for r in ("gpucores", "gpumem")
    )
)
SAMPLE = KUEUE_EXAMPLES / "serving-workloads" / "sample-deployment.yaml"
HAMI = KUEUE_EXAMPLES / "serving-workloads" / "sample-hami.yaml"
# Three replicas of Kueue's example (100m each) fit, a fourth does not.
QUEUES = "\n---\n".join(
    [
        flavor_queue(
            NS,
            "cq-deployments",
            "user-queue",
            "on-demand",
            "300m",
            preemption={"withinClusterQueue": "LowerPriority"},
        ),
        priority_class("deployments-urgent", 1000),
    ]
)


def deployment_pods(plane: ControlPlane) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = plane.get_json("pods", "-n", NS, "-l", "app=nginx")["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def wait_replicas(plane: ControlPlane, what: str, test: Any) -> list[dict[str, Any]]:
    def probe() -> list[dict[str, Any]] | None:
        pods = deployment_pods(plane)
        return pods if test(pods) else None

    result: list[dict[str, Any]] = wait_for(probe, timeout=120, what=what, interval=0.5)
    return result


def pod_workloads(plane: ControlPlane) -> dict[str, dict[str, Any]]:
    """The Workloads owned by Pods, by their Pod's name."""
    found: dict[str, dict[str, Any]] = {}
    for wl in plane.get_json("workloads.kueue.x-k8s.io", "-n", NS)["items"]:
        for owner in wl["metadata"].get("ownerReferences") or []:
            if owner["kind"] == "Pod":
                found[owner["name"]] = wl
    return found


def scale(plane: ControlPlane, replicas: int) -> None:
    plane.kubectl("scale", "deployment", NAME, "-n", NS, f"--replicas={replicas}")


SETUP = IntegrationSetup(
    CONFIG, NS, QUEUES, owners="deployments", in_force=template_marked(SAMPLE, NS, "deployment")
)
server, plane = integration_fixtures(SETUP)


def test_kueues_deployment_example_runs_one_workload_per_pod(plane: ControlPlane) -> None:
    create_marked(plane, SAMPLE, NS, "deployment")

    pods = wait_replicas(
        plane, "three replicas running", lambda ps: len(ps) == 3 and all(map(running, ps))
    )
    for pod in pods:
        assert not pod["metadata"].get("finalizers")  # the ReplicaSet replaces, nothing holds
        assert pod["spec"]["nodeSelector"] == {"cloud.example.com/capacity": "on-demand"}
        assert pod["spec"]["nodeName"].startswith("kwok-on-demand")
        assert pod["metadata"]["labels"]["kueue.x-k8s.io/cluster-queue-name"] == "cq-deployments"
    workloads = pod_workloads(plane)
    for pod in pods:
        wl = workloads[pod["metadata"]["name"]]
        assert wl["metadata"]["name"].startswith(f"pod-{pod['metadata']['name']}-")
        assert condition(wl, "Admitted") is not None
    wait_for(
        lambda: (
            True
            if plane.get_json("deployment", NAME, "-n", NS).get("status", {}).get("readyReplicas")
            == 3
            else None
        ),
        timeout=60,
        what="the Deployment's three replicas ready",
    )


def test_a_replica_beyond_the_quota_waits_and_the_queue_is_fixed_while_ready(
    plane: ControlPlane,
) -> None:
    scale(plane, 4)
    pods = wait_replicas(
        plane, "a fourth replica gated", lambda ps: len(ps) == 4 and sum(map(gated, ps)) == 1
    )
    [waiting] = [p for p in pods if gated(p)]
    name = waiting["metadata"]["name"]
    wl = wait_for(
        lambda: (
            w
            if (w := pod_workloads(plane).get(name)) and condition(w, "QuotaReserved", "False")
            else None
        ),
        timeout=60,
        what=f"the Workload of {name} pending",
    )
    assert condition(wl, "Admitted") is None
    moved = plane.kubectl(
        "label",
        "deployment",
        NAME,
        "-n",
        NS,
        f"{QUEUE_LABEL}=elsewhere",
        "--overwrite",
        check=False,
    )
    assert moved.returncode != 0
    assert 'admission webhook "vdeployment.queuescope.io" denied the request' in moved.stderr
    assert "field is immutable" in moved.stderr
    scale(plane, 3)
    wait_replicas(plane, "back to three running", lambda ps: len(ps) == 3 and all(map(running, ps)))


def test_a_higher_priority_job_preempts_replicas_that_come_back_gated(
    plane: ControlPlane,
) -> None:
    before = {p["metadata"]["name"] for p in deployment_pods(plane)}
    urgent = PodJob("urgent", NS, "user-queue", cpu="200m", priority_class="deployments-urgent")
    plane.apply(urgent.manifest())
    wait_job(plane, NS, "urgent", "started", unsuspended)
    # Two replicas were deleted for it; their ReplicaSet made two more, which wait.
    pods = wait_replicas(
        plane,
        "two replacements gated",
        lambda ps: len(ps) == 3 and sum(map(gated, ps)) == 2 and sum(map(running, ps)) == 1,
    )
    replaced = {p["metadata"]["name"] for p in pods if gated(p)}
    assert not replaced & before
    plane.kubectl("delete", "job", "urgent", "-n", NS, "--cascade=foreground")
    wait_replicas(
        plane, "all three running again", lambda ps: len(ps) == 3 and all(map(running, ps))
    )


def test_scaled_to_zero_the_pods_go_and_their_workloads_finish(plane: ControlPlane) -> None:
    names = {p["metadata"]["name"] for p in deployment_pods(plane)}
    assert names
    scale(plane, 0)
    wait_replicas(plane, "no replica left", lambda ps: not ps)

    def finished_or_gone() -> bool | None:
        workloads = pod_workloads(plane)
        left = [workloads[n] for n in names if n in workloads]
        return True if all(condition(w, "Finished") for w in left) else None

    wait_for(finished_or_gone, timeout=60, what="the replicas' Workloads finished or collected")


def test_kueues_hami_example_is_charged_the_totals_over_its_vgpus(plane: ControlPlane) -> None:
    """`serving-workloads/sample-hami.yaml` applied unchanged (its own namespace, queues and
    flavor): its Pod asks for 2 vGPUs of 30 cores and 1024 MiB each, and is admitted on
    the ClusterQueue's totals, 60 cores and 2048 MiB. No kwok Node has its flavor's label,
    so the started Pod stays unscheduled: the admission is what is checked."""
    plane.apply(HAMI.read_text())
    try:

        def admitted() -> dict[str, Any] | None:
            items = plane.get_json("workloads.kueue.x-k8s.io", "-n", "kueue-test")["items"]
            done = [w for w in items if condition(w, "Admitted")]
            return done[0] if done else None

        wl = wait_for(admitted, timeout=60, what="the HAMi example's Workload admitted")
        assert wl["status"]["admission"]["clusterQueue"] == "hami-queue"
        [assignment] = wl["status"]["admission"]["podSetAssignments"]
        assert assignment["resourceUsage"] == {
            "nvidia.com/gpu": "2",
            "nvidia.com/total-gpucores": "60",
            "nvidia.com/total-gpumem": "2048",
        }
        assert set(assignment["flavors"].values()) == {"hami-flavor"}
    finally:
        # Its namespace stays: no namespace controller runs here to empty it.
        plane.kubectl(
            *("delete", "-n", "kueue-test", "deployment/gpu-burn", "localqueue/user-queue"),
            *("--ignore-not-found", "--cascade=foreground"),
        )
        plane.kubectl(
            *("delete", "clusterqueues.kueue.x-k8s.io/hami-queue"),
            *("resourceflavors.kueue.x-k8s.io/hami-flavor", "--ignore-not-found"),
        )


def test_with_deployment_alone_a_plain_pod_is_not_managed(plane: ControlPlane) -> None:
    plain = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "plain", "namespace": NS, "labels": {QUEUE_LABEL: "user-queue"}},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": {"type": "kwok"},
            "containers": [{"name": "main", "image": "busybox"}],
        },
    }
    result = plane.kubectl("create", "-f", "-", "-o", "json", input=json.dumps(plain), check=False)
    assert result.returncode == 0, result.stderr
    stored = json.loads(result.stdout)
    assert not stored["spec"].get("schedulingGates")
    assert MANAGED not in stored["metadata"]["labels"]
    assert not stored["metadata"].get("finalizers")
    plane.kubectl("delete", "pod", "plain", "-n", NS, "--wait=false")
