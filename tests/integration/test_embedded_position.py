"""The `pendingposition` lookup of `serve --embedded` answers for every Workload that
exists (docs/visibility-api.md#pending-position): a real process over TLS, one Workload
per reason it may not be pending."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.embedded import READY_SECONDS, EmbeddedServer, embedded_server

V2 = "/apis/visibility.kueue.x-k8s.io/v1beta2"

QUEUES = """\
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq-a}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: "1"}]}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: main, namespace: team-a}
spec: {clusterQueue: cq-a}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: held, namespace: team-a}
spec: {clusterQueue: cq-a, stopPolicy: Hold}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: orphan, namespace: team-a}
spec: {clusterQueue: cq-gone}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq-fast}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: "3"}]}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: fast, namespace: team-a}
spec: {clusterQueue: cq-fast}
"""

WORKLOAD = """\
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {{name: {name}, namespace: team-a, creationTimestamp: "2026-01-01T00:00:0{sec}Z"}}
spec:
  queueName: {queue}
  active: {active}
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers:
        - name: c
          resources: {{requests: {{cpu: "1"}}}}
"""

FINISHED_STATUS = """\
status:
  conditions:
  - type: Finished
    status: "True"
    reason: Succeeded
    message: done
    lastTransitionTime: "2026-01-01T00:01:00Z"
"""

# name -> (queue, active, second of creation, finished)
WORKLOADS = {
    "running": ("main", True, 0, False),
    "waiting": ("main", True, 1, False),
    "done": ("main", True, 2, True),
    "paused": ("main", False, 3, False),
    "lost": ("nope", True, 4, False),
    "stopped": ("held", True, 5, False),
    "orphaned": ("orphan", True, 6, False),
    # cq-fast admits three at once: an admission rate, hence forecasts for the other two
    **{f"fast{i}": ("fast", True, 7, False) for i in range(5)},
}


def _manifests() -> str:
    text = QUEUES
    for name, (queue, active, sec, finished) in WORKLOADS.items():
        text += WORKLOAD.format(name=name, queue=queue, active=str(active).lower(), sec=sec)
        if finished:
            text += FINISHED_STATUS
    return text


def _position(server: EmbeddedServer, name: str) -> tuple[int, Any]:
    return server.get_json(f"{V2}/namespaces/team-a/workloads/{name}/pendingposition", "admin")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    root = tmp_path_factory.mktemp("position")
    with embedded_server(root, _manifests(), ["--forecast-interval", "1"]) as srv:
        # The first cycle admits `running`; until it has, `running` is still listed.
        deadline = time.monotonic() + READY_SECONDS
        while _position(srv, "running")[1].get("pending", True):
            assert time.monotonic() < deadline, srv.log.read_text()
            time.sleep(0.1)
        yield srv


def _not_pending(name: str, reason: str, sec: int, cq: str | None, lq: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "PendingWorkloadPosition",
        "apiVersion": "visibility.kueue.x-k8s.io/v1beta2",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "creationTimestamp": f"2026-01-01T00:00:0{sec}Z",
        },
        "pending": False,
        "reason": reason,
    }
    if cq is not None:
        body["clusterQueueName"] = cq
    body["localQueueName"] = lq
    return body


@pytest.mark.parametrize(
    ("name", "reason", "cluster_queue"),
    [
        ("running", "QuotaReserved", "cq-a"),
        ("done", "Finished", "cq-a"),
        ("paused", "Inactive", "cq-a"),
        ("lost", "LocalQueueNotFound", None),
        ("stopped", "LocalQueueStopped", "cq-a"),
        ("orphaned", "ClusterQueueNotFound", "cq-gone"),
    ],
)
def test_a_workload_that_is_not_pending_says_why(
    server: EmbeddedServer, name: str, reason: str, cluster_queue: str | None
) -> None:
    queue, _, sec, _ = WORKLOADS[name]
    code, body = _position(server, name)
    assert code == 200, body
    assert body == _not_pending(name, reason, sec, cluster_queue, queue)


def test_the_pending_workload_has_its_position(server: EmbeddedServer) -> None:
    code, body = _position(server, "waiting")
    assert code == 200, body
    assert body["pending"] is True
    assert (body["clusterQueueName"], body["positionInClusterQueue"]) == ("cq-a", 0)


def test_a_workload_that_does_not_exist_is_404(server: EmbeddedServer) -> None:
    code, body = _position(server, "ghost")
    assert code == 404
    assert body["message"] == 'workload.visibility.kueue.x-k8s.io "ghost" not found'


def test_a_namespaced_user_gets_the_same_answer(server: EmbeddedServer) -> None:
    from queuescope.cli import main as cli_main  # noqa: PLC0415 - mints a user in the state

    assert cli_main(["certs", "client", "--state-dir", str(server.state), "--user", "alice"]) == 0
    assert _position(server, "done") == server.get_json(
        f"{V2}/namespaces/team-a/workloads/done/pendingposition", "alice"
    )


def test_a_pending_workload_gets_the_forecast_start(server: EmbeddedServer) -> None:
    """docs/visibility-api.md#pending-position: `estimatedStart` once the forecast worker
    has refreshed after cq-fast's three admissions."""
    deadline = time.monotonic() + READY_SECONDS
    while True:
        code, listing = server.get_json(f"{V2}/clusterqueues/cq-fast/pendingworkloads", "admin")
        assert code == 200, listing
        names = [item["metadata"]["name"] for item in listing["items"]]
        body = _position(server, names[-1])[1] if len(names) == 2 else {}
        if "estimatedStart" in body:
            break
        assert time.monotonic() < deadline, server.log.read_text()
        time.sleep(0.2)
    start = body["estimatedStart"]
    assert start["method"] == "forecast" and isinstance(start["snapshot"], int)  # the default
    assert start["madeAt"] <= start["low"] <= start["p50"] <= start["high"]
    # The second in line starts no earlier than the first.
    first = _position(server, names[0])[1].get("estimatedStart")
    if first is not None and first["snapshot"] == start["snapshot"]:
        assert first["p50"] <= start["p50"]
