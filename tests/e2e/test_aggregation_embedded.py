"""`queuescope serve --embedded` behind a real kube-apiserver's aggregation layer.

kube-apiserver reaches our server through an ExternalName Service (`localhost`, routing
off: cluster.md §1 and §8) and trusts it through `caBundle` = the state folder's CA, never
`insecureSkipTLSVerify`. kube-apiserver authenticates each caller by client certificate,
authorizes with its own RBAC, and forwards the identity as `X-Remote-User` /
`X-Remote-Group` over its front-proxy client certificate; our server authenticates that
certificate against `--requestheader-client-ca-file` and authorizes again, locally, from
the RBAC objects among its manifests (cluster.md §4.4).
"""

from __future__ import annotations

import base64
import functools
import http.client
import json
import os
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import (
    FRONT_PROXY_CLIENT,
    ControlPlane,
    HarnessError,
    ManagedProcess,
    Response,
    User,
    free_port,
    wait_for,
)

GROUP = "visibility.kueue.x-k8s.io"
VERSIONS = ("v1beta1", "v1beta2")
NAMESPACE = "queuescope-system"
SERVICE = "queuescope-visibility"
REPO = Path(__file__).resolve().parents[2]
SAMPLE_RBAC = REPO / "manifests" / "samples" / "70-rbac.yaml"
AVAILABLE_SECONDS = 90.0
SERVER_READY_SECONDS = 60.0

# cq-a has 1 CPU; every workload asks for 2, so nothing is ever admitted and the pending
# order is fixed: priority, then creation time.
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
metadata: {name: lq-a, namespace: team-a}
spec: {clusterQueue: cq-a}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq-b, namespace: team-a}
spec: {clusterQueue: cq-a}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq-c, namespace: team-b}
spec: {clusterQueue: cq-a}
"""

WORKLOAD = """\
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {{name: {name}, namespace: {ns}, creationTimestamp: "2026-01-01T00:00:0{sec}Z"}}
spec:
  queueName: {queue}
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

# (namespace, name, LocalQueue, priority)
WORKLOADS = [
    ("team-a", "a-high", "lq-a", 100),
    ("team-b", "b-high", "lq-c", 100),
    ("team-a", "a-low", "lq-a", 50),
    ("team-b", "b-low", "lq-c", 50),
]
# (namespace, name, positionInClusterQueue, positionInLocalQueue)
CLUSTER_QUEUE_ORDER = [
    ("team-a", "a-high", 0, 0),
    ("team-b", "b-high", 1, 0),
    ("team-a", "a-low", 2, 1),
    ("team-b", "b-low", 3, 1),
]


def cq_path(version: str, name: str = "cq-a") -> str:
    return f"/apis/{GROUP}/{version}/clusterqueues/{name}/pendingworkloads"


def lq_path(version: str, namespace: str, name: str) -> str:
    return f"/apis/{GROUP}/{version}/namespaces/{namespace}/localqueues/{name}/pendingworkloads"


def positions(doc: dict[str, Any]) -> list[tuple[str, str, int, int]]:
    return [
        (
            item["metadata"]["namespace"],
            item["metadata"]["name"],
            item["positionInClusterQueue"],
            item["positionInLocalQueue"],
        )
        for item in doc["items"]
    ]


def _cluster_objects(port: int, ca_bundle: bytes) -> str:
    """What kube-apiserver needs: namespaces, the ExternalName Service, both APIServices."""
    bundle = base64.b64encode(ca_bundle).decode()
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        for name in (NAMESPACE, "team-a", "team-b")
    ]
    docs.append(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": SERVICE, "namespace": NAMESPACE},
            # ExternalName with aggregator routing off: kube-apiserver dials
            # localhost:<APIService port>; Endpoints would refuse a loopback address.
            "spec": {"type": "ExternalName", "externalName": "localhost"},
        }
    )
    for version, priority in (("v1beta2", 100), ("v1beta1", 90)):
        docs.append(
            {
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService",
                "metadata": {"name": f"{version}.{GROUP}"},
                "spec": {
                    "group": GROUP,
                    "version": version,
                    "groupPriorityMinimum": 100,
                    "versionPriority": priority,
                    "service": {"name": SERVICE, "namespace": NAMESPACE, "port": port},
                    "caBundle": bundle,
                },
            }
        )
    return "\n---\n".join(json.dumps(doc) for doc in docs)


# bob may read team-b's queues as far as kube-apiserver knows; our manifests say nothing
# about him, so our own authorization must deny him.
BOB_ONLY_IN_KUBE_APISERVER = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: bob-sees-team-b-queues, namespace: team-b}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: queuescope-localqueue-viewer
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: bob}
"""


@dataclass
class Aggregated:
    plane: ControlPlane
    server: ManagedProcess
    state: Path
    port: int
    alice: User
    bob: User
    carol: User

    def server_get(self, path: str) -> int:
        """GET straight to our server, anonymously, trusting its CA."""
        context = ssl.create_default_context(cafile=str(self.state / "ca.crt"))
        request = urllib.request.Request(f"https://127.0.0.1:{self.port}{path}")
        try:
            with urllib.request.urlopen(request, context=context, timeout=5) as response:
                return int(response.status)
        except urllib.error.HTTPError as err:
            return int(err.code)

    def as_front_proxy(self, path: str, user: str, groups: tuple[str, ...]) -> Response:
        """GET straight to our server the way kube-apiserver sends it: the front-proxy
        client certificate, the identity in X-Remote-* headers."""
        context = ssl.create_default_context(cafile=str(self.state / "ca.crt"))
        certs = self.plane.certs
        context.load_cert_chain(
            certs.path("front-proxy-client.crt"), certs.path("front-proxy-client.key")
        )
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=context, timeout=10)
        try:
            conn.putrequest("GET", path)
            conn.putheader("X-Remote-User", user)
            for group in groups:
                conn.putheader("X-Remote-Group", group)
            conn.endheaders()
            response = conn.getresponse()
            return Response(response.status, dict(response.getheaders()), response.read())
        finally:
            conn.close()

    def apiservice_condition(self, version: str) -> dict[str, Any] | None:
        obj = self.plane.get_json("apiservice", f"{version}.{GROUP}")
        for condition in obj.get("status", {}).get("conditions", []):
            if condition.get("type") == "Available":
                return dict(condition)
        return None


def _start_server(plane: ControlPlane, root: Path) -> tuple[ManagedProcess, Path, int]:
    manifests = root / "manifests"
    manifests.mkdir()
    workloads = "".join(
        WORKLOAD.format(name=name, ns=ns, queue=queue, priority=priority, sec=index)
        for index, (ns, name, queue, priority) in enumerate(WORKLOADS)
    )
    (manifests / "queues.yaml").write_text(QUEUES + workloads)
    (manifests / "rbac.yaml").write_text(SAMPLE_RBAC.read_text())
    state = root / "state"
    port = free_port()
    server = ManagedProcess(
        "queuescope-serve",
        [
            sys.executable,
            "-m",
            "queuescope.cli",
            "serve",
            "--embedded",
            str(manifests),
            "--state-dir",
            str(state),
            "--listen",
            f"127.0.0.1:{port}",
            "--requestheader-client-ca-file",
            str(plane.front_proxy_ca_file),
            "--requestheader-allowed-names",
            FRONT_PROXY_CLIENT,
        ],
        root / "serve.log",
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    server.start()
    return server, state, port


@pytest.fixture(scope="module")
def aggregated(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Aggregated]:
    root = tmp_path_factory.mktemp("embedded")
    server, state, port = _start_server(control_plane, root)
    env = Aggregated(
        plane=control_plane,
        server=server,
        state=state,
        port=port,
        alice=control_plane.user("alice", ("team-a-devs",)),
        bob=control_plane.user("bob", ("team-b-devs",)),
        carol=control_plane.user("carol", ("batch-admins",)),
    )
    try:
        wait_for(
            lambda: True if env.server_get("/readyz") == 200 else None,
            timeout=SERVER_READY_SECONDS,
            what="queuescope serve --embedded /readyz",
            alive=server.check_alive,
        )
        plane = control_plane
        plane.apply(_cluster_objects(port, (state / "ca.crt").read_bytes()))
        # The same user-facing RBAC as the embedded server's manifests, so that
        # kube-apiserver's own authorization lets the same callers through.
        plane.apply(SAMPLE_RBAC.read_text())
        plane.apply(BOB_ONLY_IN_KUBE_APISERVER)
        for version in VERSIONS:
            try:
                wait_for(
                    functools.partial(_available, env, version),
                    timeout=AVAILABLE_SECONDS,
                    what=f"APIService {version}.{GROUP} Available=True",
                    interval=0.5,
                    alive=server.check_alive,
                )
            except HarnessError as err:
                # The condition's message carries kube-apiserver's reason (cluster.md §9).
                raise HarnessError(
                    f"{err}; condition: {env.apiservice_condition(version)}"
                ) from err
        yield env
    finally:
        # APIServices first (cluster.md §6): later modules share this kube-apiserver, and
        # a dangling APIService makes its discovery stale.
        control_plane.kubectl(
            "delete",
            "apiservice",
            *(f"{version}.{GROUP}" for version in VERSIONS),
            "--ignore-not-found",
            check=False,
        )
        server.stop()


def _available(env: Aggregated, version: str) -> dict[str, Any] | None:
    condition = env.apiservice_condition(version)
    return condition if condition is not None and condition.get("status") == "True" else None


def _kubectl_raw(env: Aggregated, path: str, user: User | None = None) -> dict[str, Any]:
    result = env.plane.kubectl("get", "--raw", path, user=user)
    return dict(json.loads(result.stdout))


def test_both_apiservices_turn_available(aggregated: Aggregated) -> None:
    for version in VERSIONS:
        condition = aggregated.apiservice_condition(version)
        assert condition is not None
        assert (condition["status"], condition["reason"]) == ("True", "Passed"), condition


def test_discovery_through_kube_apiserver(aggregated: Aggregated) -> None:
    group = _kubectl_raw(aggregated, f"/apis/{GROUP}")
    assert group["preferredVersion"]["version"] == "v1beta2"
    assert sorted(v["version"] for v in group["versions"]) == sorted(VERSIONS)
    for version in VERSIONS:
        # Proxied to our server (kube-apiserver only answers /apis and /apis/<group>).
        resources = _kubectl_raw(aggregated, f"/apis/{GROUP}/{version}")
        names = {r["name"] for r in resources["resources"]}
        assert {"clusterqueues/pendingworkloads", "localqueues/pendingworkloads"} <= names
    # Exit 0 and no partial-discovery warning; the listing itself is empty, as for Kueue:
    # kubectl leaves out subresources and the verb-less parents.
    listing = aggregated.plane.kubectl("api-resources", f"--api-group={GROUP}")
    assert "unable to retrieve the complete list" not in listing.stderr, listing.stderr


def test_aggregated_discovery_is_current(aggregated: Aggregated) -> None:
    plane = aggregated.plane
    response = plane.request(
        "/apis",
        plane.admin,
        headers={"Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"},
    )
    assert response.status == 200
    groups = {g["metadata"]["name"]: g for g in response.json()["items"]}
    versions = {v["version"]: v for v in groups[GROUP]["versions"]}
    assert sorted(versions) == sorted(VERSIONS)
    for version in VERSIONS:
        entry = versions[version]
        assert entry.get("freshness", "Current") == "Current", entry
        names = {r["resource"] for r in entry["resources"]}
        assert {"clusterqueues", "localqueues"} <= names, entry


@pytest.mark.parametrize("version", VERSIONS)
def test_admin_lists_the_cluster_queue(aggregated: Aggregated, version: str) -> None:
    doc = _kubectl_raw(aggregated, cq_path(version))
    assert doc["apiVersion"] == f"{GROUP}/{version}"
    assert doc["kind"] == "PendingWorkloadsSummary"
    assert positions(doc) == CLUSTER_QUEUE_ORDER


@pytest.mark.parametrize("version", VERSIONS)
def test_admin_lists_local_queues(aggregated: Aggregated, version: str) -> None:
    doc = _kubectl_raw(aggregated, lq_path(version, "team-b", "lq-c"))
    assert doc["apiVersion"] == f"{GROUP}/{version}"
    assert positions(doc) == [("team-b", "b-high", 1, 0), ("team-b", "b-low", 3, 1)]
    assert _kubectl_raw(aggregated, lq_path(version, "team-a", "lq-b"))["items"] == []


@pytest.mark.parametrize("version", VERSIONS)
def test_unknown_queue_is_404(aggregated: Aggregated, version: str) -> None:
    plane = aggregated.plane
    result = plane.kubectl("get", "--raw", cq_path(version, "nope"), check=False)
    assert result.returncode != 0
    assert "NotFound" in result.stderr, result.stderr
    response = plane.request(cq_path(version, "nope"), plane.admin)
    assert response.status == 404
    status = response.json()
    assert status["kind"] == "Status"
    assert status["reason"] == "NotFound"
    assert status["message"] == f'clusterqueue.{GROUP} "nope" not found'
    missing = plane.request(lq_path(version, "team-a", "missing"), plane.admin)
    assert missing.status == 404
    assert missing.json()["message"] == f'localqueue.{GROUP} "missing" not found'


def test_namespaced_user_sees_their_local_queue_with_kubectl(aggregated: Aggregated) -> None:
    doc = _kubectl_raw(aggregated, lq_path("v1beta2", "team-a", "lq-a"), user=aggregated.alice)
    assert positions(doc) == [("team-a", "a-high", 0, 0), ("team-a", "a-low", 2, 1)]
    denied = aggregated.plane.kubectl(
        "get", "--raw", lq_path("v1beta2", "team-b", "lq-c"), user=aggregated.alice, check=False
    )
    assert denied.returncode != 0
    assert "Forbidden" in denied.stderr, denied.stderr


# (user, namespace, queue, expected status): a namespace means the LocalQueue endpoint,
# None the ClusterQueue endpoint. Every row goes through kube-apiserver with the user's
# client certificate.
MATRIX = [
    ("alice", "team-a", "lq-a", 200),
    ("alice", "team-a", "missing", 404),
    ("alice", "team-b", "lq-c", 403),
    ("alice", None, "cq-a", 403),
    # carol's group batch-admins reaches our server only as X-Remote-Group
    ("carol", None, "cq-a", 200),
    ("carol", "team-a", "lq-a", 403),
    # allowed by kube-apiserver (bob-sees-team-b-queues), denied by our server
    ("bob", "team-b", "lq-c", 403),
    ("bob", "team-a", "lq-a", 403),
]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("who", "namespace", "queue", "expected"),
    MATRIX,
    ids=[f"{u}-{ns or 'cluster'}-{q}-{code}" for u, ns, q, code in MATRIX],
)
def test_rbac_matrix_through_the_aggregation_layer(
    aggregated: Aggregated,
    version: str,
    who: str,
    namespace: str | None,
    queue: str,
    expected: int,
) -> None:
    user = {"alice": aggregated.alice, "bob": aggregated.bob, "carol": aggregated.carol}[who]
    path = lq_path(version, namespace, queue) if namespace else cq_path(version, queue)
    response = aggregated.plane.request(path, user)
    assert response.status == expected, response.body[:500]
    if expected == 200:
        assert response.json()["apiVersion"] == f"{GROUP}/{version}"
    else:
        status = response.json()
        assert (status["kind"], status["code"]) == ("Status", expected)


def test_our_server_denies_what_kube_apiserver_allows(aggregated: Aggregated) -> None:
    """bob's 403 comes from our server: kube-apiserver itself grants the request."""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {
            "resourceAttributes": {
                "group": GROUP,
                "resource": "localqueues",
                "subresource": "pendingworkloads",
                "verb": "get",
                "namespace": "team-b",
                "name": "lq-c",
            }
        },
    }
    answer = aggregated.plane.request(
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        aggregated.bob,
        method="POST",
        headers={"Content-Type": "application/json"},
        body=json.dumps(review).encode(),
    )
    assert answer.status == 201, answer.body[:500]
    assert answer.json()["status"]["allowed"] is True
    response = aggregated.plane.request(lq_path("v1beta2", "team-b", "lq-c"), aggregated.bob)
    assert response.status == 403
    assert response.json()["message"] == (
        f'localqueues.{GROUP} "lq-c" is forbidden: User "bob" cannot get resource '
        f'"localqueues/pendingworkloads" in API group "{GROUP}" in the namespace "team-b"'
    )


@pytest.mark.parametrize(
    ("namespace", "queue", "expected"),
    [("team-a", "lq-a", 200), ("team-b", "lq-c", 403), (None, "cq-a", 403)],
)
def test_same_answers_straight_from_our_server(
    aggregated: Aggregated, namespace: str | None, queue: str, expected: int
) -> None:
    """What kube-apiserver forwards for alice, sent directly: the same codes, so the
    decisions above are our server's own, not only kube-apiserver's (cluster.md §8 E4)."""
    path = lq_path("v1beta2", namespace, queue) if namespace else cq_path("v1beta2", queue)
    response = aggregated.as_front_proxy(path, "alice", ("team-a-devs", "system:authenticated"))
    assert response.status == expected, response.body[:500]
    if expected == 200:
        assert positions(response.json()) == [
            ("team-a", "a-high", 0, 0),
            ("team-a", "a-low", 2, 1),
        ]
    else:
        assert response.json()["reason"] == "Forbidden"


def test_apiservices_stay_available(aggregated: Aggregated) -> None:
    """After all of the above (403s, 404s), kube-apiserver still finds us available."""
    for version in VERSIONS:
        condition = aggregated.apiservice_condition(version)
        assert condition is not None and condition["status"] == "True", condition
    aggregated.server.check_alive()
