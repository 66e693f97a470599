"""Our server in cluster mode behind a real kube-apiserver's aggregation layer (E1-E4).

kube-apiserver reaches our server through an ExternalName Service (`localhost`, routing
off: docs/cluster.md#the-aggregation-layer, #real-cluster-tests) and trusts it through `caBundle` =
the CA of the server's certificate folder, never `insecureSkipTLSVerify` (the set-up is
`tests/e2e/aggregated.py`). kube-apiserver authenticates each caller by client certificate,
authorizes with its own RBAC, and forwards the identity as `X-Remote-User` / `X-Remote-Group` over
its front-proxy client certificate; our server reads the front-proxy CA and allowed names from the
`extension-apiserver-authentication` ConfigMap, authenticates that certificate, and
authorizes again with its own SubjectAccessReview (docs/cluster.md#authentication, #authorization).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.aggregated import (
    BOB_ONLY_IN_KUBE_APISERVER,
    CLUSTER_QUEUE_ORDER,
    GROUP,
    VERSIONS,
    WORKLOAD,
    Aggregated,
    cq_path,
    lq_path,
    positions,
)
from tests.e2e.cluster import cpu_queue
from tests.e2e.harness import User, wait_for


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
    # bob's grant exists only as a RoleBinding in kube-apiserver (bob-sees-team-b-queues):
    # both kube-apiserver and our SubjectAccessReview allow it, and nothing else
    ("bob", "team-b", "lq-c", 200),
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


def test_our_authorization_follows_kube_apiserver_rbac_as_it_changes(
    aggregated: Aggregated,
) -> None:
    """Straight to our server (no authorization by kube-apiserver on the way), bob's
    answer follows his RoleBinding in kube-apiserver: our own SubjectAccessReview
    decides, and its decision cache (10 s) lets a revocation through in time."""
    path = lq_path("v1beta2", "team-b", "lq-c")
    server = aggregated.server
    assert server.as_front_proxy(path, "bob", ("team-b-devs",)).status == 200
    plane = aggregated.plane
    plane.kubectl("delete", "rolebinding", "bob-sees-team-b-queues", "-n", "team-b")
    try:
        denied = wait_for(
            lambda: (
                r
                if (r := server.as_front_proxy(path, "bob", ("team-b-devs",))).status == 403
                else None
            ),
            timeout=60,
            what="our server denying bob once his RoleBinding is gone",
        )
        assert denied.json()["message"] == (
            f'localqueues.{GROUP} "lq-c" is forbidden: User "bob" cannot get resource '
            f'"localqueues/pendingworkloads" in API group "{GROUP}" in the namespace "team-b"'
        )
    finally:
        plane.apply(BOB_ONLY_IN_KUBE_APISERVER)
    wait_for(
        lambda: (
            True if server.as_front_proxy(path, "bob", ("team-b-devs",)).status == 200 else None
        ),
        timeout=60,
        what="bob allowed again",
    )


@pytest.mark.parametrize(
    ("namespace", "queue", "expected"),
    [("team-a", "lq-a", 200), ("team-b", "lq-c", 403), (None, "cq-a", 403)],
)
def test_same_answers_straight_from_our_server(
    aggregated: Aggregated, namespace: str | None, queue: str, expected: int
) -> None:
    """What kube-apiserver forwards for alice, sent directly: the same codes, so the
    decisions above are our server's own, not only kube-apiserver's
    (docs/cluster.md#real-cluster-tests E4)."""
    path = lq_path("v1beta2", namespace, queue) if namespace else cq_path("v1beta2", queue)
    response = aggregated.server.as_front_proxy(
        path, "alice", ("team-a-devs", "system:authenticated")
    )
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


def test_the_lookup_serves_the_forecast_start_and_every_workload(aggregated: Aggregated) -> None:
    """docs/visibility-api.md#pending-position through kube-apiserver: a queue that admits
    three of five one-CPU workloads; the forecast worker (the default method, `forecast`:
    the core run forward from the holders) gives the two left pending an `estimatedStart`;
    an admitted one says why it is not pending."""
    one_cpu = WORKLOAD.replace('cpu: "2"', 'cpu: "1"')
    workloads = "".join(
        one_cpu.format(name=f"f{i}", ns="team-f", queue="lq-f", priority=0, sec=i) for i in range(5)
    )
    aggregated.server.apply_objects(
        "forecast", cpu_queue("team-f", "default", "cq-f", "lq-f", "3") + "\n" + workloads
    )
    base = f"/apis/{GROUP}/v1beta2/namespaces/team-f/workloads"

    def pending_names() -> list[str] | None:
        doc = _kubectl_raw(aggregated, cq_path("v1beta2", "cq-f"))
        names = [item["metadata"]["name"] for item in doc["items"]]
        return names if len(names) == 2 else None

    waiting = wait_for(pending_names, timeout=90, what="three of five admitted in cq-f")

    def forecast() -> dict[str, Any] | None:
        doc = _kubectl_raw(aggregated, f"{base}/{waiting[-1]}/pendingposition")
        return doc if "estimatedStart" in doc else None

    # The worker refreshes every 10 s by default; the first refresh that sees the
    # admissions follows them.
    doc = wait_for(forecast, timeout=90, what="an estimatedStart for the last pending workload")
    start = doc["estimatedStart"]
    assert doc["pending"] is True and doc["positionInClusterQueue"] == 1
    assert set(start) == {"p50", "low", "high", "method", "madeAt", "snapshot"}
    assert start["method"] == "forecast"
    assert start["madeAt"] <= start["low"] <= start["p50"] <= start["high"]
    assert isinstance(start["snapshot"], int)
    admitted = sorted({f"f{i}" for i in range(5)} - set(waiting))[0]
    done = _kubectl_raw(aggregated, f"{base}/{admitted}/pendingposition")
    assert (done["pending"], done["reason"], done["clusterQueueName"]) == (
        False,
        "QuotaReserved",
        "cq-f",
    )
    assert done["localQueueName"] == "lq-f"


def test_each_request_is_logged_with_kube_apiservers_audit_id(aggregated: Aggregated) -> None:
    """The access log (docs/operations.md#the-access-log): the line of a request that came
    through kube-apiserver carries the Audit-ID kube-apiserver gave it (and answered the
    caller with), the user it forwarded, our answer's code and the URI as sent."""
    path = lq_path("v1beta2", "team-a", "lq-a") + "?limit=1"
    response = aggregated.plane.request(path, aggregated.alice)
    assert response.status == 200
    audit_id = response.headers["audit-id"]
    log = aggregated.server.root / "serve.log"

    def logged() -> str | None:
        lines = log.read_text(errors="replace").splitlines()
        return next((line for line in lines if f'audit-ID="{audit_id}"' in line), None)

    line = wait_for(logged, timeout=10, what=f"the access log line of {audit_id}")
    assert line.startswith('INFO visibility_server.access HTTP verb="GET" '), line
    assert f'URI="{path}"' in line, line
    assert f'user="{aggregated.alice.name}"' in line, line
    assert line.endswith(" resp=200"), line
