"""The `statefulset` integration with real StatefulSets (docs/cluster.md#statefulsets):
the webhooks of manifests/webhooks in force on kube-apiserver, kube-controller-manager's
StatefulSet controller making the Pods one by one, kube-scheduler binding, kwok running
them.

The server runs with `integrations.frameworks: [batch/job, statefulset]`:
* Kueue v0.19.2's own `serving-workloads/sample-statefulset.yaml`, applied unchanged but
  for its namespace, is one Workload of three Pods, made before its Pods, admitted whole;
  each Pod joins its group and runs on the flavor's Node, with no finalizer;
* while it runs, Kueue's rules hold its replicas, its pod spec and its queue;
* a Job of higher priority preempts it whole; the Pods its StatefulSet makes again wait
  behind their gates, and run once the quota is back;
* scaled to zero, its Workload is on hold and gives its quota to a StatefulSet that
  waited; scaled up again to another count, its pod set follows, it waits for quota,
  and runs once it is back;
* deleted, its Workload goes with it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.harness import ControlPlane, wait_for
from tests.e2e.pods import (
    KUEUE_EXAMPLES,
    QUEUE_LABEL,
    WORKLOADS,
    IntegrationSetup,
    ObjectRef,
    PodJob,
    condition,
    create_marked,
    flavor_queue,
    gated,
    integration_fixtures,
    integrations_config,
    kueue_workload_name,
    priority_class,
    refused_by,
    stored,
    template_marked,
    unsuspended,
    wait_events,
    wait_job,
    wait_object,
)
from tests.e2e.pods import (
    running_pod as running,
)

pytestmark = pytest.mark.realcluster

NS = "statefulsets-e2e"
NAME = "nginx-statefulset"  # Kueue's example's name
GROUP = "kueue.x-k8s.io/pod-group-name"
CONFIG = integrations_config("batch/job", "statefulset")
SAMPLE = KUEUE_EXAMPLES / "serving-workloads" / "sample-statefulset.yaml"
ON_DEMAND = {"cloud.example.com/capacity": "on-demand"}
# Kueue's example (three replicas of 100m) fits, nothing more.
QUEUES = "\n---\n".join(
    [
        flavor_queue(
            NS,
            "cq-statefulsets",
            "user-queue",
            "on-demand",
            "300m",
            preemption={"withinClusterQueue": "LowerPriority"},
        ),
        priority_class("statefulsets-urgent", 1000),
    ]
)


def workload_name(sts: dict[str, Any]) -> str:
    return kueue_workload_name("StatefulSet", "apps", sts)


def statefulset(name: str, replicas: int, cpu: str = "100m") -> str:
    return json.dumps(
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": NS, "labels": {QUEUE_LABEL: "user-queue"}},
            "spec": {
                "replicas": replicas,
                "serviceName": name,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {
                        "containers": [
                            {
                                "name": "main",
                                "image": "registry.k8s.io/pause:3.9",
                                "resources": {"requests": {"cpu": cpu}},
                            }
                        ]
                    },
                },
            },
        }
    )


def pods_of(plane: ControlPlane, app: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = plane.get_json("pods", "-n", NS, "-l", f"app={app}")["items"]
    live = [p for p in items if not p["metadata"].get("deletionTimestamp")]
    return sorted(live, key=lambda p: p["metadata"]["name"])


def wait_pods(plane: ControlPlane, app: str, what: str, test: Any) -> list[dict[str, Any]]:
    def probe() -> list[dict[str, Any]] | None:
        found = pods_of(plane, app)
        return found if test(found) else None

    result: list[dict[str, Any]] = wait_for(probe, timeout=120, what=what, interval=0.5)
    return result


def get_sts(plane: ControlPlane, name: str) -> dict[str, Any]:
    found: dict[str, Any] = plane.get_json("statefulset", name, "-n", NS)
    return found


def scale(plane: ControlPlane, name: str, replicas: int, *, check: bool = True) -> Any:
    return plane.kubectl(
        "scale", "statefulset", name, "-n", NS, f"--replicas={replicas}", check=check
    )


def wait_workload(plane: ControlPlane, name: str, what: str, test: Any) -> dict[str, Any]:
    return wait_object(plane, ObjectRef(WORKLOADS, NS, name), what, test)


def runs_again(plane: ControlPlane, name: str, count: int) -> None:
    """The Workload admitted again and the StatefulSet's `count` Pods running."""
    wait_workload(plane, name, "admitted again", lambda w: condition(w, "Admitted"))
    wait_pods(
        plane,
        "nginx",
        f"{count} Pods running again",
        lambda ps: len(ps) == count and all(map(running, ps)),
    )


def reserved(wl: dict[str, Any]) -> dict[str, Any] | None:
    for c in wl.get("status", {}).get("conditions") or []:
        if c["type"] == "QuotaReserved":
            return dict(c)
    return None


SETUP = IntegrationSetup(
    CONFIG, NS, QUEUES, owners="statefulsets", in_force=template_marked(SAMPLE, NS, "statefulset")
)
server, plane = integration_fixtures(SETUP)


def test_kueues_statefulset_example_runs_as_one_workload(plane: ControlPlane) -> None:
    sts = create_marked(plane, SAMPLE, NS, "statefulset")

    name = workload_name(sts)
    wl = wait_workload(plane, name, "admitted", lambda w: condition(w, "Admitted"))
    assert wl["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == sts["metadata"]["uid"]
    annotations = wl["metadata"]["annotations"]
    assert annotations["kueue.x-k8s.io/is-group-workload"] == "true"
    assert annotations["kueue.x-k8s.io/job-owner-gvk"] == "apps/v1, Kind=StatefulSet"
    assert annotations["kueue.x-k8s.io/job-owner-name"] == NAME
    [pod_set] = wl["spec"]["podSets"]
    assert (pod_set["name"], pod_set["count"]) == ("main", 3)
    assert wl["spec"]["queueName"] == "user-queue"
    assert wl["status"]["admission"]["clusterQueue"] == "cq-statefulsets"
    owner = wl["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "StatefulSet",
        NAME,
        sts["metadata"]["uid"],
    )
    assert not owner.get("controller")

    pods = wait_pods(
        plane, "nginx", "three Pods running", lambda ps: len(ps) == 3 and all(map(running, ps))
    )
    for pod in pods:
        meta = pod["metadata"]
        assert not meta.get("finalizers")  # the StatefulSet replaces, nothing holds
        assert meta["annotations"][GROUP] == name
        assert meta["annotations"]["kueue.x-k8s.io/prebuilt-workload-name"] == name
        assert meta["annotations"]["kueue.x-k8s.io/pod-group-total-count"] == "3"
        assert meta["annotations"]["kueue.x-k8s.io/pod-group-serving"] == "true"
        assert meta["annotations"]["kueue.x-k8s.io/role-hash"] == "main"
        assert meta["labels"]["kueue.x-k8s.io/podset"] == "main"
        assert pod["spec"]["nodeSelector"] == ON_DEMAND
    # Each Pod that joined owns the Workload too, beside the StatefulSet.
    wl = wait_workload(
        plane, name, "owned by its Pods", lambda w: len(w["metadata"]["ownerReferences"]) == 4
    )
    wait_events(plane, NS, "StatefulSet", NAME, ["CreatedWorkload"])
    wait_for(
        lambda: True if get_sts(plane, NAME).get("status", {}).get("readyReplicas") == 3 else None,
        timeout=60,
        what="the StatefulSet's three replicas ready",
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["patch", "statefulset", NAME, "--type=merge", "-p", '{"spec":{"replicas":4}}'],
            "spec.replicas: Invalid value: 4: field is immutable",
        ),
        (
            ["set", "resources", "statefulset", NAME, "--requests=cpu=200m"],
            'spec.template.spec.containers[0].resources.requests: Invalid value: {"cpu":"200m"}',
        ),
        (
            ["label", "statefulset", NAME, f"{QUEUE_LABEL}=elsewhere", "--overwrite"],
            "field is immutable",
        ),
    ],
)
def test_kueues_rules_hold_a_running_statefulset(
    plane: ControlPlane, args: list[str], expected: str
) -> None:
    assert expected in refused_by(plane, "vstatefulset.queuescope.io", args, NS)


def test_a_higher_priority_job_preempts_it_whole_and_its_pods_come_back_gated(
    plane: ControlPlane,
) -> None:
    name = workload_name(get_sts(plane, NAME))
    before = {p["metadata"]["uid"] for p in pods_of(plane, "nginx")}
    urgent = PodJob("urgent", NS, "user-queue", cpu="200m", priority_class="statefulsets-urgent")
    plane.apply(urgent.manifest())
    wait_job(plane, NS, "urgent", "started", unsuspended)
    evicted = wait_workload(plane, name, "preempted", lambda w: condition(w, "Evicted"))
    assert (condition(evicted, "Evicted") or {})["reason"] == "Preempted"
    # All or nothing: every Pod was stopped; the StatefulSet makes its first one again,
    # which waits behind its gate (in the group) for quota.
    [first] = wait_pods(
        plane, "nginx", "a new first Pod gated", lambda ps: len(ps) == 1 and gated(ps[0])
    )
    assert first["metadata"]["uid"] not in before
    assert first["metadata"]["annotations"][GROUP] == name
    plane.kubectl("delete", "job", "urgent", "-n", NS, "--cascade=foreground")
    runs_again(plane, name, 3)


def test_scaled_to_zero_it_is_on_hold_and_its_quota_goes_to_another(plane: ControlPlane) -> None:
    sts = get_sts(plane, NAME)
    name = workload_name(sts)
    plane.apply(statefulset("waiter", 2))
    waiter = workload_name(get_sts(plane, "waiter"))
    wait_workload(plane, waiter, "pending", lambda w: (reserved(w) or {}).get("status") == "False")
    [first] = wait_pods(
        plane, "waiter", "its first Pod gated", lambda ps: len(ps) == 1 and gated(ps[0])
    )
    assert first["metadata"]["annotations"][GROUP] == waiter

    scale(plane, NAME, 0)
    held = wait_workload(
        plane, name, "on hold", lambda w: (reserved(w) or {}).get("reason") == "OnHold"
    )
    assert (reserved(held) or {})["message"] == "StatefulSet scaled to zero; workload on hold"
    assert not held["status"].get("admission")
    assert condition(held, "Evicted") is None
    wait_pods(
        plane, "waiter", "both Pods running", lambda ps: len(ps) == 2 and all(map(running, ps))
    )
    wait_pods(plane, "nginx", "the Pods gone", lambda ps: not ps)
    wait_for(
        lambda: True if not get_sts(plane, NAME).get("status", {}).get("replicas") else None,
        timeout=60,
        what="the StatefulSet scaled down",
    )

    # Back up to two: its pod set follows (the waiter's 200m leave 100m, so it waits).
    scale(plane, NAME, 2)
    lifted = wait_workload(
        plane,
        name,
        "no longer on hold, for two",
        lambda w: (
            (reserved(w) or {}).get("reason") not in (None, "OnHold")
            and w["spec"]["podSets"][0]["count"] == 2
        ),
    )
    assert condition(lifted, "Admitted") is None
    wait_pods(plane, "nginx", "its first Pod gated", lambda ps: len(ps) == 1 and gated(ps[0]))

    plane.kubectl("delete", "statefulset", "waiter", "-n", NS)
    # The garbage collector deletes the Workload its owner no longer holds up.
    wait_for(
        lambda: True if stored(plane, ObjectRef(WORKLOADS, NS, waiter)) is None else None,
        timeout=90,
        what="the deleted StatefulSet's Workload gone",
    )
    runs_again(plane, name, 2)
