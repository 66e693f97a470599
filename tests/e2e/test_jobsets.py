"""The `jobset.x-k8s.io/jobset` integration with real JobSets (docs/cluster.md#jobsets):
JobSet's own controller and webhooks (v0.12.0, the version Kueue v0.19.2 requires,
tests/e2e/jobsets.py) and ours in force on kube-apiserver, kube-controller-manager's Job
controller making the child Jobs' Pods, kube-scheduler binding, kwok running them.

The server runs with `integrations.frameworks: [batch/job, jobset.x-k8s.io/jobset]`, and
the namespace has a `default` LocalQueue besides Kueue's `user-queue`:
* Kueue v0.19.2's own `jobs/sample-jobset.yaml`, applied unchanged but for its namespace,
  is stored suspended and is one Workload of a pod set per replicated Job, admitted
  whole; it starts with the flavor's node labels in each replicated Job's template, its
  Jobs (which name no queue, and get none from the `default` one) run their Pods on the
  flavor's Nodes; deleted, its Workload goes with it;
* while it runs, Kueue's label rules hold it;
* a Job of higher priority preempts it whole: it is suspended, its templates restored,
  and it runs again once the quota is back;
* a JobSet that completes finishes its Workload.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.cluster import KUEUE, ClusterModeServer
from tests.e2e.harness import ControlPlane, wait_for
from tests.e2e.jobsets import JOBSET_NAME_LABEL, JobSetController, jobset_manifest
from tests.e2e.nodes import RUN_FOR_ANNOTATION, NodeAgents
from tests.e2e.pods import (
    KUEUE_EXAMPLES,
    QUEUE_LABEL,
    WORKLOADS,
    IntegrationSetup,
    ObjectRef,
    PodJob,
    condition,
    created_dry_run,
    flavor_queue,
    integrations_config,
    kueue_workload_name,
    priority_class,
    refused_by,
    server_with_webhooks,
    stored,
    wait_events,
    wait_job,
    wait_object,
)
from tests.e2e.pods import (
    running_pod as running,
)

pytestmark = pytest.mark.realcluster

NS = "jobsets-e2e"
CONFIG = integrations_config("batch/job", "jobset.x-k8s.io/jobset")
SAMPLE = KUEUE_EXAMPLES / "jobs" / "sample-jobset.yaml"
ON_DEMAND = {"cloud.example.com/capacity": "on-demand"}
PARENT_LABEL = "kueue.x-k8s.io/podset"
# Kueue's example (1 + 2 CPUs, 2 × 200Mi) fits, nothing more.
QUEUES = "\n---\n".join(
    [
        flavor_queue(
            NS,
            "cq-jobsets",
            "user-queue",
            "on-demand",
            "3",
            "1Gi",
            preemption={"withinClusterQueue": "LowerPriority"},
        ),
        json.dumps(
            {
                "apiVersion": KUEUE,
                "kind": "LocalQueue",
                "metadata": {"name": "default", "namespace": NS},
                "spec": {"clusterQueue": "cq-jobsets"},
            }
        ),
        priority_class("jobsets-urgent", 1000),
    ]
)


def suspended_on_creation(plane: ControlPlane) -> bool | None:
    """An `in_force` probe: is Kueue's example stored suspended (our webhook in force)?"""
    created = created_dry_run(plane, SAMPLE, NS)
    return True if created is not None and created["spec"].get("suspend") is True else None


SETUP = IntegrationSetup(CONFIG, NS, QUEUES, owners="jobsets", in_force=suspended_on_creation)


@pytest.fixture(scope="module")
def server(
    jobset_controller: JobSetController, nodes: NodeAgents, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterModeServer]:
    """Our server once JobSet's controller runs: its CRD is there when the store lists."""
    with server_with_webhooks(nodes, tmp_path_factory.mktemp(NS), SETUP) as running_server:
        yield running_server


@pytest.fixture(name="plane")
def plane_fixture(server: ClusterModeServer, nodes: NodeAgents) -> ControlPlane:
    return nodes.plane


def workload_name(jobset: dict[str, Any]) -> str:
    return kueue_workload_name("JobSet", "jobset.x-k8s.io", jobset)


def wait_workload(plane: ControlPlane, name: str, what: str, test: Any) -> dict[str, Any]:
    return wait_object(plane, ObjectRef(WORKLOADS, NS, name), what, test)


def wait_jobset(plane: ControlPlane, name: str, what: str, test: Any) -> dict[str, Any]:
    return wait_object(plane, ObjectRef("jobset", NS, name), what, test)


def children(plane: ControlPlane, kind: str, jobset: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = plane.get_json(
        kind, "-n", NS, "-l", f"{JOBSET_NAME_LABEL}={jobset}"
    )["items"]
    live = [i for i in items if not i["metadata"].get("deletionTimestamp")]
    return sorted(live, key=lambda i: i["metadata"]["name"])


def wait_pods(plane: ControlPlane, jobset: str, what: str, test: Any) -> list[dict[str, Any]]:
    def probe() -> list[dict[str, Any]] | None:
        found = children(plane, "pods", jobset)
        return found if test(found) else None

    result: list[dict[str, Any]] = wait_for(probe, timeout=120, what=what, interval=0.5)
    return result


def templates(jobset: dict[str, Any]) -> list[dict[str, Any]]:
    return [r["template"]["spec"]["template"] for r in jobset["spec"]["replicatedJobs"]]


def create(plane: ControlPlane, manifest: str) -> dict[str, Any]:
    result = plane.kubectl("create", "-n", NS, "-f", "-", "-o", "json", input=manifest, check=False)
    assert result.returncode == 0, result.stderr
    created: dict[str, Any] = json.loads(result.stdout)
    return created


def long_running(name: str, replicas: int = 2) -> str:
    """A JobSet naming `user-queue` whose Pods run until deleted."""
    return json.dumps(
        jobset_manifest(
            name, NS, replicas=replicas, run_for=None, labels={QUEUE_LABEL: "user-queue"}
        )
    )


def running_held(plane: ControlPlane) -> dict[str, Any]:
    """The JobSet `held` (made if need be: the tests below share it), once started."""
    if stored(plane, ObjectRef("jobset", NS, "held")) is None:
        create(plane, long_running("held"))
    return wait_jobset(plane, "held", "started", lambda j: j["spec"].get("suspend") is False)


def test_kueues_jobset_example_runs_as_one_workload(plane: ControlPlane) -> None:
    jobset = create(plane, SAMPLE.read_text())
    name = jobset["metadata"]["name"]
    assert name.startswith("sleep-job-")
    assert jobset["spec"]["suspend"] is True  # our webhook: stored suspended
    assert jobset["metadata"]["labels"] == {QUEUE_LABEL: "user-queue"}

    wl_name = workload_name(jobset)
    wl = wait_workload(plane, wl_name, "admitted", lambda w: condition(w, "Admitted"))
    assert wl["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == jobset["metadata"]["uid"]
    [owner] = wl["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("JobSet", name, True)
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [
        ("workers", 1),
        ("driver", 1),
    ]
    assert wl["spec"]["queueName"] == "user-queue"
    admission = wl["status"]["admission"]
    assert admission["clusterQueue"] == "cq-jobsets"
    assert [a["name"] for a in admission["podSetAssignments"]] == ["workers", "driver"]

    started = wait_jobset(plane, name, "started", lambda j: j["spec"].get("suspend") is False)
    for replicated, template in zip(
        started["spec"]["replicatedJobs"], templates(started), strict=True
    ):
        assert template["spec"]["nodeSelector"] == ON_DEMAND
        assert template["metadata"]["labels"][PARENT_LABEL] == replicated["name"]
        assert template["metadata"]["labels"]["kueue.x-k8s.io/local-queue-name"] == "user-queue"

    pods = wait_pods(
        plane, name, "two Pods running", lambda ps: len(ps) == 2 and all(map(running, ps))
    )
    assert sorted(p["metadata"]["labels"][PARENT_LABEL] for p in pods) == ["driver", "workers"]
    for pod in pods:
        assert pod["spec"]["nodeSelector"] == ON_DEMAND
    # The JobSet's Jobs are its own: no queue (not even the namespace's `default`), no
    # Workload of their own, and running.
    jobs = children(plane, "jobs", name)
    assert len(jobs) == 2
    for job in jobs:
        assert QUEUE_LABEL not in (job["metadata"].get("labels") or {})
        assert job["spec"].get("suspend") is False
    workloads = plane.get_json("workloads.kueue.x-k8s.io", "-n", NS)["items"]
    assert [w["metadata"]["name"] for w in workloads] == [wl_name]

    wait_workload(plane, wl_name, "pods ready", lambda w: condition(w, "PodsReady"))
    wait_events(plane, NS, "JobSet", name, ["CreatedWorkload", "Started"])

    plane.kubectl("delete", "jobset", name, "-n", NS)
    wait_for(
        lambda: True if stored(plane, ObjectRef(WORKLOADS, NS, wl_name)) is None else None,
        timeout=90,
        what=f"Workload {wl_name} deleted with its JobSet",
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["label", "jobset", "held", f"{QUEUE_LABEL}=elsewhere", "--overwrite"],
            "field is immutable",
        ),
        (
            ["label", "jobset", "held", "kueue.x-k8s.io/priority-class=jobsets-urgent"],
            "WorkloadPriorityClass cannot be added to a non-suspended workload",
        ),
    ],
)
def test_kueues_rules_hold_a_running_jobset(
    plane: ControlPlane, args: list[str], expected: str
) -> None:
    running_held(plane)
    assert expected in refused_by(plane, "vjobset.queuescope.io", args, NS)


def test_a_higher_priority_job_preempts_a_running_jobset_which_runs_again(
    plane: ControlPlane,
) -> None:
    held = running_held(plane)
    wl_name = workload_name(held)
    wait_pods(plane, "held", "two Pods running", lambda ps: len(ps) == 2 and all(map(running, ps)))

    urgent = PodJob(
        "urgent",
        NS,
        "user-queue",
        cpu="3",
        priority_class="jobsets-urgent",
        pod_annotations={RUN_FOR_ANNOTATION: "3s"},
    )
    plane.apply(urgent.manifest())
    evicted = wait_workload(plane, wl_name, "preempted", lambda w: condition(w, "Evicted"))
    assert (condition(evicted, "Evicted") or {})["reason"] == "Preempted"
    # Suspended, then its templates put back as they were written.
    restored = wait_jobset(
        plane,
        "held",
        "suspended and restored",
        lambda j: (
            j["spec"].get("suspend") is True
            and all("nodeSelector" not in t["spec"] for t in templates(j))
        ),
    )
    for template in templates(restored):
        assert PARENT_LABEL not in (template["metadata"].get("labels") or {})
    wait_job(plane, NS, "urgent", "started", lambda j: not j["spec"].get("suspend"))
    wait_job(plane, NS, "urgent", "complete", lambda j: condition(j, "Complete"))

    # The quota back, the JobSet is admitted and runs again.
    wait_workload(plane, wl_name, "admitted again", lambda w: condition(w, "Admitted"))
    wait_jobset(plane, "held", "started again", lambda j: j["spec"].get("suspend") is False)
    wait_pods(
        plane, "held", "two Pods running again", lambda ps: len(ps) == 2 and all(map(running, ps))
    )
    plane.kubectl("delete", "jobset", "held", "-n", NS)
    plane.kubectl("delete", "job", "urgent", "-n", NS, "--wait=false")


def test_a_completed_jobset_finishes_its_workload(plane: ControlPlane) -> None:
    doc = jobset_manifest("brief", NS, replicas=2, run_for="1s", labels={QUEUE_LABEL: "user-queue"})
    brief = create(plane, json.dumps(doc))
    wl_name = workload_name(brief)
    done = wait_workload(plane, wl_name, "finished", lambda w: condition(w, "Finished"))
    finished = condition(done, "Finished") or {}
    assert finished["reason"] == "Succeeded"
    completed = stored(plane, ObjectRef("jobset", NS, "brief")) or {}
    assert condition(completed, "Completed") is not None
