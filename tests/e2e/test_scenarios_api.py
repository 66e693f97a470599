"""Scenarios E5, E6, E11 and E12 of docs/cluster.md#real-cluster-tests: the HTTP contract
(docs/visibility-api.md) as it reaches a client through the real kube-apiserver.

kube-apiserver authenticates the caller, proxies `/apis/visibility.kueue.x-k8s.io/<v>...`
to our server and passes our answers back; these tests check that what arrives is what
the contract promises: exact 404 and 400 `Status` bodies, the paging table, 304 and the
long-poll, the OpenAPI documents kube-apiserver merges and proxies, and no redirect
(which it would turn into a 502) on any odd path.
"""

from __future__ import annotations

import hashlib
import threading
import time
from typing import Any

import pytest
from openapi_spec_validator import validate

from tests.e2e.aggregated import (
    CLUSTER_QUEUE_ORDER,
    GROUP,
    VERSIONS,
    Aggregated,
    cq_path,
    lq_path,
    positions,
    workload_manifest,
)
from tests.e2e.harness import Response, wait_for

# kube-apiserver's OpenAPI aggregation downloads our documents about once a minute.
OPENAPI_SECONDS = 120.0
LONG_POLL_SECONDS = 45
# Proof that a long-poll is held: it has not been answered this long after it was sent.
HELD_SECONDS = 2.0

NAMES_IN_ORDER = [name for _, name, _, _ in CLUSTER_QUEUE_ORDER]


def status_body(response: Response) -> dict[str, Any]:
    assert response.headers.get("content-type") == "application/json", response.headers
    return dict(response.json())


def assert_not_found(response: Response, kind: str, name: str) -> None:
    """The exact NotFound `Status` of docs/visibility-api.md#errors for an unknown queue."""
    assert response.status == 404, response.body[:300]
    assert status_body(response) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'{kind}.{GROUP} "{name}" not found',
        "reason": "NotFound",
        "details": {"name": name, "group": GROUP, "kind": kind},
        "code": 404,
    }


# -- E5: unknown queues ----------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_e5_unknown_cluster_queue_is_an_exact_404(aggregated: Aggregated, version: str) -> None:
    assert_not_found(aggregated.get(cq_path(version, "foo")), "clusterqueue", "foo")
    # kubectl shows kube-apiserver's reading of the same Status.
    result = aggregated.plane.kubectl("get", "--raw", cq_path(version, "foo"), check=False)
    assert result.returncode != 0
    assert f'Error from server (NotFound): clusterqueue.{GROUP} "foo" not found' in result.stderr


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("namespace", ["team-a", "no-such-namespace"])
def test_e5_unknown_local_queue_is_an_exact_404(
    aggregated: Aggregated, version: str, namespace: str
) -> None:
    assert_not_found(aggregated.get(lq_path(version, namespace, "foo")), "localqueue", "foo")


# -- E6: parameters --------------------------------------------------------------------

# docs/visibility-api.md#query-parameters on cq-a's four pending workloads: (query, expected names).
# The table's values are kept where four items tell them apart; otherwise the smallest change
# that does (`limit=+3` rather than `+7`, `limit=1&limit=3` rather than `5&9`).
PAGING = [
    ("", NAMES_IN_ORDER),
    ("?limit=0", NAMES_IN_ORDER),
    ("?offset=5", []),
    ("?offset=1", NAMES_IN_ORDER[1:]),
    ("?offset=4", []),
    ("?limit=-1", []),
    ("?limit=2000000000", NAMES_IN_ORDER),
    ("?offset=-3&limit=2", NAMES_IN_ORDER[:2]),
    ("?limit=+3", NAMES_IN_ORDER[:3]),
    ("?limit=%2B3", NAMES_IN_ORDER[:3]),
    ("?limit=1&limit=3", NAMES_IN_ORDER[:1]),
    ("?offset=2&limit=1", NAMES_IN_ORDER[2:3]),
    # unknown parameters are ignored
    ("?resourceVersion=7&continue=x&watch=true&limit=2", NAMES_IN_ORDER[:2]),
]


@pytest.mark.parametrize(("query", "names"), PAGING, ids=[q or "none" for q, _ in PAGING])
def test_e6_paging_through_the_aggregator(
    aggregated: Aggregated, query: str, names: list[str]
) -> None:
    response = aggregated.get(cq_path("v1beta2") + query)
    assert response.status == 200, response.body[:300]
    doc = response.json()
    assert [item["metadata"]["name"] for item in doc["items"]] == names
    # Positions stay global whatever the page.
    expected = [row for row in CLUSTER_QUEUE_ORDER if row[1] in names]
    assert positions(doc) == expected


def test_e6_local_queue_paging_keeps_global_positions(aggregated: Aggregated) -> None:
    response = aggregated.get(lq_path("v1beta1", "team-b", "lq-c") + "?offset=1")
    assert response.status == 200, response.body[:300]
    assert positions(response.json()) == [("team-b", "b-low", 3, 1)]


# (query, parameter, value as the message quotes it)
BAD_QUERIES = [
    ("?limit=abc", "limit", "abc"),
    ("?limit=", "limit", ""),
    ("?limit=1.5", "limit", "1.5"),
    ("?limit=1e3", "limit", "1e3"),
    ("?limit=0x10", "limit", "0x10"),
    ("?limit=1_000", "limit", "1_000"),
    ("?offset=9223372036854775808", "offset", "9223372036854775808"),
    ("?waitSeconds=soon", "waitSeconds", "soon"),
]


@pytest.mark.parametrize(("query", "parameter", "value"), BAD_QUERIES)
@pytest.mark.parametrize("version", VERSIONS)
def test_e6_bad_parameter_is_a_400_status_passed_through(
    aggregated: Aggregated, version: str, query: str, parameter: str, value: str
) -> None:
    for path in (cq_path(version), lq_path(version, "team-a", "lq-a")):
        response = aggregated.get(path + query)
        assert response.status == 400, (path, response.body[:300])
        assert status_body(response) == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": (
                f'invalid value "{value}" for query parameter "{parameter}": '
                "must be a base-10 integer"
            ),
            "reason": "BadRequest",
            "code": 400,
        }
        assert "etag" not in response.headers


@pytest.mark.parametrize("version", VERSIONS)
def test_e6_if_none_match_gives_304(aggregated: Aggregated, version: str) -> None:
    for path in (cq_path(version), lq_path(version, "team-a", "lq-a")):
        first = aggregated.get(path)
        assert first.status == 200
        etag = first.headers["etag"]
        again = aggregated.get(path, headers={"If-None-Match": etag})
        assert again.status == 304, again.body[:300]
        assert again.body == b""
        assert again.headers["etag"] == etag
        assert "location" not in again.headers
        # Another page is another representation: its own ETag, so a full answer.
        other = aggregated.get(path + "?limit=1", headers={"If-None-Match": etag})
        assert other.status == 200
        assert other.headers["etag"] != etag


def test_e6_long_poll_without_a_change_answers_304_after_the_wait(
    aggregated: Aggregated,
) -> None:
    path = cq_path("v1beta2", "cq-b")
    etag = aggregated.get(path).headers["etag"]
    sent = time.monotonic()
    response = aggregated.get(path + "?waitSeconds=2", headers={"If-None-Match": etag})
    held = time.monotonic() - sent
    assert response.status == 304, response.body[:300]
    assert response.headers["etag"] == etag
    # Held, not answered at once (a lower bound: the server's own timer).
    assert held >= 1.5, held


def test_e6_long_poll_returns_200_when_a_workload_appears(aggregated: Aggregated) -> None:
    path = cq_path("v1beta2", "cq-b")
    before = aggregated.get(path)
    assert before.status == 200 and before.json()["items"] == []
    etag = before.headers["etag"]
    answers: list[Response] = []

    def long_poll() -> None:
        answers.append(
            aggregated.get(
                f"{path}?waitSeconds={LONG_POLL_SECONDS}", headers={"If-None-Match": etag}
            )
        )

    poll = threading.Thread(target=long_poll, daemon=True)
    poll.start()
    poll.join(HELD_SECONDS)
    assert poll.is_alive(), f"answered before any change: {answers}"
    aggregated.server.apply_objects(
        "long-poll", workload_manifest("team-b", "late-arrival", "lq-d", 10)
    )
    poll.join(LONG_POLL_SECONDS + 15)
    assert not poll.is_alive(), "the long-poll was not answered"
    [answer] = answers
    assert answer.status == 200, answer.body[:300]
    assert answer.headers["etag"] != etag
    assert positions(answer.json()) == [("team-b", "late-arrival", 0, 0)]


# -- E11: OpenAPI ----------------------------------------------------------------------

OUR_DEFINITIONS = [
    f"io.k8s.kueue.visibility.{version}.{kind}"
    for version in VERSIONS
    for kind in ("PendingWorkloadsSummary", "PendingWorkload")
] + [f"io.queuescope.visibility.{version}.PendingWorkloadPosition" for version in VERSIONS]
OUR_PATHS = [
    f"/apis/{GROUP}/{version}/{suffix}"
    for version in VERSIONS
    for suffix in (
        "clusterqueues/{name}/pendingworkloads",
        "namespaces/{namespace}/localqueues/{name}/pendingworkloads",
        "namespaces/{namespace}/workloads/{name}/pendingposition",
    )
]


def refs(node: Any) -> list[str]:
    """Every `$ref` value inside a JSON value."""
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        for value in node.values():
            found.extend(refs(value))
        return found
    if isinstance(node, list):
        return [ref for value in node for ref in refs(value)]
    return []


def unresolved_refs(document: dict[str, Any], roots: list[Any], prefix: str) -> list[str]:
    """Walk every reference reachable from `roots`; return those that do not resolve to
    `prefix` + a name present in the document."""
    section = document
    for part in prefix.strip("#/").split("/"):
        section = section.get(part, {})
    missing: list[str] = []
    seen: set[str] = set()
    pending = [ref for root in roots for ref in refs(root)]
    while pending:
        ref = pending.pop()
        if ref in seen:
            continue
        seen.add(ref)
        name = ref.removeprefix(prefix)
        if not ref.startswith(prefix) or name not in section:
            missing.append(ref)
            continue
        pending.extend(refs(section[name]))
    assert seen, "no references at all: the walk checked nothing"
    return missing


def test_e11_merged_openapi_v2_has_our_definitions_and_every_ref_resolves(
    aggregated: Aggregated,
) -> None:
    def merged() -> dict[str, Any] | None:
        response = aggregated.get("/openapi/v2", headers={"Accept": "application/json"})
        assert response.status == 200, response.body[:300]
        document: dict[str, Any] = response.json()
        definitions = document.get("definitions", {})
        return document if all(name in definitions for name in OUR_DEFINITIONS) else None

    document = wait_for(
        merged, timeout=OPENAPI_SECONDS, what="our definitions in /openapi/v2", interval=2
    )
    for path in OUR_PATHS:
        operation = document["paths"][path]["get"]
        assert operation["x-kubernetes-action"] == "get"
        assert "x-kubernetes-group-version-kind" in operation
    for version in VERSIONS:
        summary = document["definitions"][
            f"io.k8s.kueue.visibility.{version}.PendingWorkloadsSummary"
        ]
        assert summary["x-kubernetes-group-version-kind"] == [
            {"group": GROUP, "version": version, "kind": "PendingWorkloadsSummary"}
        ]
    roots = [document["definitions"][name] for name in OUR_DEFINITIONS]
    roots += [document["paths"][path] for path in OUR_PATHS]
    assert unresolved_refs(document, roots, "#/definitions/") == []


def _v3_urls(aggregated: Aggregated) -> dict[str, str]:
    def listed() -> dict[str, str] | None:
        response = aggregated.get("/openapi/v3")
        assert response.status == 200, response.body[:300]
        paths = response.json()["paths"]
        urls = {
            version: paths[f"apis/{GROUP}/{version}"]["serverRelativeURL"]
            for version in VERSIONS
            if f"apis/{GROUP}/{version}" in paths
        }
        return urls if len(urls) == len(VERSIONS) else None

    return wait_for(listed, timeout=OPENAPI_SECONDS, what="our group-versions in /openapi/v3")


@pytest.mark.parametrize("version", VERSIONS)
def test_e11_openapi_v3_is_proxied_and_valid(aggregated: Aggregated, version: str) -> None:
    url = _v3_urls(aggregated)[version]
    base, _, query = url.partition("?")
    assert base == f"/openapi/v3/apis/{GROUP}/{version}"
    response = aggregated.get(url)
    assert response.status == 200, response.body[:300]
    assert response.headers["cache-control"] == "public, immutable"
    assert "expires" in response.headers
    # The hash kube-apiserver lists is that of the very bytes it proxies.
    assert query == "hash=" + hashlib.sha512(response.body).hexdigest().upper()
    document = response.json()
    assert document["openapi"] == "3.0.0"
    validate(document)
    schemas = document["components"]["schemas"]
    assert f"io.k8s.kueue.visibility.{version}.PendingWorkloadsSummary" in schemas
    assert all(f"/{version}/" in path for path in document["paths"])
    assert unresolved_refs(document, [document["paths"]], "#/components/schemas/") == []


@pytest.mark.parametrize("version", VERSIONS)
def test_e11_stale_hash_gives_200_not_502(aggregated: Aggregated, version: str) -> None:
    current = aggregated.get(_v3_urls(aggregated)[version])
    base = f"/openapi/v3/apis/{GROUP}/{version}"
    for stale in (f"{base}?hash={'0' * 128}", f"{base}?hash=", base):
        response = aggregated.get(stale)
        assert response.status == 200, (stale, response.status, response.body[:300])
        assert response.headers["cache-control"] == "no-cache"
        assert "location" not in response.headers
        assert response.body == current.body


# -- E12: no redirects -----------------------------------------------------------------

G = f"/apis/{GROUP}"
# (path, expected status) through kube-apiserver: what it answers itself, and what it
# proxies to us (every path under G/<served version>).
ODD_PATHS_THROUGH_KUBE_APISERVER = [
    (f"{G}/", 200),
    (f"{G}/v1beta2/", 200),
    (f"{G}/v1beta1/", 200),
    (f"{G}/v1beta2/clusterqueues/cq-a/pendingworkloads/", 404),
    (f"{G}/v1beta1/namespaces/team-a/localqueues/lq-a/pendingworkloads/", 404),
    (f"{G}/v1beta2/namespaces/team-a/workloads/a-high/pendingposition/", 404),
    (f"{G}/v1beta2/clusterqueues", 404),
    (f"{G}/v1beta2/clusterqueues/", 404),
    (f"{G}/v1beta2/clusterqueues/cq-a", 404),
    (f"{G}/v1beta2/clusterqueues/cq-a/", 404),
    (f"{G}/v1beta2/namespaces/team-a/localqueues/lq-a", 404),
    (f"{G}/v1beta2/namespaces/team-a/clusterqueues/cq-a/pendingworkloads", 404),
    (f"{G}/v1beta2/namespaces/", 404),
    (f"{G}/v1beta2/namespaces/team-a/", 404),
    (f"{G}/v1beta2//clusterqueues/cq-a/pendingworkloads", 404),
    (f"{G}/v1beta2/./clusterqueues/cq-a/pendingworkloads", 404),
    (f"{G}/v1beta2/x/../clusterqueues/cq-a/pendingworkloads", 404),
    (f"{G}/v1beta2/clusterqueues/cq-a/pendingworkloads/extra", 404),
    (f"{G}/v1beta2/clusterqueues/cq-a/pendingworkloads%2F", 404),
    (f"{G}/v1beta2/docs", 404),
    (f"{G}/v1beta2/redoc", 404),
    (f"{G}/v1beta2/openapi.json", 404),
    (f"{G}/v1beta2/clusterqueues/cq-a/pendingworkloads?", 200),
]


@pytest.mark.parametrize(
    ("path", "expected"),
    ODD_PATHS_THROUGH_KUBE_APISERVER,
    ids=[p.removeprefix(G) or "/" for p, _ in ODD_PATHS_THROUGH_KUBE_APISERVER],
)
def test_e12_odd_paths_through_kube_apiserver(
    aggregated: Aggregated, path: str, expected: int
) -> None:
    response = aggregated.get(path)
    # 502 is what kube-apiserver makes of a redirect from us.
    assert response.status != 502, response.body[:300]
    assert not 300 <= response.status < 400, response.headers
    assert response.status == expected, response.body[:300]
    if expected == 404:
        assert status_body(response)["message"] == (
            "the server could not find the requested resource"
        )


# Straight to our server as the aggregator's identity: paths a web framework answers with
# a redirect (trailing slashes, its docs pages), our own documents with odd queries.
ODD_PATHS_DIRECT = [
    ("/docs", 404),
    ("/docs/", 404),
    ("/docs/oauth2-redirect", 404),
    ("/redoc", 404),
    ("/openapi.json", 404),
    ("/", 404),
    ("//apis", 404),
    ("/apis/", 200),
    ("/apis//", 404),
    (f"{G}/", 200),
    (f"{G}//", 404),
    (f"{G}/v1beta2/", 200),
    (f"{G}/v1beta2/../v1beta1", 404),
    (f"{G}/v1beta2/clusterqueues/cq-a/pendingworkloads/", 404),
    ("/api/", 404),
    ("/healthz/", 404),
    ("/livez/", 404),
    ("/readyz/", 404),
    ("/metrics/", 404),
    ("/version/", 404),
    ("/openapi/v2/", 404),
    ("/openapi/v3/", 404),
    (f"/openapi/v3/apis/{GROUP}/v1beta2/", 404),
    (f"/openapi/v3/apis/{GROUP}/v1beta2?hash=STALE", 200),
]


@pytest.mark.parametrize(("path", "expected"), ODD_PATHS_DIRECT)
def test_e12_no_response_of_ours_is_a_redirect(
    aggregated: Aggregated, path: str, expected: int
) -> None:
    response = aggregated.server.as_front_proxy(path, "system:kube-aggregator", ("system:masters",))
    assert not 300 <= response.status < 400, (response.status, response.headers)
    assert "location" not in response.headers
    assert response.status == expected, response.body[:300]


def test_e12_api_services_still_available(aggregated: Aggregated) -> None:
    """After every odd request above, kube-apiserver still finds us available and our
    discovery current."""
    for version in VERSIONS:
        condition = aggregated.apiservice_condition(version)
        assert condition is not None
        assert (condition["status"], condition["reason"]) == ("True", "Passed"), condition
    assert aggregated.discovery_freshness() == dict.fromkeys(VERSIONS, "Current")
    assert positions(aggregated.get(cq_path("v1beta2")).json()) == CLUSTER_QUEUE_ORDER
