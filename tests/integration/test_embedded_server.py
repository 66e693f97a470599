"""`queuescope serve --embedded` as a user runs it: a real process, real TLS, real
certificates from its state folder, RBAC from the manifests; positions agree with
`queuescope simulate` on the same manifests."""

from __future__ import annotations

import http.client
import json
import os
import ssl
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from queuescope.cli import main as cli_main
from tests.integration.embedded import EmbeddedServer as Server
from tests.integration.embedded import embedded_server

GROUP = "/apis/visibility.kueue.x-k8s.io/v1beta1"

CLUSTER = """\
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
metadata: {name: main, namespace: team-b}
spec: {clusterQueue: cq-a}
"""

WORKLOAD = """\
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {{name: {name}, namespace: {ns}, creationTimestamp: "2026-01-01T00:00:0{sec}Z"}}
spec:
  queueName: main
  priority: {priority}
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers:
        - name: c
          resources: {{requests: {{cpu: "2"}}}}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    workloads = [
        ("a-high", "team-a", 100, 0),
        ("b-high", "team-b", 100, 1),
        ("a-low", "team-a", 50, 2),
        ("b-low", "team-b", 50, 3),
    ]
    text = CLUSTER + "".join(
        WORKLOAD.format(name=n, ns=ns, priority=p, sec=sec) for n, ns, p, sec in workloads
    )
    with embedded_server(tmp_path_factory.mktemp("embedded"), text) as srv:
        assert cli_main(["certs", "client", "--state-dir", str(srv.state), "--user", "alice"]) == 0
        yield srv


def _positions(body: bytes) -> list[tuple[str, str, int, int]]:
    doc = json.loads(body)
    return [
        (
            i["metadata"]["namespace"],
            i["metadata"]["name"],
            i["positionInClusterQueue"],
            i["positionInLocalQueue"],
        )
        for i in doc["items"]
    ]


def test_health_needs_no_authentication(server: Server) -> None:
    assert server.get("/healthz") == (200, b"ok")


def test_anonymous_may_not_read_queues(server: Server) -> None:
    status, body = server.get(f"{GROUP}/clusterqueues/cq-a/pendingworkloads")
    assert status == 403
    assert json.loads(body)["reason"] == "Forbidden"


def test_admin_sees_the_cluster_queue_in_the_simulators_order(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    status, body = server.get(f"{GROUP}/clusterqueues/cq-a/pendingworkloads", "admin")
    assert status == 200
    served = _positions(body)
    assert served == [
        ("team-a", "a-high", 0, 0),
        ("team-b", "b-high", 1, 0),
        ("team-a", "a-low", 2, 1),
        ("team-b", "b-low", 3, 1),
    ]
    assert cli_main(["simulate", str(server.manifests)]) == 0
    doc = json.loads(capsys.readouterr().out)
    summary = next(i for i in doc["items"] if i["kind"] == "PendingWorkloadsSummary")
    assert _positions(json.dumps(summary).encode()) == served


def test_namespaced_user_sees_only_their_local_queue(server: Server) -> None:
    status, body = server.get(
        f"{GROUP}/namespaces/team-a/localqueues/main/pendingworkloads", "alice"
    )
    assert status == 200
    assert _positions(body) == [("team-a", "a-high", 0, 0), ("team-a", "a-low", 2, 1)]
    assert (
        server.get(f"{GROUP}/namespaces/team-b/localqueues/main/pendingworkloads", "alice")[0]
        == 403
    )
    assert server.get(f"{GROUP}/clusterqueues/cq-a/pendingworkloads", "alice")[0] == 403


def test_unknown_queue_is_404_for_the_admin(server: Server) -> None:
    status, body = server.get(f"{GROUP}/clusterqueues/nope/pendingworkloads", "admin")
    assert status == 404
    assert json.loads(body)["message"] == 'clusterqueue.visibility.kueue.x-k8s.io "nope" not found'


def test_a_client_certificate_from_another_ca_is_refused(server: Server, tmp_path: Path) -> None:
    other = tmp_path / "other"
    assert cli_main(["certs", "generate", "--out", str(other)]) == 0
    ctx = ssl.create_default_context(cafile=str(server.state / "ca.crt"))
    ctx.load_cert_chain(other / "tls.crt", other / "tls.key")
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx, timeout=10)
    with pytest.raises((ssl.SSLError, ConnectionError, http.client.RemoteDisconnected)):
        conn.request("GET", "/healthz")
        conn.getresponse().read()
    conn.close()


def _kubectl() -> str:
    path = os.environ.get("QUEUESCOPE_KUBECTL", "")
    if not path or not Path(path).exists():
        if os.environ.get("QUEUESCOPE_E2E_REQUIRED") == "1":
            pytest.fail("QUEUESCOPE_KUBECTL must point at kubectl (make test sets it)")
        pytest.skip("set QUEUESCOPE_KUBECTL to a kubectl binary (make test does)")
    return path


def test_kubectl_with_the_generated_kubeconfigs(server: Server) -> None:
    kubectl = _kubectl()

    def raw(kubeconfig: Path, path: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [kubectl, "--kubeconfig", str(kubeconfig), "get", "--raw", path],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    admin = raw(server.state / "kubeconfig", f"{GROUP}/clusterqueues/cq-a/pendingworkloads")
    assert admin.returncode == 0, admin.stderr
    assert [p[1] for p in _positions(admin.stdout.encode())] == [
        "a-high",
        "b-high",
        "a-low",
        "b-low",
    ]
    alice = server.state / "users" / "alice.kubeconfig"
    mine = raw(alice, f"{GROUP}/namespaces/team-a/localqueues/main/pendingworkloads")
    assert mine.returncode == 0, mine.stderr
    assert [p[1] for p in _positions(mine.stdout.encode())] == ["a-high", "a-low"]
    theirs = raw(alice, f"{GROUP}/namespaces/team-b/localqueues/main/pendingworkloads")
    assert theirs.returncode != 0
    assert 'User "alice" cannot get resource "localqueues/pendingworkloads"' in theirs.stderr


def test_metrics_show_the_loop_lag_and_the_serving_certificate(server: Server) -> None:
    status, body = server.get("/metrics", "admin")
    assert status == 200
    text = body.decode()
    assert "queuescope_event_loop_lag_seconds_count " in text
    assert "queuescope_serving_cert_not_after_seconds " in text
    assert 'queuescope_serving_cert_reloads_total{result="applied"} 0.0' in text
    status, body = server.get("/livez?verbose", None)
    assert status == 200
    assert b"[+]event-loop ok" in body


def _long_poll(srv: Server, path: str, etag: str) -> tuple[int, str | None]:
    conn = http.client.HTTPSConnection(
        "127.0.0.1", srv.port, context=srv.context("admin"), timeout=30
    )
    try:
        conn.request("GET", f"{path}?waitSeconds=3", headers={"If-None-Match": etag})
        response = conn.getresponse()
        response.read()
        return response.status, response.getheader("Retry-After")
    finally:
        conn.close()


def test_the_waiter_cap_is_a_flag(tmp_path: Path) -> None:
    """`--visibility-max-waiters 1`: of two long polls at once, one waits and one gets
    429 (docs/visibility-api.md#long-poll); with the default cap both would wait."""
    text = CLUSTER + WORKLOAD.format(name="a-high", ns="team-a", priority=100, sec=0)
    with embedded_server(tmp_path, text, ["--visibility-max-waiters", "1"]) as srv:
        path = f"{GROUP}/clusterqueues/cq-a/pendingworkloads"
        conn = http.client.HTTPSConnection(
            "127.0.0.1", srv.port, context=srv.context("admin"), timeout=10
        )
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        etag = response.getheader("ETag")
        conn.close()
        assert response.status == 200 and etag
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(_long_poll, srv, path, etag)
            time.sleep(0.5)  # the second arrives while the first waits (3 s)
            second = pool.submit(_long_poll, srv, path, etag)
            answers = sorted([first.result(), second.result()], key=lambda a: a[0])
        assert answers == [(304, None), (429, "1")]
