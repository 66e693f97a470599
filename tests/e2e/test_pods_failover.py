"""A leader failover while Jobs run real Pods (issue 16; docs/cluster.md#high-availability).

Two replicas with leader election. Six one-CPU Jobs share a two-CPU ClusterQueue; each
Pod runs 3 s on a kwok Node and succeeds. The leader is stopped while the first Jobs run
and the rest wait; the other replica takes the Lease and carries on. In the end every Job
completed with exactly one Pod (nothing lost, nothing run twice), every Workload is
Finished, and at no moment did more Pods run than the quota allows (nothing admitted
twice).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.cluster import ClusterModeServer, install
from tests.e2e.harness import ControlPlane, wait_for
from tests.e2e.nodes import RUN_FOR_ANNOTATION, NodeAgents
from tests.e2e.pods import PodJob, condition, flavor_queue, sample_flavors, wait_job

pytestmark = pytest.mark.realcluster

NS = "pods-failover-e2e"
LEASE = ("lease", "queuescope-controller-leader", "-n", "queuescope-system")
JOBS = [f"f{i}" for i in range(6)]
QUOTA = 2
# How long each Pod runs: three waves of two, long enough that the failover (a SIGTERM
# and a graceful stop) falls while Jobs still wait for quota, even on a loaded machine
# (with 3 s, one CI run under a load of 25 saw every Job complete before the stop).
RUN_FOR = "10s"


def _holder(plane: ControlPlane) -> str:
    result = plane.kubectl("get", *LEASE, "-o", "json", check=False)
    if result.returncode != 0:
        return ""
    return str(json.loads(result.stdout)["spec"].get("holderIdentity") or "")


class RunningPeak:
    """The most Pods seen Running (or Pending on a Node) at once, polled in a thread."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            result = self.plane.kubectl("get", "pods", "-n", NS, "-o", "json", check=False)
            if result.returncode == 0:
                items = json.loads(result.stdout)["items"]
                active = [
                    p
                    for p in items
                    if p["status"].get("phase") in ("Pending", "Running")
                    and not p["metadata"].get("deletionTimestamp")
                ]
                self.peak = max(self.peak, len(active))
            self._stop.wait(0.3)

    def __enter__(self) -> RunningPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture(scope="module")
def plane(
    control_plane: ControlPlane, nodes: NodeAgents, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    install(control_plane)
    control_plane.apply(
        sample_flavors() + "\n---\n" + flavor_queue(NS, "cq-fo", "lq-fo", "on-demand", str(QUOTA))
    )
    try:
        yield control_plane
    finally:
        nodes.clear_namespace(NS)


def _start(plane: ControlPlane, root: Path, pod_name: str) -> ClusterModeServer:
    server = ClusterModeServer(plane, root, leader_elect=True, pod_name=pod_name)
    server.prepare()
    server.start()
    return server


def test_a_failover_while_pods_run_loses_and_doubles_nothing(
    plane: ControlPlane, tmp_path: Path
) -> None:
    first = _start(plane, tmp_path / "one", "pods-one")
    second: ClusterModeServer | None = None
    try:
        wait_for(
            lambda: True if _holder(plane).startswith("pods-one_") else None,
            timeout=60,
            what="pods-one holds the Lease",
        )
        second = _start(plane, tmp_path / "two", "pods-two")
        with RunningPeak(plane) as peak:
            for name in JOBS:
                plane.apply(
                    PodJob(
                        name, NS, "lq-fo", pod_annotations={RUN_FOR_ANNOTATION: RUN_FOR}
                    ).manifest()
                )
            # Mid-way: the first two run, the others wait for their quota.
            wait_job(plane, NS, JOBS[0], "running", lambda j: (j.get("status") or {}).get("active"))
            started = time.monotonic()
            first.stop()  # SIGTERM: stops writing, releases the Lease
            # The failover is in the middle: Jobs still wait for quota the old leader
            # never gave them.
            done = [
                j["metadata"]["name"]
                for j in plane.get_json("jobs", "-n", NS)["items"]
                if condition(j, "Complete")
            ]
            assert len(done) < len(JOBS) - QUOTA, done
            wait_for(
                lambda: True if _holder(plane).startswith("pods-two_") else None,
                timeout=60,
                what="pods-two takes the Lease",
            )
            print(f"pods failover: pods-two led {time.monotonic() - started:.1f}s after SIGTERM")
            for name in JOBS:
                wait_job(plane, NS, name, "Complete", lambda j: condition(j, "Complete"))
        assert 0 < peak.peak <= QUOTA, f"{peak.peak} Pods active at once with {QUOTA} CPUs"

        pods: dict[str, list[dict[str, Any]]] = {name: [] for name in JOBS}
        for pod in plane.get_json("pods", "-n", NS)["items"]:
            pods[pod["metadata"]["labels"]["batch.kubernetes.io/job-name"]].append(pod)
        for name in JOBS:
            assert [p["status"]["phase"] for p in pods[name]] == ["Succeeded"], name
            assert plane.get_json("job", name, "-n", NS)["status"]["succeeded"] == 1
        workloads = [
            w
            for w in plane.get_json("workloads.kueue.x-k8s.io", "-n", NS)["items"]
            if w["metadata"].get("ownerReferences")
        ]
        owners = sorted(w["metadata"]["ownerReferences"][0]["name"] for w in workloads)
        assert owners == JOBS  # one Workload per Job: none lost, none created twice
        for w in workloads:
            assert condition(w, "Finished") is not None, w["metadata"]["name"]
            assert condition(w, "Evicted") is None, w["metadata"]["name"]
    finally:
        first.stop()
        if second is not None:
            second.stop()
