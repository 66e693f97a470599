"""objectRetentionPolicies with real Jobs and Pods (docs/cluster.md#object-retention).

The server runs with Kueue v0.19's v1beta2 Configuration: a 3 s pods-ready timeout and no
requeue (the first timeout deactivates), and both retention periods at 2 s. Three Jobs:
- `done` runs to completion: its Workload is deleted 2 s after it finished; the Job
  stays, and no Workload is made for it again;
- `paused` is deactivated by its user (`spec.active: false`): nothing is deleted;
- `stuck` never becomes ready and Kueue's rules deactivate it: 2 s later its Job is
  deleted, and its Pods and Workload go with it.
`paused` is deactivated before `stuck` is even created, so when `stuck`'s Job is gone,
`paused` has waited longer than the period without being touched.

And a Workload of no Job, still carrying the finalizer Kueue puts on what it admits (as one
left from before a switch would), that someone else marks Finished: deleted, its Kueue
finalizer released, gone.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.bulk import pending_workload, server_metrics
from tests.e2e.cluster import ClusterModeServer, wait_json
from tests.e2e.harness import ControlPlane, wait_for
from tests.e2e.nodes import NEVER_READY_LABEL, RUN_FOR_ANNOTATION, NodeAgents
from tests.e2e.pods import (
    PodJob,
    condition,
    configured_server,
    evicted_for,
    flavor_queue,
    suspended,
    wait_events,
    wait_job,
    wait_pods,
    workload_of,
)

pytestmark = pytest.mark.realcluster

KUEUE_FINALIZER = "kueue.x-k8s.io/resource-in-use"
NS = "retention-e2e"
RETENTION_SECONDS = 2
CONFIG = f"""
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
waitForPodsReady:
  timeout: 3s
  requeuingStrategy:
    backoffLimitCount: 0
objectRetentionPolicies:
  workloads:
    afterFinished: {RETENTION_SECONDS}s
    afterDeactivatedByKueue: {RETENTION_SECONDS}s
"""


@pytest.fixture(scope="module")
def server(
    nodes: NodeAgents, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterModeServer]:
    queues = flavor_queue(NS, "cq-retain", "lq-retain", "on-demand", "4")
    with configured_server(nodes, tmp_path_factory.mktemp("retention"), CONFIG, NS, queues) as s:
        yield s


def _workloads_of(plane: ControlPlane, job: str) -> list[dict[str, Any]]:
    items = plane.get_json("workloads.kueue.x-k8s.io", "-n", NS)["items"]
    return [
        w
        for w in items
        if any(r.get("name") == job for r in w["metadata"].get("ownerReferences") or [])
    ]


def _job(plane: ControlPlane, name: str) -> dict[str, Any] | None:
    result = plane.kubectl("get", "job", name, "-n", NS, "-o", "json", check=False)
    if result.returncode != 0:
        assert "NotFound" in result.stderr, result.stderr
        return None
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def _since(condition_: dict[str, Any] | None) -> str:
    assert condition_ is not None
    return str(condition_["lastTransitionTime"])


def test_finished_workloads_and_jobs_deactivated_by_kueue_are_deleted(
    server: ClusterModeServer,
) -> None:
    plane = server.plane
    plane.apply(
        PodJob("done", NS, "lq-retain", pod_annotations={RUN_FOR_ANNOTATION: "1s"}).manifest()
    )
    plane.apply(PodJob("paused", NS, "lq-retain").manifest())

    # The user deactivates `paused` once it runs: evicted "Deactivated", suspended, kept.
    running = workload_of(plane, NS, "paused", "ready", lambda w: condition(w, "PodsReady"))
    plane.kubectl(
        "patch",
        "workloads.kueue.x-k8s.io",
        running["metadata"]["name"],
        "-n",
        NS,
        "--type=merge",
        "-p",
        '{"spec": {"active": false}}',
    )
    paused = workload_of(
        plane,
        NS,
        "paused",
        "evicted by its user",
        evicted_for("Deactivated"),
    )
    wait_job(plane, NS, "paused", "suspended by the deactivation", suspended)

    # `done` finishes, and its Workload is deleted after the period; the Job stays.
    done = workload_of(plane, NS, "done", "finished", lambda w: condition(w, "Finished"))
    finished_at = _since(condition(done, "Finished"))
    started = time.monotonic()
    wait_for(
        lambda: not _workloads_of(plane, "done") or None,
        timeout=120,
        what="the finished Workload of job done deleted",
    )
    print(f"retention: finished at {finished_at}, gone {time.monotonic() - started:.1f}s later")

    # `stuck` is created only now: its deactivation comes after `paused`'s.
    plane.apply(PodJob("stuck", NS, "lq-retain", pod_labels={NEVER_READY_LABEL: "true"}).manifest())
    stuck = workload_of(
        plane,
        NS,
        "stuck",
        "deactivated by Kueue",
        lambda w: (
            w["spec"].get("active") is False
            and evicted_for("DeactivatedDueToRequeuingLimitExceeded")(w)
        ),
    )
    assert _since(condition(stuck, "Evicted")) >= _since(condition(paused, "Evicted"))
    wait_for(
        lambda: _job(plane, "stuck") is None or None,
        timeout=120,
        what="job stuck deleted after its deactivation",
    )
    wait_for(
        lambda: not _workloads_of(plane, "stuck") or None,
        timeout=120,
        what="the Workload of job stuck gone with its Job",
    )
    wait_pods(plane, NS, "stuck", "gone with their Job", lambda ps: not ps)
    deleted = wait_events(plane, NS, "Job", "stuck", ["Deleted"])
    assert "Deleted job: deactivation retention period expired" in {
        e["message"] for e in deleted if e["reason"] == "Deleted"
    }
    deleted = wait_events(plane, NS, "Workload", done["metadata"]["name"], ["Deleted"])
    assert "Deleted finished workload due to elapsed retention" in {
        e["message"] for e in deleted if e["reason"] == "Deleted"
    }

    # What the policies do not cover is untouched: the user's deactivation, and a
    # finished Job (only its Workload was deleted, and none was made again).
    paused_job = _job(plane, "paused")
    assert paused_job is not None and suspended(paused_job)
    [kept] = _workloads_of(plane, "paused")
    assert kept["spec"]["active"] is False
    done_job = _job(plane, "done")
    assert done_job is not None and condition(done_job, "Complete") is not None
    assert _workloads_of(plane, "done") == []
    wait_pods(plane, NS, "paused", "deleted by the suspension", lambda ps: not ps)
    # The policy is cluster-wide: Jobs that earlier modules left deactivated on the shared
    # control plane are deleted too, so the count is at least this test's one.
    metrics = server_metrics(server)
    assert metrics['queuescope_retention_deletes_total{result="job"}'] >= 1
    assert metrics['queuescope_retention_deletes_total{result="error"}'] == 0
    # Every Event the leader wrote was accepted by kube-apiserver's validation.
    assert metrics['queuescope_events_total{result="written"}'] >= 10
    assert metrics['queuescope_events_total{result="error"}'] == 0


def test_kueues_finalizer_does_not_keep_a_finished_workload(server: ClusterModeServer) -> None:
    plane = server.plane
    before = server_metrics(server)['queuescope_retention_deletes_total{result="workload"}']
    plain = pending_workload(NS, "lq-retain", 1)
    plain["metadata"]["finalizers"] = [KUEUE_FINALIZER]
    plane.apply(json.dumps(plain))
    name = plain["metadata"]["name"]
    wait_json(
        plane,
        "the plain Workload admitted",
        lambda w: condition(w, "Admitted") is not None,
        "workloads.kueue.x-k8s.io",
        name,
        "-n",
        NS,
    )
    finished = {
        "type": "Finished",
        "status": "True",
        "reason": "Succeeded",
        "message": "done elsewhere",
        "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    plane.kubectl(
        "patch",
        "workloads.kueue.x-k8s.io",
        name,
        "-n",
        NS,
        "--subresource=status",
        "--type=json",
        "-p",
        json.dumps([{"op": "add", "path": "/status/conditions/-", "value": finished}]),
    )
    wait_for(
        lambda: (
            plane.kubectl("get", "workloads.kueue.x-k8s.io", name, "-n", NS, check=False).returncode
            != 0
            or None
        ),
        timeout=120,
        what="the finished Workload with Kueue's finalizer gone",
    )
    after = server_metrics(server)['queuescope_retention_deletes_total{result="workload"}']
    assert after >= before + 1  # cluster-wide, as above
