"""Cluster mode over 10,000 stored Workloads (issue 17): a quiet start, a prompt
shutdown, and no write storm.

Two replicas with leader election, as the HA overlay runs them, over 10,000 pending
Workloads in a ClusterQueue without quota (BestEffortFIFO: a cycle examines every one
and leaves a pending condition on each in the core):

* the first leader writes a pending condition only for the Workloads nearest the head
  (at most the head window, docs/operations.md "Workload status writes");
* SIGTERM: the leader exits by itself (exit code 0) before the pod's grace period, the
  manifest's `terminationGracePeriodSeconds`, and releases the Lease;
* the other replica takes over and writes nothing already stored: every Workload keeps
  its resourceVersion;
* nothing is lost: the new leader admits the heads once quota appears, and the
  visibility API answers for a Workload far beyond the window.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from scheduler.runtime.kube.status_writer import PENDING_WINDOW
from tests.e2e.bulk import (
    Admin,
    WorkloadWatch,
    create_workloads,
    resource_versions,
    server_metrics,
    wait_until_quiet,
    writes_made,
)
from tests.e2e.cluster import ClusterModeServer, cpu_queue, flavor, install, wait_json
from tests.e2e.harness import ADMIN_GROUPS, ADMIN_USER, ControlPlane, wait_for

pytestmark = pytest.mark.realcluster

REPO = Path(__file__).resolve().parents[2]
NS = "quiet-e2e"
CQ = "cq-quiet"
LQ = "lq-quiet"
WORKLOADS = 10_000
QUIET_SECONDS = 3.0
READY_SECONDS = 300.0
WORKLOADS_PATH = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads"
LEASE = ("lease", "queuescope-controller-leader", "-n", "queuescope-system")


def grace_period() -> float:
    """The pod's terminationGracePeriodSeconds, from the manifest we ship."""
    deployment = yaml.safe_load((REPO / "manifests/deploy/deployment.yaml").read_text())
    return float(deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"])


def queues(cpu: str) -> str:
    return (
        flavor("quiet-flavor")
        + "\n---\n"
        + cpu_queue(NS, "quiet-flavor", CQ, LQ, cpu, queueingStrategy="BestEffortFIFO")
    )


def pending_names(server: ClusterModeServer, offset: int, limit: int) -> list[str]:
    """Names in the ClusterQueue's pending listing (the visibility API, from the core)."""
    path = f"/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/{CQ}/pendingworkloads"
    response = server.as_front_proxy(
        f"{path}?offset={offset}&limit={limit}", ADMIN_USER, ADMIN_GROUPS
    )
    assert response.status == 200, response.body[:300]
    return [item["metadata"]["name"] for item in json.loads(response.body)["items"]]


def holder(plane: ControlPlane) -> str:
    return str(plane.get_json(*LEASE)["spec"].get("holderIdentity") or "")


def replica(plane: ControlPlane, root: Path, pod: str) -> ClusterModeServer:
    # Ready after the initial sync of 10,000 Workloads: about 20 s on two quiet cores, more
    # than 60 s under a load of 25 (one CI run), so the wait is that of the quiet start.
    server = ClusterModeServer(
        plane, root, leader_elect=True, pod_name=pod, ready_seconds=READY_SECONDS
    )
    server.root.mkdir(parents=True, exist_ok=True)
    server.prepare()
    return server


def test_restart_and_failover_over_10k_workloads_write_nothing_stored(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    plane = control_plane
    install(plane)
    plane.apply(queues("0"))
    admin = Admin(plane)
    created = create_workloads(admin, NS, LQ, WORKLOADS)
    print(f"quiet-start: {WORKLOADS:,} Workloads created in {created:.1f} s")

    first = replica(plane, tmp_path / "one", "replica-one")
    second: ClusterModeServer | None = None
    watch = WorkloadWatch(admin, NS)
    try:
        started = time.monotonic()
        first.start()
        wait_until_quiet(first, watch, quiet=QUIET_SECONDS, timeout=600)
        print(f"quiet-start: first start quiet after {time.monotonic() - started:.1f} s")
        # A pending condition only for the Workloads nearest the head.
        assert 0 < watch.count() <= PENDING_WINDOW
        heads = pending_names(first, 0, PENDING_WINDOW)
        assert len(heads) == PENDING_WINDOW
        assert watch.written <= set(heads)
        # The rest waited for the window (the server also writes the fixture's own
        # Workloads in other namespaces, which this watch does not see).
        deferred = server_metrics(first)[
            'queuescope_workload_status_writes_total{result="deferred"}'
        ]
        assert deferred >= WORKLOADS - PENDING_WINDOW
        stored = resource_versions(admin, NS)
        assert len(stored) == WORKLOADS

        second = replica(plane, tmp_path / "two", "replica-two")
        second.start()
        assert holder(plane).startswith("replica-one_")

        # SIGTERM to the leader: it exits by itself, before the pod would be killed.
        stopped = time.monotonic()
        assert first.process is not None
        code = first.process.stop()
        took = time.monotonic() - stopped
        print(f"quiet-start: SIGTERM to exit {took:.1f} s at {WORKLOADS:,} Workloads")
        assert code == 0, "the leader did not exit by itself after SIGTERM"
        assert took < grace_period()

        # The other replica takes over and writes nothing the server already holds.
        wait_for(
            lambda: True if holder(plane).startswith("replica-two_") else None,
            timeout=60,
            what="replica-two takes the Lease",
        )
        wait_until_quiet(second, watch, quiet=QUIET_SECONDS, timeout=600)
        assert resource_versions(admin, NS) == stored
        assert writes_made(server_metrics(second)) == 0

        # Nothing lost: the visibility API answers far beyond the head window ...
        deep = pending_names(second, 9000, 5)
        assert len(deep) == 5 and not set(deep) & watch.written
        # ... and the new leader admits the heads once there is quota.
        plane.apply(queues("3"))
        wait_json(
            plane,
            "three admissions by the new leader",
            lambda doc: (
                sum(
                    1
                    for w in doc["items"]
                    if any(
                        c["type"] == "Admitted" and c["status"] == "True"
                        for c in (w.get("status") or {}).get("conditions") or []
                    )
                )
                == 3
            ),
            "workloads.kueue.x-k8s.io",
            "-n",
            NS,
            timeout=120,
        )
    finally:
        watch.close()
        first.stop()
        if second is not None:
            second.stop()
        # One request, not 10,000: later tests' servers list every Workload.
        admin.request("DELETE", WORKLOADS_PATH)
        plane.kubectl("delete", "clusterqueue", CQ, "--wait=false", check=False)
