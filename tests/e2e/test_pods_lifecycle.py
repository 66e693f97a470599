"""Jobs with real Pods (issue 16): the Job controller, the scheduler and kwok's Nodes run
beside kube-apiserver (tests/e2e/nodes.py), so nothing here patches a Job's status.

* An admitted Job is unsuspended with its flavor's nodeSelector and tolerations; the Job
  controller creates its Pods, the scheduler binds them to a Node of that flavor (the
  spot Node is tainted: only the toleration lets them in), kwok makes them Ready, and
  `PodsReady` follows from the Job's status.
* A preempted Job is suspended again and the Job controller deletes its Pods.
* A Job whose Pods succeed completes, its Workload finishes and frees the quota: the
  pending Job is admitted next and runs; a Job whose Pod fails finishes as failed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.cluster import ClusterModeServer
from tests.e2e.harness import ControlPlane, wait_for
from tests.e2e.nodes import FAIL_AFTER_ANNOTATION, RUN_FOR_ANNOTATION, NodeAgents
from tests.e2e.pods import (
    PodJob,
    condition,
    flavor_queue,
    job_pods,
    ready,
    sample_flavors,
    suspended,
    unsuspended,
    wait_events,
    wait_job,
    wait_pods,
    workload_of,
)

pytestmark = pytest.mark.realcluster

NS = "pods-e2e"
SPOT_SELECTOR = {"type": "kwok", "cloud.example.com/capacity": "spot"}
SPOT_TOLERATION = {
    "key": "cloud.example.com/spot",
    "operator": "Equal",
    "value": "true",
    "effect": "NoSchedule",
}
QUEUES = "\n---\n".join(
    [
        sample_flavors(),
        flavor_queue(
            NS,
            "cq-spot",
            "lq-spot",
            "spot",
            "2",
            preemption={"withinClusterQueue": "LowerPriority"},
        ),
        flavor_queue(NS, "cq-on-demand", "lq-on-demand", "on-demand", "2"),
        json.dumps(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": "pods-urgent"},
                "value": 1000,
            }
        ),
    ]
)


@pytest.fixture(scope="module")
def cluster(
    control_plane: ControlPlane, nodes: NodeAgents, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    root: Path = tmp_path_factory.mktemp("pods-lifecycle")
    server = ClusterModeServer(control_plane, root)
    server.prepare()
    control_plane.apply(QUEUES)
    server.start()
    try:
        yield control_plane
    finally:
        nodes.clear_namespace(NS)
        server.stop()


def _preemption_events(plane: ControlPlane, victim: dict[str, Any], evicted_message: str) -> None:
    """The victim's Workload Events and the preemptor's, as Kueue records them."""
    wl_events = wait_events(
        plane,
        NS,
        "Workload",
        victim["metadata"]["name"],
        ["QuotaReserved", "Admitted", "Preempted", "EvictedDueToPreempted"],
    )
    notes = {e["reason"]: e["message"] for e in wl_events}
    assert notes["QuotaReserved"].startswith(
        "Quota reserved in ClusterQueue cq-spot, wait time since queued was "
    )
    assert notes["Admitted"] == (
        "Admitted by ClusterQueue cq-spot, wait time since reservation was 0s"
    )
    assert notes["EvictedDueToPreempted"] == evicted_message
    assert evicted_message.endswith("; preemptor path: /cq-spot; preemptee path: /cq-spot")
    priorities = (
        "preemptor effective priority: 1000 (base: 1000, boost: 0); "
        "preemptee effective priority: 0 (base: 0, boost: 0)"
    )
    assert notes["Preempted"] == f"{evicted_message}; {priorities}"
    # The preemptor's Workload says whom it preempted, as Kueue's preemptor does.
    preemptor = workload_of(
        plane, NS, "spot-urgent", "admitted", lambda w: condition(w, "Admitted")
    )
    [preempted] = [
        e
        for e in wait_events(
            plane, NS, "Workload", preemptor["metadata"]["name"], ["PreemptedWorkload"]
        )
        if e["reason"] == "PreemptedWorkload"
    ]
    victim_ref = f"{NS}/{victim['metadata']['name']} (UID: {victim['metadata']['uid']})"
    assert preempted["message"] == (
        f"Preempted workload {victim_ref} in ClusterQueue cq-spot; {priorities}"
    )


def test_an_admitted_job_runs_ready_pods_on_its_flavor_and_preemption_deletes_them(
    cluster: ControlPlane,
) -> None:
    plane = cluster
    started = time.monotonic()
    plane.apply(PodJob("spot-a", NS, "lq-spot", parallelism=2).manifest())

    job = wait_job(plane, NS, "spot-a", "unsuspended", unsuspended)
    template = job["spec"]["template"]["spec"]
    assert template["nodeSelector"] == SPOT_SELECTOR
    assert SPOT_TOLERATION in template["tolerations"]

    # The Job controller's Pods carry the flavor's placement; the scheduler bound them to
    # the spot Node (tainted: only the toleration admits them); kwok made them Ready.
    pods = wait_pods(
        plane, NS, "spot-a", "two Ready", lambda ps: len(ps) == 2 and all(map(ready, ps))
    )
    for pod in pods:
        assert pod["spec"]["nodeSelector"] == SPOT_SELECTOR
        assert SPOT_TOLERATION in pod["spec"]["tolerations"]
        assert pod["spec"]["nodeName"] == "kwok-spot-0"
        assert pod["status"]["phase"] == "Running"

    # PodsReady follows from the Job's status (ready == parallelism).
    wait_job(plane, NS, "spot-a", "status.ready 2", lambda j: j.get("status", {}).get("ready") == 2)
    wl = workload_of(plane, NS, "spot-a", "PodsReady", lambda w: condition(w, "PodsReady"))
    assert wl["status"]["admission"]["podSetAssignments"][0]["flavors"] == {"cpu": "spot"}
    print(f"pods: admission to PodsReady took {time.monotonic() - started:.1f}s")

    # A higher-priority Job takes the quota: spot-a is suspended, its Pods are deleted by
    # the Job controller (kwok finishes the deletion), and the urgent one runs on spot.
    plane.apply(
        PodJob("spot-urgent", NS, "lq-spot", cpu="2", priority_class="pods-urgent").manifest()
    )
    wait_job(plane, NS, "spot-a", "suspended by preemption", suspended)
    wait_pods(plane, NS, "spot-a", "deleted", lambda ps: not ps)
    victim = workload_of(plane, NS, "spot-a", "evicted", lambda w: condition(w, "Evicted"))
    assert condition(victim, "Evicted")["reason"] == "Preempted"  # type: ignore[index]
    assert condition(victim, "Admitted") is None
    restored = wait_job(
        plane,
        NS,
        "spot-a",
        "its own nodeSelector restored",
        lambda j: j["spec"]["template"]["spec"].get("nodeSelector") == {"type": "kwok"},
    )
    assert SPOT_TOLERATION not in (restored["spec"]["template"]["spec"].get("tolerations") or [])
    urgent = wait_pods(plane, NS, "spot-urgent", "Ready", lambda ps: len(ps) == 1 and ready(ps[0]))
    assert urgent[0]["spec"]["nodeName"] == "kwok-spot-0"
    # The victim waits, suspended, with no Pod: nothing of it runs beside the urgent Job.
    assert plane.get_json("job", "spot-a", "-n", NS)["spec"]["suspend"] is True
    assert job_pods(plane, NS, "spot-a") == []

    # What happened, in Events as Kueue records them (docs/cluster.md#events).
    evicted_message = condition(victim, "Evicted")["message"]  # type: ignore[index]
    job_events = wait_events(plane, NS, "Job", "spot-a", ["CreatedWorkload", "Started", "Stopped"])
    ours = [e for e in job_events if e.get("reportingComponent") == "queuescope"]
    assert [e["reason"] for e in ours] == ["CreatedWorkload", "Started", "Stopped"]
    assert {e["type"] for e in ours} == {"Normal"}
    notes = {e["reason"]: e["message"] for e in ours}
    assert notes["CreatedWorkload"] == f"Created Workload: {NS}/{victim['metadata']['name']}"
    assert notes["Started"] == "Admitted by clusterQueue cq-spot"
    assert notes["Stopped"] == evicted_message
    _preemption_events(plane, victim, evicted_message)
    described = plane.kubectl("describe", "job", "spot-a", "-n", NS).stdout
    assert "CreatedWorkload" in described and "Admitted by clusterQueue cq-spot" in described


def test_a_finished_job_frees_its_quota_and_the_next_runs(cluster: ControlPlane) -> None:
    plane = cluster
    runs = {RUN_FOR_ANNOTATION: "3s"}
    plane.apply(PodJob("first", NS, "lq-on-demand", cpu="2", pod_annotations=runs).manifest())
    wait_job(plane, NS, "first", "unsuspended", unsuspended)
    plane.apply(PodJob("second", NS, "lq-on-demand", cpu="2", pod_annotations=runs).manifest())
    pending = workload_of(
        plane, NS, "second", "pending", lambda w: (w.get("status") or {}).get("conditions")
    )
    assert condition(pending, "QuotaReserved") is None
    assert plane.get_json("job", "second", "-n", NS)["spec"]["suspend"] is True
    # Why it waits, as a Warning Event (docs/cluster.md#events).
    waiting = wait_events(plane, NS, "Workload", pending["metadata"]["name"], ["Pending"])
    warnings = [e for e in waiting if e["reason"] == "Pending"]
    assert {e["type"] for e in warnings} == {"Warning"}
    assert warnings[0]["message"].startswith("couldn't assign flavors to pod set main: ")

    # first's Pod runs 3 s on the on-demand Node and succeeds; the Job controller marks
    # the Job Complete, the Workload finishes, and its quota goes to second.
    pods = wait_pods(
        plane, NS, "first", "Succeeded", lambda ps: ps and ps[0]["status"]["phase"] == "Succeeded"
    )
    assert pods[0]["spec"]["nodeName"] == "kwok-on-demand-0"
    wait_job(plane, NS, "first", "Complete", lambda j: condition(j, "Complete"))
    done = workload_of(plane, NS, "first", "Finished", lambda w: condition(w, "Finished"))
    assert condition(done, "Finished")["reason"] == "Succeeded"  # type: ignore[index]
    finished = wait_events(plane, NS, "Job", "first", ["FinishedWorkload"])
    assert f"Workload '{NS}/{done['metadata']['name']}' is declared finished" in {
        e["message"] for e in finished
    }
    wait_job(plane, NS, "second", "unsuspended after first finished", unsuspended)
    wait_job(plane, NS, "second", "Complete", lambda j: condition(j, "Complete"))
    workload_of(plane, NS, "second", "Finished", lambda w: condition(w, "Finished"))
    assert len(job_pods(plane, NS, "second")) == 1

    # A Job whose only Pod fails (backoffLimit 0) fails; its Workload finishes as failed.
    plane.apply(
        PodJob(
            "broken", NS, "lq-on-demand", pod_annotations={FAIL_AFTER_ANNOTATION: "1s"}
        ).manifest()
    )
    wait_job(plane, NS, "broken", "Failed", lambda j: condition(j, "Failed"))
    failed = workload_of(plane, NS, "broken", "Finished", lambda w: condition(w, "Finished"))
    assert condition(failed, "Finished")["reason"] == "Failed"  # type: ignore[index]


def test_a_tapering_jobs_reclaimable_pods_give_their_quota_to_the_next(
    cluster: ControlPlane,
) -> None:
    """docs/cluster.md#reclaimable-pods: a Job of parallelism 2 and 3 completions whose
    first two Pods succeeded needs one slot for its last Pod; the other goes back at
    once (`reclaimablePods`), and a waiting Job takes it while the first still runs."""
    plane = cluster
    runs = {RUN_FOR_ANNOTATION: "8s"}
    doc = json.loads(
        PodJob("tapering", NS, "lq-on-demand", parallelism=2, pod_annotations=runs).manifest()
    )
    doc["spec"]["completions"] = 3
    plane.apply(json.dumps(doc))
    wait_job(plane, NS, "tapering", "unsuspended", unsuspended)
    plane.apply(PodJob("next", NS, "lq-on-demand", pod_annotations=runs).manifest())
    workload_of(plane, NS, "next", "pending", lambda w: condition(w, "QuotaReserved") is None)

    reclaimed = workload_of(
        plane,
        NS,
        "tapering",
        "one Pod reclaimable",
        lambda w: (w.get("status") or {}).get("reclaimablePods"),
    )
    assert reclaimed["status"]["reclaimablePods"] == [{"name": "main", "count": 1}]
    admitted = workload_of(plane, NS, "next", "admitted", lambda w: condition(w, "Admitted"))
    # Admitted on the reclaimed slot, before the tapering Job's last Pod ended.
    tapering = workload_of(plane, NS, "tapering", "finished", lambda w: condition(w, "Finished"))
    reserved_at = (condition(admitted, "QuotaReserved") or {})["lastTransitionTime"]
    finished_at = (condition(tapering, "Finished") or {})["lastTransitionTime"]
    assert reserved_at < finished_at
    wait_job(plane, NS, "next", "Complete", lambda j: condition(j, "Complete"))


def test_a_job_past_its_maximum_execution_time_is_deactivated_and_stopped(
    cluster: ControlPlane,
) -> None:
    """Kueue's `kueue.x-k8s.io/max-exec-time-seconds` label
    (docs/cluster.md#maximum-execution-time): the Workload carries it, and once its Pods
    have run that long the Workload is deactivated and the Job suspended, its Pods
    deleted."""
    plane = cluster
    doc = json.loads(PodJob("bounded", NS, "lq-on-demand").manifest())
    doc["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] = "3"
    plane.apply(json.dumps(doc))
    wl = workload_of(plane, NS, "bounded", "created")
    assert wl["spec"]["maximumExecutionTimeSeconds"] == 3
    wait_pods(plane, NS, "bounded", "Ready", lambda ps: len(ps) == 1 and ready(ps[0]))
    # spec.active and the Evicted condition are two writes (the spec, then the status
    # subresource), as in Kueue: wait for both.
    stopped = workload_of(
        plane,
        NS,
        "bounded",
        "deactivated and evicted",
        lambda w: w["spec"].get("active") is False and condition(w, "Evicted") is not None,
    )
    evicted = condition(stopped, "Evicted")
    assert evicted is not None
    assert evicted["reason"] == "DeactivatedDueToMaximumExecutionTimeExceeded"
    assert evicted["message"] == (
        "The workload is deactivated due to exceeding the maximum execution time"
    )
    wait_job(plane, NS, "bounded", "suspended", suspended)
    wait_pods(plane, NS, "bounded", "deleted", lambda ps: not ps)
    plane.kubectl("delete", "job", "bounded", "-n", NS, "--wait=false")


def test_a_waiting_job_edited_to_fit_gets_its_workload_updated_and_runs(
    cluster: ControlPlane,
) -> None:
    """A suspended Job's edit reaches its Workload, as Kueue updates a not matching
    Workload (docs/cluster.md#a-waiting-job-edited): with a lower parallelism (what
    kube-apiserver lets change in a Job's spec) it fits and runs."""
    plane = cluster
    doc = json.loads(PodJob("too-wide", NS, "lq-on-demand", parallelism=3).manifest())
    doc["spec"]["completions"] = None  # a parallelism of its own, as one edits it
    plane.apply(json.dumps(doc))
    waiting = workload_of(
        plane, NS, "too-wide", "pending", lambda w: condition(w, "QuotaReserved", "False")
    )
    assert waiting["spec"]["podSets"][0]["count"] == 3
    plane.kubectl("patch", "job", "too-wide", "-n", NS, "-p", '{"spec": {"parallelism": 2}}')
    updated = workload_of(
        plane, NS, "too-wide", "updated", lambda w: w["spec"]["podSets"][0]["count"] == 2
    )
    assert updated["metadata"]["uid"] == waiting["metadata"]["uid"]  # updated, not replaced
    wait_job(plane, NS, "too-wide", "unsuspended", unsuspended)
    [event] = [
        e
        for e in wait_events(plane, NS, "Job", "too-wide", ["UpdatedWorkload"])
        if e["reason"] == "UpdatedWorkload"
    ]
    assert event["message"] == (
        f"Updated not matching Workload for suspended job: {NS}/{waiting['metadata']['name']}"
    )
    plane.kubectl("delete", "job", "too-wide", "-n", NS, "--wait=false")


def test_a_waiting_job_given_a_higher_priority_class_preempts_and_runs(
    cluster: ControlPlane,
) -> None:
    """A new WorkloadPriorityClass label reaches the Workload, as in Kueue v0.19.2
    (docs/cluster.md#a-new-priority-class): the waiting Job then outranks the running one
    and preempts it."""
    plane = cluster
    plane.kubectl("delete", "jobs", "spot-a", "spot-urgent", "-n", NS, "--ignore-not-found")
    wait_for(
        lambda: True if not job_pods(plane, NS, "spot-urgent") else None,
        timeout=60,
        what="the earlier spot Jobs' Pods gone",
    )
    top = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "pods-top"},
        "value": 2000,
    }
    plane.apply(json.dumps(top))
    plane.apply(PodJob("holder", NS, "lq-spot", cpu="2").manifest())
    wait_pods(plane, NS, "holder", "Ready", lambda ps: len(ps) == 1 and ready(ps[0]))
    plane.apply(PodJob("bumped", NS, "lq-spot", cpu="2").manifest())
    waiting = workload_of(
        plane, NS, "bumped", "pending", lambda w: condition(w, "QuotaReserved", "False")
    )
    plane.kubectl("label", "job", "bumped", "-n", NS, "kueue.x-k8s.io/priority-class=pods-top")
    raised = workload_of(plane, NS, "bumped", "raised", lambda w: w["spec"].get("priority") == 2000)
    assert raised["spec"]["priorityClassRef"]["name"] == "pods-top"  # v1beta2, as read
    assert raised["metadata"]["uid"] == waiting["metadata"]["uid"]
    wait_job(plane, NS, "holder", "preempted", suspended)
    wait_pods(plane, NS, "bumped", "Ready", lambda ps: len(ps) == 1 and ready(ps[0]))
    [event] = [
        e
        for e in wait_events(plane, NS, "Job", "bumped", ["UpdatedWorkload"])
        if e["reason"] == "UpdatedWorkload"
    ]
    assert event["message"] == (
        f"Updated workload priority class: {NS}/{waiting['metadata']['name']}"
    )
    plane.kubectl("delete", "jobs", "holder", "bumped", "-n", NS, "--wait=false")


def test_a_running_job_given_another_parallelism_gets_a_new_workload(
    cluster: ControlPlane,
) -> None:
    """docs/cluster.md#a-running-job-edited: as Kueue does, a running Job whose
    `parallelism` no longer matches its admitted Workload is stopped (its Pods deleted),
    the Workload deleted and a new one made for the new count, admitted and run: the
    quota always covers what runs."""
    plane = cluster
    plane.apply(flavor_queue(NS, "cq-edited", "lq-edited", "on-demand", "2"))
    doc = json.loads(PodJob("grown", NS, "lq-edited").manifest())
    doc["spec"]["completions"] = None  # a parallelism of its own, as one scales it
    plane.apply(json.dumps(doc))
    wait_pods(plane, NS, "grown", "Ready", lambda ps: len(ps) == 1 and ready(ps[0]))
    first = workload_of(plane, NS, "grown", "admitted", lambda w: condition(w, "Admitted"))
    plane.kubectl("patch", "job", "grown", "-n", NS, "-p", '{"spec": {"parallelism": 2}}')
    replaced = workload_of(
        plane,
        NS,
        "grown",
        "a new one of two Pods, admitted",
        lambda w: (
            w["metadata"]["uid"] != first["metadata"]["uid"]
            and w["spec"]["podSets"][0]["count"] == 2
            and condition(w, "Admitted")
        ),
    )
    assert replaced["metadata"]["name"] == first["metadata"]["name"]  # Kueue's name again
    reasons = wait_events(plane, NS, "Job", "grown", ["Stopped", "DeletedWorkload"])
    said = {e["reason"]: e["message"] for e in reasons}
    assert said["Stopped"] == (
        "No matching Workload; restoring pod templates according to existent Workload"
    )
    assert said["DeletedWorkload"] == (
        f"Deleted not matching Workload: {NS}/{first['metadata']['name']}"
    )
    wait_pods(plane, NS, "grown", "two Ready", lambda ps: len(ps) == 2 and all(map(ready, ps)))
    plane.kubectl("delete", "job", "grown", "-n", NS, "--wait=false")


def test_a_partially_admitted_job_runs_the_count_it_was_admitted_with(
    cluster: ControlPlane,
) -> None:
    """docs/cluster.md#partial-admission: three Pods of 1 cpu against a queue of 2, with
    `job-min-parallelism: 1`, are admitted two; the Job runs two Pods, not three."""
    plane = cluster
    plane.apply(flavor_queue(NS, "cq-partial", "lq-partial", "on-demand", "2"))
    doc = json.loads(PodJob("partial", NS, "lq-partial", parallelism=3).manifest())
    doc["metadata"]["annotations"] = {"kueue.x-k8s.io/job-min-parallelism": "1"}
    plane.apply(json.dumps(doc))
    admitted = workload_of(plane, NS, "partial", "admitted", lambda w: condition(w, "Admitted"))
    assert admitted["spec"]["podSets"][0]["count"] == 3
    assert admitted["spec"]["podSets"][0]["minCount"] == 1
    assert admitted["status"]["admission"]["podSetAssignments"][0]["count"] == 2
    job = wait_job(plane, NS, "partial", "started", unsuspended)
    assert job["spec"]["parallelism"] == 2
    wait_pods(plane, NS, "partial", "two Ready", lambda ps: len(ps) == 2 and all(map(ready, ps)))
    assert len(job_pods(plane, NS, "partial")) == 2
    plane.kubectl("delete", "job", "partial", "-n", NS, "--wait=false")
