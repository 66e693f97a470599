"""waitForPodsReady with real Pods (issue 16, KEP-349; docs/scheduling.md#waiting-for-pods-ready).

The server runs with a 4 s timeout, a 1 s requeue backoff base and a limit of two
requeues. A Job whose Pods kwok keeps Running but never Ready (tests/e2e/nodes.py) is
admitted, times out, is evicted (its Job suspended, its Pods deleted by the Job
controller), requeued after the backoff, admitted again, and after the second requeue
deactivated. A Job whose Pods become Ready in time keeps its admission.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.harness import ControlPlane
from tests.e2e.nodes import NEVER_READY_LABEL, NodeAgents
from tests.e2e.pods import (
    PodJob,
    condition,
    configured_server,
    evicted_for,
    flavor_queue,
    job_pods,
    ready,
    suspended,
    unsuspended,
    wait_job,
    wait_pods,
    workload_of,
)

pytestmark = pytest.mark.realcluster

NS = "pods-ready-e2e"
TIMEOUT_SECONDS = 4
BACKOFF_LIMIT = 2
BACKOFF_MAX_SECONDS = 2
# In v1beta2, as Kueue v0.19's users write it: waitForPodsReady has no `enable`
# (docs/scheduling.md#configuration).
CONFIG = f"""
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
waitForPodsReady:
  timeout: {TIMEOUT_SECONDS}s
  blockAdmission: false
  requeuingStrategy:
    timestamp: Eviction
    backoffLimitCount: {BACKOFF_LIMIT}
    backoffBaseSeconds: 1
    backoffMaxSeconds: {BACKOFF_MAX_SECONDS}
"""


@pytest.fixture(scope="module")
def cluster(nodes: NodeAgents, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    queues = flavor_queue(NS, "cq-ready", "lq-ready", "on-demand", "4")
    with configured_server(nodes, tmp_path_factory.mktemp("pods-ready"), CONFIG, NS, queues):
        yield nodes.plane


def _evictions(workload: dict[str, Any]) -> int:
    return int(((workload.get("status") or {}).get("requeueState") or {}).get("count") or 0)


def test_pods_that_never_become_ready_time_out_requeue_and_deactivate(
    cluster: ControlPlane,
) -> None:
    plane = cluster
    plane.apply(PodJob("steady", NS, "lq-ready").manifest())
    plane.apply(PodJob("stuck", NS, "lq-ready", pod_labels={NEVER_READY_LABEL: "true"}).manifest())

    # The ready one: PodsReady from the Job's status, and it keeps its admission.
    wait_pods(plane, NS, "steady", "Ready", lambda ps: len(ps) == 1 and ready(ps[0]))
    workload_of(plane, NS, "steady", "PodsReady", lambda w: condition(w, "PodsReady"))

    # The stuck one runs, its Pod never Ready; PodsReady=False while it waits.
    wait_job(plane, NS, "stuck", "unsuspended", unsuspended)
    pods = wait_pods(
        plane,
        NS,
        "stuck",
        "Running, not Ready",
        lambda ps: len(ps) == 1 and ps[0]["status"].get("phase") == "Running",
    )
    assert not ready(pods[0])
    waiting = workload_of(plane, NS, "stuck", "admitted", lambda w: condition(w, "Admitted"))
    assert condition(waiting, "PodsReady") is None

    # Timed out: evicted with PodsReadyTimeout, the Job suspended, its Pods deleted; the
    # requeue count grows, and each requeue admits and starts it again.
    started = time.monotonic()
    evicted = workload_of(
        plane,
        NS,
        "stuck",
        "evicted for PodsReadyTimeout",
        evicted_for("PodsReadyTimeout"),
    )
    assert _evictions(evicted) == 1
    assert evicted["status"]["requeueState"].get("requeueAt")
    wait_job(plane, NS, "stuck", "suspended after the timeout", suspended)
    wait_pods(plane, NS, "stuck", "deleted after the timeout", lambda ps: not ps)

    workload_of(
        plane,
        NS,
        "stuck",
        "requeued twice",
        lambda w: _evictions(w) == BACKOFF_LIMIT and condition(w, "Admitted") is not None,
    )
    wait_pods(plane, NS, "stuck", "a new Pod after the requeue", lambda ps: len(ps) == 1)

    # The third timeout exceeds backoffLimitCount: deactivated. As in Kueue, spec.active and
    # the eviction are written first; the admission is released only once the Job is
    # stopped, so the test waits for the end of that sequence (docs/scheduling.md#deactivation).
    workload_of(plane, NS, "stuck", "deactivated", lambda w: w["spec"].get("active") is False)
    took = time.monotonic() - started
    released = workload_of(
        plane,
        NS,
        "stuck",
        "deactivated and its admission released",
        lambda w: w["spec"].get("active") is False and condition(w, "Admitted") is None,
    )
    evicted_condition = condition(released, "Evicted")
    assert evicted_condition is not None
    assert evicted_condition["reason"] == "DeactivatedDueToRequeuingLimitExceeded"
    assert released["status"].get("requeueState") is None
    wait_job(plane, NS, "stuck", "suspended for good", suspended)
    wait_pods(plane, NS, "stuck", "deleted for good", lambda ps: not ps)
    print(f"pods: first timeout to deactivation took {took:.1f}s")

    # Never admitted again: past the longest backoff, it is still inactive and not admitted.
    time.sleep(BACKOFF_MAX_SECONDS + 1)
    later = workload_of(plane, NS, "stuck", "still deactivated")
    assert later["spec"].get("active") is False
    assert condition(later, "Admitted") is None
    reserved = condition(later, "QuotaReserved")
    assert reserved is None or reserved["status"] == "False"
    assert later["status"].get("admission") is None
    assert not job_pods(plane, NS, "stuck")

    # The ready Job was never touched by any of this.
    steady = workload_of(plane, NS, "steady", "still admitted")
    assert condition(steady, "Admitted") is not None
    assert condition(steady, "Evicted") is None
    assert len(job_pods(plane, NS, "steady")) == 1
