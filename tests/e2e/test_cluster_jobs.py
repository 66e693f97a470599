"""Cluster mode end to end: batch/v1 Jobs through the real kube-apiserver (issue 5 E2E).

The server runs as `queuescope serve --kubeconfig` with our ServiceAccount's token; it
lists and watches the API, creates Workloads for Jobs, writes admissions through the
status subresource, unsuspends and suspends Jobs, and serves the visibility API
through the aggregation layer. No kube-controller-manager runs, so Job status (ready
pods, completion) is patched by the test, as the Job controller would.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.aggregated import Aggregated, cq_path
from tests.e2e.cluster import ClusterModeServer, cpu_queue, flavor, wait_json
from tests.e2e.harness import ControlPlane, wait_for

pytestmark = pytest.mark.realcluster

NS = "jobs-e2e"
QUEUES = "\n---\n".join(
    [
        flavor("pool-a", pool="a"),
        cpu_queue(
            NS,
            "pool-a",
            "cq-jobs",
            "lq-jobs",
            "2",
            preemption={"withinClusterQueue": "LowerPriority"},
        ),
        cpu_queue(NS, "pool-a", "cq-done", "lq-done", "2"),
        json.dumps(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta1",
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": "urgent"},
                "value": 1000,
            }
        ),
    ]
)


CONFIG = """
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
queueVisibility:
  updateIntervalSeconds: 1
  clusterQueues: {maxCount: 10}
  localQueues: {maxCount: 10, maxPosition: 10}
"""


def job(name: str, cpu: str = "1", priority_class: str | None = None) -> str:
    labels = {"kueue.x-k8s.io/queue-name": "lq-jobs"}
    if priority_class:
        labels["kueue.x-k8s.io/priority-class"] = priority_class
    doc = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {
            "suspend": True,
            "parallelism": 1,
            "completions": 1,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {"team": "research"},
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"requests": {"cpu": cpu}},
                        }
                    ],
                }
            },
        },
    }
    return json.dumps(doc)


def _condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_ and c.get("status") == "True":
            return dict(c)
    return None


@pytest.fixture(scope="module")
def cluster(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ControlPlane, ClusterModeServer]]:
    root: Path = tmp_path_factory.mktemp("cluster-jobs")
    config = root / "config.yaml"
    config.write_text(CONFIG)
    server = ClusterModeServer(control_plane, root, extra_args=["--config", str(config)])
    server.prepare()
    control_plane.apply(QUEUES)
    server.start()
    try:
        yield control_plane, server
    finally:
        server.stop()


def workload_of(plane: ControlPlane, job_name: str) -> dict[str, Any]:
    doc = wait_json(
        plane,
        f"the Workload of job {job_name}",
        lambda d: [
            w
            for w in d["items"]
            if any(r.get("name") == job_name for r in w["metadata"].get("ownerReferences", []))
        ],
        "workloads.kueue.x-k8s.io",
        "-n",
        NS,
    )
    return next(
        w
        for w in doc["items"]
        if any(r.get("name") == job_name for r in w["metadata"].get("ownerReferences", []))
    )


def wait_job(plane: ControlPlane, name: str, what: str, predicate: Any) -> dict[str, Any]:
    return dict(wait_json(plane, f"job {name}: {what}", predicate, "job", name, "-n", NS))


def test_jobs_are_admitted_unsuspended_ready_finished_and_preempted(
    cluster: tuple[ControlPlane, ClusterModeServer],
) -> None:
    plane, _server = cluster
    plane.apply(job("small-1"))
    plane.apply(job("small-2"))

    # Admitted: the Workload is owned by the Job and carries the admission; the Job is
    # unsuspended with the flavor's node labels added to its own selector.
    for name in ("small-1", "small-2"):
        wl = workload_of(plane, name)
        owner = wl["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["controller"]) == ("Job", name, True)
        started = wait_job(plane, name, "unsuspended", lambda j: not j["spec"].get("suspend"))
        assert started["spec"]["template"]["spec"]["nodeSelector"] == {
            "team": "research",
            "pool": "a",
        }
        wl = wait_json(
            plane,
            f"{name} admitted",
            lambda w: _condition(w, "Admitted"),
            "workloads.kueue.x-k8s.io",
            wl["metadata"]["name"],
            "-n",
            NS,
        )
        assert wl["status"]["admission"]["clusterQueue"] == "cq-jobs"
        assert wl["status"]["admission"]["podSetAssignments"][0]["flavors"] == {"cpu": "pool-a"}

    # The third does not fit: its Job stays suspended, its Workload pending and listed.
    plane.apply(job("small-3"))
    third = workload_of(plane, "small-3")
    pending = wait_json(
        plane,
        "small-3 pending with a reason",
        lambda w: (w.get("status") or {}).get("conditions"),
        "workloads.kueue.x-k8s.io",
        third["metadata"]["name"],
        "-n",
        NS,
    )
    assert _condition(pending, "QuotaReserved") is None
    assert plane.get_json("job", "small-3", "-n", NS)["spec"]["suspend"] is True

    # KEP-168 status visibility, written by the leader every updateInterval. v1beta1 only:
    # v1beta2 has no ClusterQueue status.pendingWorkloadsStatus, so read it as v1beta1 (the
    # conversion webhook keeps it for v1beta1 readers).
    third_name = third["metadata"]["name"]
    cq = wait_json(
        plane,
        "cq-jobs pendingWorkloadsStatus lists small-3",
        lambda q: [
            w
            for w in (q.get("status") or {})
            .get("pendingWorkloadsStatus", {})
            .get("clusterQueuePendingWorkload", [])
            if w["name"] == third_name
        ],
        "clusterqueues.v1beta1.kueue.x-k8s.io",
        "cq-jobs",
    )
    assert cq["status"]["pendingWorkloads"] == 1
    assert cq["status"]["admittedWorkloads"] == 2
    lq = wait_json(
        plane,
        "lq-jobs pendingWorkloadsStatus lists small-3",
        lambda q: (q.get("status") or {}).get("pendingWorkloadsStatus", {}).get("head"),
        "localqueues.v1beta1.kueue.x-k8s.io",
        "lq-jobs",
        "-n",
        NS,
    )
    head = lq["status"]["pendingWorkloadsStatus"]["head"]
    assert [(w["name"], w["position"]) for w in head] == [(third_name, 0)]

    # PodsReady from the Job's status (ready + succeeded >= parallelism).
    plane.kubectl(
        "patch", "job", "small-1", "-n", NS, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"ready": 1, "active": 1}}),
    )  # fmt: skip
    first = workload_of(plane, "small-1")
    wait_json(
        plane,
        "small-1 PodsReady",
        lambda w: _condition(w, "PodsReady"),
        "workloads.kueue.x-k8s.io",
        first["metadata"]["name"],
        "-n",
        NS,
    )

    # A higher-priority Job preempts one of the two admitted ones: that Job is suspended
    # again with its own node selector restored, and the urgent one runs.
    plane.apply(job("urgent", priority_class="urgent"))
    wait_job(plane, "urgent", "unsuspended", lambda j: not j["spec"].get("suspend"))
    victims = [
        name
        for name in ("small-1", "small-2")
        if plane.get_json("job", name, "-n", NS)["spec"].get("suspend")
    ]
    assert len(victims) == 1
    wait_job(
        plane,
        victims[0],
        "its own node selector restored",
        lambda j: j["spec"]["template"]["spec"].get("nodeSelector") == {"team": "research"},
    )
    evicted = workload_of(plane, victims[0])
    assert _condition(evicted, "Evicted") is not None
    assert _condition(evicted, "Admitted") is None


def test_a_finished_job_frees_its_quota_for_the_next(
    cluster: tuple[ControlPlane, ClusterModeServer],
) -> None:
    plane, _server = cluster
    plane.apply(job("first", cpu="2").replace("lq-jobs", "lq-done"))
    plane.apply(job("second", cpu="2").replace("lq-jobs", "lq-done"))
    wait_job(plane, "first", "unsuspended", lambda j: not j["spec"].get("suspend"))
    assert plane.get_json("job", "second", "-n", NS)["spec"]["suspend"] is True
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    conditions = [
        {"type": t, "status": "True", "lastTransitionTime": now, "lastProbeTime": now}
        for t in ("SuccessCriteriaMet", "Complete")
    ]
    plane.kubectl(
        "patch", "job", "first", "-n", NS, "--subresource=status", "--type=merge", "-p",
        json.dumps({"status": {"startTime": now, "completionTime": now, "succeeded": 1,
                               "conditions": conditions}}),
    )  # fmt: skip
    done = workload_of(plane, "first")
    wait_json(
        plane,
        "first Finished",
        lambda w: _condition(w, "Finished"),
        "workloads.kueue.x-k8s.io",
        done["metadata"]["name"],
        "-n",
        NS,
    )
    wait_job(
        plane, "second", "unsuspended after first finished", lambda j: not j["spec"]["suspend"]
    )


def test_the_visibility_api_lists_jobs_pending_through_the_aggregator(
    cluster: tuple[ControlPlane, ClusterModeServer],
) -> None:
    plane, server = cluster
    admin = plane.admin
    env = Aggregated(plane=plane, server=server, alice=admin, bob=admin, carol=admin)
    env.register(server.certs.ca_cert.read_bytes())
    try:
        env.wait_available()
        plane.apply(job("big", cpu="3"))
        big = workload_of(plane, "big")

        def listed() -> Any:
            response = plane.request(cq_path("v1beta2", "cq-jobs"), plane.admin)
            if response.status != 200:
                return None
            names = [item["metadata"]["name"] for item in response.json()["items"]]
            return names if big["metadata"]["name"] in names else None

        names = wait_for(listed, timeout=60, what="the big Job's Workload listed as pending")
        assert big["metadata"]["name"] in names

        # The server's own checks, exported: kube-apiserver trusts what it serves (read
        # back from the APIServices), the served certificate's expiry, the loop's lag.
        def metrics() -> str | None:
            body = server.as_front_proxy("/metrics", "e2e-admin", ("system:masters",)).body
            text = body.decode()
            return text if "queuescope_apiservice_cabundle_trusted 1.0" in text else None

        # The dashboard is served by the cluster-mode server too (directly, or through
        # `kubectl port-forward`), with the same delegated authorization.
        page = server.as_front_proxy("/dashboard", "e2e-admin", ("system:masters",))
        assert page.status == 200 and b"<html" in page.body.lower()
        pending = server.as_front_proxy(
            "/dashboard/api/v1/clusterqueues/cq-jobs/pending", "e2e-admin", ("system:masters",)
        )
        assert pending.status == 200, pending.body[:300]
        listed_names = [i["name"] for i in json.loads(pending.body)["items"]]
        assert big["metadata"]["name"] in listed_names
        denied = server.as_front_proxy(
            "/dashboard/api/v1/clusterqueues/cq-jobs/pending", "nobody", ("system:authenticated",)
        )
        assert denied.status == 403

        text = wait_for(metrics, timeout=90, what="queuescope_apiservice_cabundle_trusted 1")
        assert "queuescope_serving_cert_not_after_seconds " in text
        assert "queuescope_event_loop_lag_seconds_count " in text
        assert "queuescope_leader 1.0" in text
    finally:
        plane.kubectl(
            "delete", "apiservice", "v1beta2.visibility.kueue.x-k8s.io",
            "v1beta1.visibility.kueue.x-k8s.io", "--ignore-not-found", check=False,
        )  # fmt: skip
