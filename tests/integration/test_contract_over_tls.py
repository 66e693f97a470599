"""docs/visibility-api.md over a real socket: the real app on uvicorn with TLS, the real
authenticator chain and authorizer, clients speaking HTTP/1.1 like kube-apiserver's
aggregator, certificate users and anonymous callers (see `realserver`).

Each section mirrors the contract's: paths (docs/visibility-api.md#paths-served), discovery
(docs/visibility-api.md#discovery), the pending-workloads endpoints
(docs/visibility-api.md#pending-workloads-endpoints), conditional requests and streaming
(docs/visibility-api.md#snapshots-identity-and-cost), Status bodies byte for byte
(docs/visibility-api.md#errors), negotiation (docs/visibility-api.md#content-negotiation), OpenAPI
(docs/visibility-api.md#openapi-documents), health, metrics, version
(docs/visibility-api.md#health-metrics-and-version), extensions (docs/visibility-api.md#extensions),
then the identity matrix of docs/cluster.md#the-aggregation-layer, #authentication, #authorization.
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import itertools
import json
import re
from typing import Any

import orjson
import pytest
import yaml

from scheduler.runtime.snapshot import Snapshot
from tests.integration.realserver import (
    ADMIN,
    ALICE,
    ANONYMOUS,
    AUDIT_ID,
    BIG,
    CAROL,
    DAVE,
    FRONT_PROXY_CERT,
    JOB_OWNER,
    LEGACY_FALLBACK,
    MALLORY_CERT,
    NOW,
    OPENAPI_DOWNLOADER,
    PROBE,
    PROMETHEUS_TOKEN,
    PROMETHEUS_USER,
    UNAVAILABLE_TOKEN,
    V1,
    V2,
    VERSION_INFO,
    VERSIONS,
    VIEWER,
    VIS,
    WRONG_PROXY_CERT,
    G,
    Identity,
    RealServer,
    Reply,
    Request,
    aggregator,
    certificate_user,
    contract_snapshot,
    get,
    head,
    in_thread,
    make_snapshot,
    serve,
    worked_example,
)
from tests.tls.support import refused
from visibility_server.authz.attributes import Attributes
from visibility_server.authz.decision import Decision
from visibility_server.authz.identity import UserInfo
from visibility_server.authz.pipeline import Authorizer

pytestmark = pytest.mark.asyncio(loop_scope="module")

SNAPSHOT: Snapshot = contract_snapshot()  # the same content as the server's: same digests

V2_DISCOVERY = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
V2BETA1_DISCOVERY = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
AGGREGATOR_ACCEPT = f"{V2_DISCOVERY},{V2BETA1_DISCOVERY}"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
KUBECTL_TABLE = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)
PROTOBUF = "application/vnd.kubernetes.protobuf"
JSON_TYPE = "application/json"
TEXT_TYPE = "text/plain; charset=utf-8"
METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OK_HEALTH = (200, b"ok")


def cq(name: str, version: str = "v1beta2") -> str:
    return f"{G}/{version}/clusterqueues/{name}/pendingworkloads"


def lq(namespace: str, name: str, version: str = "v1beta2") -> str:
    return f"{G}/{version}/namespaces/{namespace}/localqueues/{name}/pendingworkloads"


def pos(namespace: str, name: str, version: str = "v1beta2") -> str:
    return f"{G}/{version}/namespaces/{namespace}/workloads/{name}/pendingposition"


def openapi_v3(version: str) -> str:
    return f"/openapi/v3/apis/{VIS}/{version}"


def compact(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def status_body(
    message: str, reason: str, code: int, details: dict[str, Any] | None = None
) -> bytes:
    """A Status as the contract writes it: Go's key order, compact, one newline."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details is not None:
        body["details"] = details
    body["code"] = code
    return compact(body)


PATH_NOT_FOUND = status_body(
    "the server could not find the requested resource", "NotFound", 404, {}
)
UNAUTHORIZED = status_body("Unauthorized", "Unauthorized", 401)
METHOD_NOT_ALLOWED = status_body(
    "the server does not allow this method on the requested resource",
    "MethodNotAllowed",
    405,
    {},
)
NOT_ACCEPTABLE = status_body(
    "only the following media types are accepted: application/json, application/yaml, "
    "application/json;as=Table;v=v1;g=meta.k8s.io",
    "NotAcceptable",
    406,
)
NOT_SYNCED = status_body(
    "the visibility cache has not completed its initial sync",
    "ServiceUnavailable",
    503,
    {"retryAfterSeconds": 1},
)
TOO_MANY = status_body(
    "too many requests, please try again later",
    "TooManyRequests",
    429,
    {"retryAfterSeconds": 1},
)
IMPERSONATION = status_body(
    "impersonation is not supported by this server; send the request through kube-apiserver",
    "Forbidden",
    403,
    {},
)


def not_found(singular: str, name: str) -> bytes:
    return status_body(
        f'{singular}.{VIS} "{name}" not found',
        "NotFound",
        404,
        {"name": name, "group": VIS, "kind": singular},
    )


def bad_request(parameter: str, value: str) -> bytes:
    return status_body(
        f'invalid value "{value}" for query parameter "{parameter}": must be a base-10 integer',
        "BadRequest",
        400,
    )


def forbidden_resource(
    user_name: str, resource: str, sub: str, name: str, namespace: str = "", verb: str = "get"
) -> bytes:
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    message = (
        f'{resource}.{VIS} "{name}" is forbidden: User "{user_name}" cannot {verb} resource '
        f'"{resource}/{sub}" in API group "{VIS}" {scope}'
    )
    return status_body(message, "Forbidden", 403, {"name": name, "group": VIS, "kind": resource})


def forbidden_path(user_name: str, path: str, verb: str = "get") -> bytes:
    return status_body(
        f'forbidden: User "{user_name}" cannot {verb} path "{path}"', "Forbidden", 403, {}
    )


def assert_status(reply: Reply, code: int, body: bytes) -> None:
    """An error answer: the exact Status bytes and the headers every error carries."""
    assert (reply.status, reply.body) == (code, body), (reply.status, reply.body)
    assert reply.header("content-type") == JSON_TYPE
    assert reply.header("x-content-type-options") == "nosniff"
    assert reply.header("content-length") == str(len(body))
    assert reply.header("etag") is None
    assert reply.header("location") is None


def positions(body: dict[str, Any]) -> list[tuple[str, int, int]]:
    return [
        (i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"])
        for i in body["items"]
    ]


def health_follows(reply: Reply) -> None:
    """The follow-up request on the same connection parsed cleanly: nothing (no stray
    body bytes) was left on the wire by the answer before it."""
    assert (reply.status, reply.body) == OK_HEALTH, reply


# -- docs/visibility-api.md#paths-served paths -----------------------------------------------------

PATH_TABLE: list[tuple[str, Identity, str]] = [
    ("/apis", DAVE, JSON_TYPE),
    (G, DAVE, JSON_TYPE),
    *((f"{G}/{v}", DAVE, JSON_TYPE) for v in VERSIONS),
    *((cq("cq-a", v), VIEWER, JSON_TYPE) for v in VERSIONS),
    *((lq("team-a", "lq-a", v), VIEWER, JSON_TYPE) for v in VERSIONS),
    *((pos("team-a", "a-low", v), VIEWER, JSON_TYPE) for v in VERSIONS),
    ("/openapi/v2", OPENAPI_DOWNLOADER, JSON_TYPE),
    ("/openapi/v3", OPENAPI_DOWNLOADER, JSON_TYPE),
    *((openapi_v3(v), OPENAPI_DOWNLOADER, JSON_TYPE) for v in VERSIONS),
    *((p, ANONYMOUS, TEXT_TYPE) for p in ("/healthz", "/livez", "/readyz")),
    *((p, ANONYMOUS, TEXT_TYPE) for p in ("/healthz/ping", "/livez/ping", "/readyz/ping")),
    ("/readyz/informer-sync", ANONYMOUS, TEXT_TYPE),
    # HEAD on a non-resource path is authorized as verb `head` (docs/cluster.md#request-attributes,
    # as kube-apiserver's request info does): a get-only role would be refused, masters not.
    ("/metrics", ADMIN, METRICS_TYPE),
    ("/version", DAVE, JSON_TYPE),
]


@pytest.mark.parametrize(("path", "identity", "content_type"), PATH_TABLE)
async def test_every_path_of_the_table_answers_get_and_head(
    real_server: RealServer, path: str, identity: Identity, content_type: str
) -> None:
    full, bare, after = await real_server.client(identity).exchange(
        get(path), head(path), get("/healthz")
    )
    assert full.status == 200, (full.status, full.body)
    assert full.header("content-type") == content_type
    assert full.body and full.header("location") is None
    assert bare.status == 200 and bare.body == b""
    health_follows(after)  # so HEAD really sent no body
    for name in ("content-type", "etag", "cache-control", "vary", "x-content-type-options"):
        assert bare.header(name) == full.header(name), name
    if path != "/metrics":  # the metrics move between the two requests
        assert bare.header("content-length") == full.header("content-length")
    assert "server" not in full.header_names  # server_header=False


async def test_api_is_404_as_client_go_tolerates(real_server: RealServer) -> None:
    assert_status(await real_server.client(ADMIN).get("/api"), 404, PATH_NOT_FOUND)


KNOWN_PATHS = [
    cq("cq-a"),
    lq("team-a", "lq-a"),
    pos("team-a", "a-low"),
    "/apis",
    G,
    V2,
    "/openapi/v2",
    "/openapi/v3",
    openapi_v3("v1beta2"),
    "/version",
    "/metrics",
    "/healthz",
    "/readyz/ping",
]


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
async def test_other_methods_are_405_with_allow(real_server: RealServer, method: str) -> None:
    body = b'{"kind":"Status"}' if method in ("POST", "PUT", "PATCH") else None
    requests = [Request(method, path, (), body) for path in KNOWN_PATHS]
    replies = await real_server.client(ADMIN).exchange(*requests, get("/healthz"))
    for path, reply in zip(KNOWN_PATHS, replies, strict=False):
        assert_status(reply, 405, METHOD_NOT_ALLOWED)
        assert reply.header("allow") == "GET, HEAD", path
    health_follows(replies[-1])  # an unread request body does not break keep-alive


async def test_405_comes_after_authorization_with_the_mapped_verb(
    real_server: RealServer,
) -> None:
    alice = real_server.client(ALICE)
    reply = await alice.request("POST", lq("team-a", "lq-a"), body=b"{}")
    assert_status(
        reply,
        403,
        forbidden_resource(
            "alice", "localqueues", "pendingworkloads", "lq-a", "team-a", verb="create"
        ),
    )
    reply = await real_server.client(VIEWER).request("DELETE", cq("cq-a"))
    assert_status(
        reply,
        403,
        forbidden_resource("viewer", "clusterqueues", "pendingworkloads", "cq-a", verb="delete"),
    )
    # The always-allowed health paths are allowed for any verb: 405, even anonymous.
    reply = await real_server.client(ANONYMOUS).request("POST", "/healthz")
    assert_status(reply, 405, METHOD_NOT_ALLOWED)


NOT_FOUND_PATHS = [
    "/",
    "//",
    "/nope",
    "/api/",
    "/api/v1",
    "/docs",
    "/redoc",
    "/openapi.json",
    "/docs/oauth2-redirect",
    "/openapi",
    "/openapi/",
    "/openapi/v1",
    "/openapi/v3/apis",
    openapi_v3("v1alpha1"),
    f"{V2}/clusterqueues",
    f"{V2}/clusterqueues/cq-a",
    f"{V2}/clusterqueues/cq-a/status",
    f"{V2}/clusterqueues/cq-a/pendingworkloads/extra",
    f"{V2}/namespaces/team-a",
    f"{V2}/namespaces/team-a/localqueues",
    f"{V2}/namespaces/team-a/localqueues/lq-a",
    f"{V2}/namespaces/team-a/clusterqueues/cq-a/pendingworkloads",
    f"{V2}/namespaces/team-a/workloads",
    f"{V2}/namespaces/team-a/workloads/a-low",
    f"{V2}/localqueues/lq-a/pendingworkloads",
    f"{V2}/workloads/a-low/pendingposition",
    f"{V2}/watch/clusterqueues/cq-a",
    f"{G}/v1/clusterqueues/cq-a/pendingworkloads",
    f"{G}/v1alpha1",
    "/apis/other.group/v1",
    "/healthz/nope",
    "/livez/informer-sync",  # a readiness-only check is not a liveness check
    "/readyz/ping/x",
    "/static/x",
    "/dashboard/x",  # the dashboard's own paths are docs/dashboard.md's
    "/dashboard/static/index.html",
]


async def test_unknown_paths_and_parents_without_verbs_are_404(real_server: RealServer) -> None:
    replies = await real_server.client(ADMIN).exchange(*map(get, NOT_FOUND_PATHS))
    for path, reply in zip(NOT_FOUND_PATHS, replies, strict=True):
        assert reply.body == PATH_NOT_FOUND, (path, reply.status, reply.body)
        assert_status(reply, 404, PATH_NOT_FOUND)


@pytest.mark.parametrize("path", ["/apis/", f"{G}/", f"{V2}/", f"{V1}/"])
async def test_one_trailing_slash_on_discovery(real_server: RealServer, path: str) -> None:
    slashed, plain = await real_server.client(DAVE).exchange(get(path), get(path[:-1]))
    assert slashed.status == plain.status == 200
    assert slashed.body == plain.body


TRAILING_SLASH_404 = [
    "/apis//",
    f"{G}//",
    f"{V2}//",
    f"{cq('cq-a')}/",
    f"{lq('team-a', 'lq-a')}/",
    f"{pos('team-a', 'a-low')}/",
    "/version/",
    "/metrics/",
    "/openapi/v2/",
    "/openapi/v3/",
    f"{openapi_v3('v1beta2')}/",
    "/healthz/",
    f"{G}/v1/",
    "/apis/other.group/",
]


async def test_a_trailing_slash_elsewhere_is_404(real_server: RealServer) -> None:
    replies = await real_server.client(ADMIN).exchange(*map(get, TRAILING_SLASH_404))
    for path, reply in zip(TRAILING_SLASH_404, replies, strict=True):
        assert (reply.status, reply.body) == (404, PATH_NOT_FOUND), path


PROBES = sorted(
    {
        *(p for p, _, _ in PATH_TABLE),
        *KNOWN_PATHS,
        *NOT_FOUND_PATHS,
        *TRAILING_SLASH_404,
        "/apis/",
        f"{G}/",
        f"{V2}/",
        f"{V2}/clusterqueues/cq-a/pendingworkloads",
        cq("nope"),
        lq("team-z", "nope"),
        pos("team-a", "nope"),
    }
)


@pytest.mark.parametrize("method", ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
@pytest.mark.parametrize("identity", [ADMIN, ANONYMOUS], ids=["admin", "anonymous"])
async def test_never_a_3xx(real_server: RealServer, method: str, identity: Identity) -> None:
    requests = [
        Request(method, path + query) for path in PROBES for query in ("", "?pretty=1&hash=X")
    ]
    replies = await real_server.client(identity).exchange(*requests, get("/healthz"))
    for request, reply in zip(requests, replies, strict=False):
        assert not 300 <= reply.status < 400, (request, reply.status)
        assert reply.header("location") is None, request
        assert reply.status < 500, (request, reply.status, reply.body)
    health_follows(replies[-1])


async def test_names_are_percent_decoded_and_not_validated(real_server: RealServer) -> None:
    viewer = real_server.client(VIEWER)
    plain, encoded, weird, slash, lq_encoded = await viewer.exchange(
        get(cq("cq-a")),
        get(cq("cq%2Da")),
        get(cq("NOT_A_DNS_NAME%21")),
        get(cq("a%2Fb")),
        get(lq("team%2Da", "lq%2Da")),
    )
    assert encoded.status == 200 and encoded.body == plain.body
    assert_status(weird, 404, not_found("clusterqueue", "NOT_A_DNS_NAME!"))
    # An encoded slash separates segments, as in the authorization attributes: a viewer
    # is asked about another subresource (403); the admin finds no such path (404).
    assert slash.status == 403
    assert (await real_server.client(ADMIN).get(cq("a%2Fb"))).status == 404
    assert lq_encoded.status == 200
    assert positions(lq_encoded.json()) == [("a-high", 0, 0), ("a-low", 2, 1)]


# -- docs/visibility-api.md#discovery discovery ----------------------------------------------------


def resource_list(version: str) -> dict[str, Any]:
    def resource(name: str, singular: str, namespaced: bool, kind: str, verbs: list[str]) -> Any:
        return {
            "name": name,
            "singularName": singular,
            "namespaced": namespaced,
            "kind": kind,
            "verbs": verbs,
        }

    summary, position = "PendingWorkloadsSummary", "PendingWorkloadPosition"
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{VIS}/{version}",
        "resources": [
            resource("clusterqueues", "clusterqueue", False, summary, []),
            resource("clusterqueues/pendingworkloads", "", False, summary, ["get"]),
            resource("localqueues", "localqueue", True, summary, []),
            resource("localqueues/pendingworkloads", "", True, summary, ["get"]),
            # [EXT] pendingposition is on by default
            resource("workloads", "workload", True, position, []),
            resource("workloads/pendingposition", "", True, position, ["get"]),
        ],
    }


GROUP_BODY = {
    "name": VIS,
    "versions": [
        {"groupVersion": f"{VIS}/v1beta2", "version": "v1beta2"},
        {"groupVersion": f"{VIS}/v1beta1", "version": "v1beta1"},
    ],
    "preferredVersion": {"groupVersion": f"{VIS}/v1beta2", "version": "v1beta2"},
}


def aggregated(api_version: str) -> dict[str, Any]:
    def kind(version: str, name: str) -> dict[str, str]:
        return {"group": VIS, "version": version, "kind": name}

    def resource(version: str, name: str, singular: str, sub: str, scope: str, k: str) -> Any:
        return {
            "resource": name,
            "responseKind": kind(version, k),
            "scope": scope,
            "singularResource": singular,
            "verbs": [],
            "subresources": [
                {"subresource": sub, "responseKind": kind(version, k), "verbs": ["get"]}
            ],
        }

    summary, position = "PendingWorkloadsSummary", "PendingWorkloadPosition"
    versions = [
        {
            "version": v,
            "freshness": "Current",
            "resources": [
                resource(
                    v, "clusterqueues", "clusterqueue", "pendingworkloads", "Cluster", summary
                ),
                resource(v, "localqueues", "localqueue", "pendingworkloads", "Namespaced", summary),
                resource(v, "workloads", "workload", "pendingposition", "Namespaced", position),
            ],
        }
        for v in VERSIONS
    ]
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": f"apidiscovery.k8s.io/{api_version}",
        "metadata": {},
        "items": [{"metadata": {"name": VIS}, "versions": versions}],
    }


@pytest.mark.parametrize("version", VERSIONS)
async def test_api_resource_list_for_the_legacy_fallback(
    real_server: RealServer, version: str
) -> None:
    """The aggregator's legacy fallback: `system:kube-aggregator` with no groups, plain
    JSON, possibly the `/apis` ETag it cached: always 200 with the full document."""
    (apis,) = await real_server.client(PROBE).exchange(get("/apis", ("Accept", AGGREGATOR_ACCEPT)))
    fallback = real_server.client(LEGACY_FALLBACK)
    path = f"{G}/{version}"
    replies = await fallback.exchange(
        get(path, ("Accept", JSON_TYPE)),
        get(path, ("Accept", JSON_TYPE), ("If-None-Match", apis.header("etag") or "")),
        get(path, ("Accept", JSON_TYPE), ("If-None-Match", "*")),
    )
    for reply in replies:
        assert reply.status == 200  # never 304
        assert reply.body == compact(resource_list(version))
        assert reply.header("content-type") == JSON_TYPE
        assert reply.header("etag") is None


@pytest.mark.parametrize("version", VERSIONS)
async def test_availability_probe(real_server: RealServer, version: str) -> None:
    """Five parallel probes with the proxy certificate as kube-aggregator/system:masters;
    one 2xx is enough, all must be 2xx here."""
    client = real_server.client(PROBE)
    replies = [await client.get(f"{G}/{version}") for _ in range(5)]
    assert {r.status for r in replies} == {200}


async def test_api_group_and_group_list(real_server: RealServer) -> None:
    group, group_list = await real_server.client(DAVE).exchange(get(G), get("/apis"))
    assert group.body == compact({"kind": "APIGroup", "apiVersion": "v1", **GROUP_BODY})
    assert group_list.body == compact(
        {"kind": "APIGroupList", "apiVersion": "v1", "groups": [GROUP_BODY]}
    )
    assert group_list.header("content-type") == JSON_TYPE
    assert group_list.header("vary") == "Accept"
    assert group_list.header("etag")


async def test_aggregated_discovery_as_the_aggregator_fetches_it(real_server: RealServer) -> None:
    probe = real_server.client(PROBE)
    first = await probe.get("/apis", ("Accept", AGGREGATOR_ACCEPT))
    assert first.status == 200
    assert first.header("content-type") == V2_DISCOVERY
    assert first.body == compact(aggregated("v2"))
    assert first.header("vary") == "Accept"
    etag = first.header("etag")
    assert etag and etag.startswith('"') and etag.endswith('"')
    # A minute later, with If-None-Match: 304, no body, no Location (a following request
    # on the same connection proves no body bytes were sent).
    again, after = await probe.exchange(
        get("/apis", ("Accept", AGGREGATOR_ACCEPT), ("If-None-Match", etag)), get("/healthz")
    )
    assert again.status == 304 and again.body == b""
    assert again.header("etag") == etag
    assert again.header("location") is None and again.header("content-type") is None
    health_follows(after)
    # The same ETag from another replica of the build.
    async with serve() as replica:
        other = await replica.client(PROBE).get("/apis", ("Accept", AGGREGATOR_ACCEPT))
    assert other.header("etag") == etag and other.body == first.body
    # Another representation has another tag: the plain list does not match it.
    plain = await probe.get("/apis", ("If-None-Match", etag))
    assert plain.status == 200 and plain.header("etag") != etag


@pytest.mark.parametrize(
    ("accept", "content_type", "kind"),
    [
        (V2_DISCOVERY, V2_DISCOVERY, "APIGroupDiscoveryList"),
        (
            "application/json;as=APIGroupDiscoveryList;v=v2;g=apidiscovery.k8s.io",
            V2_DISCOVERY,
            "APIGroupDiscoveryList",
        ),
        (V2BETA1_DISCOVERY, V2BETA1_DISCOVERY, "APIGroupDiscoveryList"),
        (AGGREGATOR_ACCEPT, V2_DISCOVERY, "APIGroupDiscoveryList"),
        (f"{V2BETA1_DISCOVERY};q=0.5,{V2_DISCOVERY}", V2_DISCOVERY, "APIGroupDiscoveryList"),
        (JSON_TYPE, JSON_TYPE, "APIGroupList"),
        ("application/*", JSON_TYPE, "APIGroupList"),
        ("*/*", JSON_TYPE, "APIGroupList"),
        (None, JSON_TYPE, "APIGroupList"),
        ("application/yaml", "application/yaml", "APIGroupList"),
    ],
)
async def test_apis_negotiation(
    real_server: RealServer, accept: str | None, content_type: str, kind: str
) -> None:
    headers = () if accept is None else (("Accept", accept),)
    reply = await real_server.client(PROBE).get("/apis", *headers)
    assert reply.status == 200
    assert reply.header("content-type") == content_type
    if content_type == "application/yaml":
        document = yaml.safe_load(reply.text)
        assert document == {"kind": "APIGroupList", "apiVersion": "v1", "groups": [GROUP_BODY]}
    elif kind == "APIGroupDiscoveryList":
        version = content_type.split(";v=")[1].split(";", maxsplit=1)[0]
        assert reply.body == compact(aggregated(version))
    else:
        assert reply.json()["kind"] == kind


async def test_apis_with_nothing_acceptable_is_406_json(real_server: RealServer) -> None:
    accept = "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList"
    reply = await real_server.client(PROBE).get("/apis", ("Accept", accept))
    assert_status(reply, 406, NOT_ACCEPTABLE)


async def test_discovery_pretty_and_yaml(real_server: RealServer) -> None:
    dave = real_server.client(DAVE)
    pretty, as_yaml = await dave.exchange(
        get(V2, ("User-Agent", "curl/8.5.0")), get(V2, ("Accept", "application/yaml"))
    )
    assert pretty.body == orjson.dumps(resource_list("v1beta2"), option=orjson.OPT_INDENT_2)
    assert as_yaml.text.startswith(
        "apiVersion: v1\ngroupVersion: visibility.kueue.x-k8s.io/v1beta2\n"
    )
    assert "resources:\n- kind: PendingWorkloadsSummary\n  name: clusterqueues\n" in as_yaml.text


# -- docs/visibility-api.md#query-parameters query parameters --------------------------------------

# (endpoint path, length of its sequence, the global index of sequence entry j)
ENDPOINTS = {
    **{f"cq/{v}": (cq("cq-big", v), BIG, 1) for v in VERSIONS},
    **{f"lq/{v}": (lq("team-big", "lq-even", v), BIG // 2, 2) for v in VERSIONS},
}

QUERY_TABLE = [
    # (query, effective offset, effective limit), as docs/visibility-api.md#query-parameters's table
    # says
    ("", 0, 1000),
    ("?limit=0", 0, 1000),
    ("?offset=5", 5, 1000),
    ("?limit=-1", 0, 0),
    ("?limit=2000000000", 0, 100_000),
    ("?offset=-3&limit=2", 0, 2),
    ("?limit=+7", 0, 7),
    ("?limit=%2B7", 0, 7),
    ("?limit=5&limit=9", 0, 5),
    ("?offset=5&offset=1&limit=2", 5, 2),
    ("?limit=3&resourceVersion=7&fieldSelector=x&continue=abc&watch=true", 0, 3),
    ("?offset=2999&limit=5", 2999, 5),
    ("?offset=99999999999", 99_999_999_999, 1000),
    ("?offset=9223372036854775807&limit=9223372036854775807", 9_223_372_036_854_775_807, 100_000),
    ("?offset=-9223372036854775808&limit=-0", 0, 1000),
    ("?limit=-9223372036854775808", 0, 0),
]


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
@pytest.mark.parametrize(("query", "offset", "limit"), QUERY_TABLE)
async def test_query_table(
    real_server: RealServer, endpoint: str, query: str, offset: int, limit: int
) -> None:
    path, length, stride = ENDPOINTS[endpoint]
    # `limit=0` means the default, so an effective limit of 0 is spelled `limit=-1`.
    canonical_query = f"?offset={offset}&limit={limit if limit else -1}"
    reply, canonical = await real_server.client(VIEWER).exchange(
        get(path + query), get(path + canonical_query)
    )
    assert reply.status == 200, reply.body
    # The ETag covers the effective (offset, limit): equal to the canonical request's.
    assert reply.header("etag") == canonical.header("etag")
    assert reply.body == canonical.body
    expected = [
        (f"w{j * stride:05d}", j * stride, j * stride // 2)
        for j in range(min(offset, length), min(offset + limit, length))
    ]
    if stride == 2:  # the LocalQueue endpoint: its own index is the LocalQueue position
        expected = [(name, at, at // 2) for name, at, _ in expected]
    assert positions(orjson.loads(reply.body)) == expected


BAD_QUERIES = [
    ("limit=abc", "limit", "abc"),
    ("limit=", "limit", ""),
    ("limit", "limit", ""),
    ("limit=1.5", "limit", "1.5"),
    ("limit=1e3", "limit", "1e3"),
    ("limit=0x10", "limit", "0x10"),
    ("limit=1_000", "limit", "1_000"),
    ("limit=%201", "limit", " 1"),
    ("limit=1%20", "limit", "1 "),
    ("limit=++1", "limit", "++1"),
    ("limit=+-1", "limit", "+-1"),
    ("offset=9223372036854775808", "offset", "9223372036854775808"),
    ("offset=-9223372036854775809", "offset", "-9223372036854775809"),
    ("offset=x&limit=y", "offset", "x"),
    ("limit=5&waitSeconds=soon", "waitSeconds", "soon"),
    ("limit=5&limit=abc", None, None),  # only the first occurrence counts: 200
]


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
async def test_bad_integers_are_400(real_server: RealServer, endpoint: str) -> None:
    path = ENDPOINTS[endpoint][0]
    replies = await real_server.client(VIEWER).exchange(
        *(get(f"{path}?{query}") for query, _, _ in BAD_QUERIES)
    )
    for (query, parameter, value), reply in zip(BAD_QUERIES, replies, strict=True):
        if parameter is None:
            assert reply.status == 200, query
        else:
            assert value is not None
            assert_status(reply, 400, bad_request(parameter, value))


async def test_non_ascii_digits_are_400(real_server: RealServer) -> None:
    reply = await real_server.client(VIEWER).get(cq("cq-a") + "?limit=%D9%A1")
    assert reply.status == 400
    assert reply.json()["message"] == (
        'invalid value "\u0661" for query parameter "limit": must be a base-10 integer'
    )


# -- docs/visibility-api.md#pending-workloads-endpoints shape, listing, order and positions --------


def example_item(
    name: str, local_queue: str, priority: int, second: int, at: tuple[int, int]
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "creationTimestamp": f"2026-01-01T00:00:0{second}Z",
        },
        "priority": priority,
        "localQueueName": local_queue,
        "positionInClusterQueue": at[0],
        "positionInLocalQueue": at[1],
    }


A_HIGH = example_item("a-high", "lq-a", 100, 0, (0, 0))
B_HIGH = example_item("b-high", "lq-b", 100, 1, (1, 0))
A_LOW = example_item("a-low", "lq-a", 50, 0, (2, 1))
B_LOW = example_item("b-low", "lq-b", 50, 1, (3, 1))


def summary(version: str, resource_version: str, items: list[Any]) -> bytes:
    return compact(
        {
            "kind": "PendingWorkloadsSummary",
            "apiVersion": f"{VIS}/{version}",
            "metadata": {"resourceVersion": resource_version},
            "items": items,
        }
    )


@pytest.mark.parametrize("version", VERSIONS)
async def test_worked_example_exactly(real_server: RealServer, version: str) -> None:
    view = SNAPSHOT.views["cq-a"]
    whole, lq_a, lq_b, lq_b_1 = await real_server.client(VIEWER).exchange(
        get(cq("cq-a", version)),
        get(lq("team-a", "lq-a", version)),
        get(lq("team-a", "lq-b", version)),
        get(lq("team-a", "lq-b", version) + "?offset=1"),
    )
    assert whole.body == summary(version, view.digest, [A_HIGH, B_HIGH, A_LOW, B_LOW])
    assert lq_a.body == summary(version, view.local_queue_digest("team-a", "lq-a"), [A_HIGH, A_LOW])
    lq_b_version = view.local_queue_digest("team-a", "lq-b")
    assert lq_b.body == summary(version, lq_b_version, [B_HIGH, B_LOW])
    assert lq_b_1.body == summary(version, lq_b_version, [B_LOW])


async def test_same_named_local_queues_in_two_namespaces(real_server: RealServer) -> None:
    whole, team_a, team_b = await real_server.client(VIEWER).exchange(
        get(cq("cq-d")), get(lq("team-a", "default")), get(lq("team-b", "default"))
    )
    assert positions(whole.json()) == [("x", 0, 0), ("y", 1, 0)]
    assert positions(team_a.json()) == [("x", 0, 0)]
    assert positions(team_b.json()) == [("y", 1, 0)]


@pytest.mark.parametrize("version", VERSIONS)
async def test_item_rendering_exactly(real_server: RealServer, version: str) -> None:
    """docs/visibility-api.md#response-body: the Workload's own name and namespace, creation
    truncated to seconds, owner references reduced to four keys in order, and nothing else."""
    reply = await real_server.client(VIEWER).get(cq("cq-jobs", version))
    digest = SNAPSHOT.views["cq-jobs"].digest
    assert len(digest) == 16 and digest == digest.lower()
    assert reply.body == (
        b'{"kind":"PendingWorkloadsSummary","apiVersion":"visibility.kueue.x-k8s.io/'
        + version.encode()
        + b'","metadata":{"resourceVersion":"'
        + digest.encode()
        + b'"},"items":[{"metadata":{"name":"job-train-a-5d2f1","namespace":"team-a",'
        b'"creationTimestamp":"2026-01-01T00:00:00Z","ownerReferences":[{"apiVersion":'
        b'"batch/v1","kind":"Job","name":"train-a","uid":"' + JOB_OWNER.uid.encode() + b'"}]},'
        b'"priority":100,"localQueueName":"lq-jobs","positionInClusterQueue":0,'
        b'"positionInLocalQueue":0}]}\n'
    )
    assert reply.header("content-type") == JSON_TYPE


async def test_positions_agree_across_endpoints(real_server: RealServer) -> None:
    viewer = real_server.client(VIEWER)
    paths = [cq("cq-a"), lq("team-a", "lq-a"), lq("team-a", "lq-b"), lq("team-a", "lq-idle")]
    whole, *local = await viewer.exchange(*map(get, paths))
    by_name = {i["metadata"]["name"]: i for i in whole.json()["items"]}
    seen = [item for reply in local for item in reply.json()["items"]]
    assert sorted(i["metadata"]["name"] for i in seen) == sorted(by_name)
    for item in seen:
        assert item == by_name[item["metadata"]["name"]]


async def test_resource_version_is_content_derived_across_replicas(
    real_server: RealServer,
) -> None:
    paths = [cq("cq-a"), lq("team-a", "lq-a"), cq("cq-a", "v1beta1")]
    ours = await real_server.client(VIEWER).exchange(*map(get, paths))
    async with serve(contract_snapshot()) as replica:  # another process, same queues
        theirs = await replica.client(VIEWER).exchange(*map(get, paths))
    for mine, other in zip(ours, theirs, strict=True):
        assert mine.header("etag") == other.header("etag")
        assert mine.json()["metadata"] == other.json()["metadata"]
    assert ours[0].json()["metadata"]["resourceVersion"] == SNAPSHOT.views["cq-a"].digest
    assert ours[2].json()["metadata"] == ours[0].json()["metadata"]


# -- docs/visibility-api.md#special-cases special cases --------------------------------------------


async def test_special_cases(real_server: RealServer) -> None:
    unknown_cq, unknown_lq, other_ns, orphan, empty, idle = await real_server.client(
        VIEWER
    ).exchange(
        get(cq("foo")),
        get(lq("team-a", "foo")),
        get(lq("team-z", "lq-a")),
        get(lq("team-a", "lq-orphan")),
        get(cq("cq-empty")),
        get(lq("team-a", "lq-idle")),
    )
    assert_status(unknown_cq, 404, not_found("clusterqueue", "foo"))
    assert_status(unknown_lq, 404, not_found("localqueue", "foo"))
    assert_status(other_ns, 404, not_found("localqueue", "lq-a"))
    assert orphan.status == 200 and orphan.json()["items"] == []
    assert len(orphan.json()["metadata"]["resourceVersion"]) == 16 and orphan.header("etag")
    assert empty.status == 200 and empty.body.endswith(b'"items":[]}\n')
    assert idle.status == 200 and idle.json()["items"] == []


async def test_forbidden_is_decided_before_existence(real_server: RealServer) -> None:
    alice = real_server.client(ALICE)
    unknown_cq, unknown_lq, unknown_workload = await alice.exchange(
        get(cq("nope")), get(lq("team-b", "nope")), get(pos("team-b", "nope"))
    )
    assert_status(
        unknown_cq, 403, forbidden_resource("alice", "clusterqueues", "pendingworkloads", "nope")
    )
    assert_status(
        unknown_lq,
        403,
        forbidden_resource("alice", "localqueues", "pendingworkloads", "nope", "team-b"),
    )
    assert_status(
        unknown_workload,
        403,
        forbidden_resource("alice", "workloads", "pendingposition", "nope", "team-b"),
    )


async def test_before_the_initial_sync() -> None:
    async with serve(contract_snapshot(synced=False)) as server:
        viewer = server.client(VIEWER)
        replies = await viewer.exchange(
            get(cq("cq-a")),
            get(lq("team-a", "lq-a", "v1beta1")),
            get(pos("team-a", "a-low")),
            get(cq("nope")),  # the queue lookup comes after the sync check
            get(cq("cq-a") + "?limit=x"),  # the query check comes before it
            get("/apis"),
            get(G),
            get(V2),
            get("/openapi/v2"),
            get("/livez"),
        )
        anonymous = server.client(ANONYMOUS)
        readyz, healthz, check, verbose = await anonymous.exchange(
            get("/readyz"), get("/healthz"), get("/readyz/informer-sync"), get("/readyz?verbose")
        )
    for reply in replies[:4]:
        assert_status(reply, 503, NOT_SYNCED)
        assert reply.header("retry-after") == "1"
    assert_status(replies[4], 400, bad_request("limit", "x"))
    assert [r.status for r in replies[5:]] == [200] * 5  # discovery never waits
    failed = b"[+]ping ok\n[-]informer-sync failed: reason withheld\nreadyz check failed\n"
    assert (readyz.status, readyz.body) == (500, failed)
    assert verbose.body == failed
    assert readyz.header("content-type") == TEXT_TYPE
    assert healthz.status == 500 and check.status == 500


# -- docs/visibility-api.md#snapshots-identity-and-cost conditional requests, streaming, limits ----


@pytest.mark.parametrize(
    "path", [cq("cq-a"), lq("team-a", "lq-a"), pos("team-a", "a-low"), cq("cq-a", "v1beta1")]
)
async def test_etag_and_304_without_a_body(real_server: RealServer, path: str) -> None:
    viewer = real_server.client(VIEWER)
    first = await viewer.get(path)
    etag = first.header("etag")
    assert etag is not None and len(etag) == 18 and etag[0] == etag[-1] == '"'
    assert int(etag[1:-1], 16) >= 0 and etag[1:-1] == etag[1:-1].lower()
    assert first.header("cache-control") == "private, no-cache"
    assert first.header("vary") == "Accept"
    requests: list[Request] = []
    for condition in (etag, f'"other", {etag}', f"W/{etag}", "*"):
        requests += [get(path, ("If-None-Match", condition)), get("/healthz")]
    replies = await viewer.exchange(*requests, get(path, ("If-None-Match", '"nope"')))
    for not_modified, after in zip(replies[0:-1:2], replies[1:-1:2], strict=True):
        assert not_modified.status == 304 and not_modified.body == b""
        assert not_modified.header("etag") == etag
        assert not_modified.header("cache-control") == "private, no-cache"
        assert not_modified.header("vary") == "Accept"
        assert not_modified.header("location") is None
        assert not_modified.header("content-type") is None
        assert not not_modified.chunked
        health_follows(after)
    assert replies[-1].status == 200 and replies[-1].body == first.body


async def test_etags_cover_every_representation(real_server: RealServer) -> None:
    variants = [
        get(cq("cq-a")),
        get(cq("cq-a") + "?limit=2"),
        get(cq("cq-a") + "?offset=1"),
        get(cq("cq-a") + "?pretty=1"),
        get(cq("cq-a", "v1beta1")),
        get(cq("cq-a"), ("Accept", "application/yaml")),
        get(cq("cq-a"), ("Accept", TABLE)),
        get(cq("cq-a") + "?includeObject=None", ("Accept", TABLE)),
        get(cq("cq-a") + "?includeObject=Object", ("Accept", TABLE)),
        get(lq("team-a", "lq-a")),
    ]
    replies = await real_server.client(VIEWER).exchange(*variants)
    tags = [r.header("etag") for r in replies]
    assert None not in tags and len(set(tags)) == len(tags)
    same = await real_server.client(VIEWER).exchange(
        get(cq("cq-a")), get(cq("cq-a") + "?limit=0"), get(cq("cq-a") + "?offset=-4")
    )
    assert len({r.header("etag") for r in same}) == 1


async def test_authorization_runs_before_the_304(real_server: RealServer) -> None:
    etag = (await real_server.client(VIEWER).get(cq("cq-a"))).header("etag")
    assert etag is not None
    reply = await real_server.client(ALICE).get(cq("cq-a"), ("If-None-Match", etag))
    assert_status(
        reply, 403, forbidden_resource("alice", "clusterqueues", "pendingworkloads", "cq-a")
    )
    wrong = aggregator("viewer", ["queue-viewers"], cert=WRONG_PROXY_CERT)
    reply = await real_server.client(wrong).get(cq("cq-a"), ("If-None-Match", etag))
    assert_status(reply, 401, UNAUTHORIZED)


def parse_chunked(raw: bytes) -> tuple[bytes, dict[str, str], list[bytes]]:
    """A complete HTTP/1.1 response with chunked framing: (status line, headers, chunks)."""
    head_bytes, _, rest = raw.partition(b"\r\n\r\n")
    status_line, *lines = head_bytes.split(b"\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    chunks: list[bytes] = []
    while True:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            assert rest == b"\r\n", "no trailers, nothing after the last chunk"
            return status_line, headers, chunks
        chunks.append(rest[:size])
        assert rest[size : size + 2] == b"\r\n"
        rest = rest[size + 2 :]


async def test_a_large_page_streams_in_chunks(real_server: RealServer) -> None:
    viewer = real_server.client(VIEWER)
    raw = await viewer.raw(viewer.request_bytes("GET", cq("cq-big") + "?limit=6000"))
    status_line, headers, chunks = parse_chunked(raw)
    assert status_line == b"HTTP/1.1 200 OK"
    assert headers["transfer-encoding"] == "chunked"
    assert "content-length" not in headers and "content-encoding" not in headers  # no gzip
    assert headers["etag"] and headers["cache-control"] == "private, no-cache"
    # 1000-item chunks with a loop turn between them: at least one chunk per thousand.
    assert len([c for c in chunks if c]) >= BIG // 1000
    body = b"".join(chunks)
    assert body.endswith(b"]}\n") and body.count(b"\n") == 1
    document = orjson.loads(body)
    assert document["metadata"] == {"resourceVersion": SNAPSHOT.views["cq-big"].digest}
    assert positions(document) == [(f"w{i:05d}", i, i // 2) for i in range(BIG)]
    # The same bytes as the page read through http.client, and as smaller pages joined.
    whole = await viewer.get(cq("cq-big") + "?limit=6000")
    assert whole.chunked and whole.body == body
    parts = await viewer.exchange(
        *(get(cq("cq-big") + f"?offset={o}&limit=1000") for o in range(0, BIG, 1000))
    )
    joined = [i for part in parts for i in orjson.loads(part.body)["items"]]
    assert joined == document["items"]


async def test_streaming_threshold_pretty_yaml_and_head(real_server: RealServer) -> None:
    viewer = real_server.client(VIEWER)
    at_threshold, above, local, pretty, as_yaml, bare, after = await viewer.exchange(
        get(cq("cq-big") + "?limit=5000"),
        get(cq("cq-big") + "?limit=5001"),
        get(lq("team-big", "lq-even") + "?limit=100000"),
        get(cq("cq-big") + "?limit=6000&pretty=true"),
        # YAML renders slowly (PyYAML): the smallest streamed page.
        get(cq("cq-big") + "?limit=5001", ("Accept", "application/yaml")),
        head(cq("cq-big") + "?limit=6000"),
        get("/healthz"),
    )
    assert not at_threshold.chunked
    assert at_threshold.header("content-length") == str(len(at_threshold.body))
    assert above.chunked and len(above.json()["items"]) == 5001
    assert not local.chunked and len(local.json()["items"]) == BIG // 2
    assert pretty.chunked and not pretty.body.endswith(b"\n")
    compact_page = orjson.loads((await viewer.get(cq("cq-big") + "?limit=6000")).body)
    assert pretty.body == orjson.dumps(compact_page, option=orjson.OPT_INDENT_2)
    assert as_yaml.chunked and as_yaml.header("content-type") == "application/yaml"
    yaml_page = yaml.load(as_yaml.body, Loader=yaml.CSafeLoader)
    assert yaml_page == {**compact_page, "items": compact_page["items"][:5001]}
    assert bare.status == 200 and bare.body == b"" and bare.header("etag")
    health_follows(after)


async def test_the_in_flight_limit_is_429() -> None:
    async with serve(max_inflight=0) as server:
        replies = await server.client(VIEWER).exchange(
            get(cq("cq-a")),
            get(lq("team-a", "lq-a")),
            get(pos("team-a", "a-low")),
            get(cq("cq-a") + "?limit=x"),  # errors before the limit are still reported
            get("/apis"),
            get(V2),
            get("/openapi/v2"),
            get("/metrics"),
            get("/healthz"),
        )
    for reply in replies[:3]:
        assert_status(reply, 429, TOO_MANY)
        assert reply.header("retry-after") == "1"
    assert replies[3].status == 400
    assert [r.status for r in replies[4:]] == [200] * 5  # only data requests are limited


# -- docs/visibility-api.md#errors Status bodies and the order of checks ---------------------------


async def test_status_bodies_of_the_contract_byte_for_byte(real_server: RealServer) -> None:
    """The exact bodies listed in docs/visibility-api.md#errors (the 503 one is in
    `test_before_the_initial_sync`)."""
    admin = real_server.client(ADMIN)
    foo_cq, foo_lq, nope, bad, post = await admin.exchange(
        get(cq("foo")),
        get(lq("team-a", "foo")),
        get("/nope"),
        get(cq("cq-a") + "?limit=abc"),
        Request("POST", cq("cq-a")),
    )
    assert foo_cq.body == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
        b'"clusterqueue.visibility.kueue.x-k8s.io \\"foo\\" not found","reason":"NotFound",'
        b'"details":{"name":"foo","group":"visibility.kueue.x-k8s.io","kind":"clusterqueue"},'
        b'"code":404}\n'
    )
    assert foo_lq.body == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
        b'"localqueue.visibility.kueue.x-k8s.io \\"foo\\" not found","reason":"NotFound",'
        b'"details":{"name":"foo","group":"visibility.kueue.x-k8s.io","kind":"localqueue"},'
        b'"code":404}\n'
    )
    assert nope.body == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
        b'"the server could not find the requested resource","reason":"NotFound",'
        b'"details":{},"code":404}\n'
    )
    assert bad.body == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
        b'"invalid value \\"abc\\" for query parameter \\"limit\\": must be a base-10 integer",'
        b'"reason":"BadRequest","code":400}\n'
    )
    assert post.body == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
        b'"the server does not allow this method on the requested resource",'
        b'"reason":"MethodNotAllowed","details":{},"code":405}\n'
    )
    wrong = aggregator("viewer", ["queue-viewers"], cert=WRONG_PROXY_CERT)
    unauthorized = await real_server.client(wrong).get(cq("cq-a"))
    assert unauthorized.body == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
        b'"Unauthorized","reason":"Unauthorized","code":401}\n'
    )
    for reply, code in ((foo_cq, 404), (foo_lq, 404), (nope, 404), (bad, 400), (post, 405)):
        assert reply.status == code
        assert reply.header("x-content-type-options") == "nosniff"
        assert reply.header("content-type") == JSON_TYPE


async def test_forbidden_messages_in_kube_apiserver_format(real_server: RealServer) -> None:
    alice = real_server.client(ALICE)
    cluster, namespaced = await alice.exchange(get(cq("cq-a")), get(lq("team-b", "lq-b")))
    assert cluster.body == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
        b'"clusterqueues.visibility.kueue.x-k8s.io \\"cq-a\\" is forbidden: User \\"alice\\" '
        b'cannot get resource \\"clusterqueues/pendingworkloads\\" in API group '
        b'\\"visibility.kueue.x-k8s.io\\" at the cluster scope","reason":"Forbidden",'
        b'"details":{"name":"cq-a","group":"visibility.kueue.x-k8s.io","kind":"clusterqueues"},'
        b'"code":403}\n'
    )
    assert namespaced.json()["message"] == (
        'localqueues.visibility.kueue.x-k8s.io "lq-b" is forbidden: User "alice" cannot get '
        'resource "localqueues/pendingworkloads" in API group "visibility.kueue.x-k8s.io" in '
        'the namespace "team-b"'
    )
    assert_status(
        namespaced,
        403,
        forbidden_resource("alice", "localqueues", "pendingworkloads", "lq-b", "team-b"),
    )
    anonymous = await real_server.client(ANONYMOUS).get("/metrics")
    assert anonymous.body == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
        b'"forbidden: User \\"system:anonymous\\" cannot get path \\"/metrics\\"",'
        b'"reason":"Forbidden","details":{},"code":403}\n'
    )
    eve = await real_server.client(aggregator("<eve>&co", ["system:authenticated"])).get(cq("cq-a"))
    assert eve.status == 403
    assert eve.json()["message"] == (
        'clusterqueues.visibility.kueue.x-k8s.io "cq-a" is forbidden: User "&lt;eve&gt;&amp;co" '
        'cannot get resource "clusterqueues/pendingworkloads" in API group '
        '"visibility.kueue.x-k8s.io" at the cluster scope'
    )


class _FailingBackend:
    """A SubjectAccessReview that cannot be made: refused (500) or transient (503)."""

    def __init__(self, message: str, *, transient: bool) -> None:
        self.message = message
        self.transient = transient

    async def review(self, user: UserInfo, attrs: Attributes) -> Decision:
        error = RuntimeError(self.message)
        error.transient = self.transient  # type: ignore[attr-defined]
        raise error


SAR_REFUSED = (
    "authorization check failed: this server's identity \"system:serviceaccount:"
    'queuescope-system:queuescope-controller" may not create '
    "subjectaccessreviews.authorization.k8s.io; bind it to the ClusterRole "
    "system:auth-delegator"
)


async def test_sar_refused_is_500_naming_the_fix_and_discovery_stays_up() -> None:
    authorizer = Authorizer(_FailingBackend(SAR_REFUSED, transient=False))
    async with serve(authorizer=authorizer) as server:
        replies = await server.client(DAVE).exchange(
            get(cq("cq-a")), *(get(p) for p in ("/apis", V2, "/openapi/v2", "/version"))
        )
        health = await server.client(ANONYMOUS).get("/healthz")
    assert_status(
        replies[0],
        500,
        status_body(
            f"Internal error occurred: {SAR_REFUSED}",
            "InternalError",
            500,
            {"causes": [{"message": SAR_REFUSED}]},
        ),
    )
    assert [r.status for r in replies[1:]] == [200] * 4
    assert (health.status, health.body) == OK_HEALTH


async def test_sar_transient_failure_is_503_with_retry_after() -> None:
    authorizer = Authorizer(_FailingBackend("timeout after 10s", transient=True))
    async with serve(authorizer=authorizer) as server:
        reply, discovery = await server.client(DAVE).exchange(get(cq("cq-a")), get("/apis"))
    assert_status(
        reply,
        503,
        status_body(
            "authorization is temporarily unavailable: timeout after 10s",
            "ServiceUnavailable",
            503,
            {"retryAfterSeconds": 1},
        ),
    )
    assert reply.header("retry-after") == "1"
    assert discovery.status == 200


async def test_errors_follow_yaml_pretty_and_head(real_server: RealServer) -> None:
    admin = real_server.client(ADMIN)
    as_yaml, pretty, bare, after, table_only = await admin.exchange(
        get("/nope", ("Accept", "application/yaml")),
        get("/nope?pretty=true"),
        head("/nope"),
        get("/healthz"),
        get("/nope", ("Accept", TABLE)),
    )
    assert as_yaml.status == 404
    assert as_yaml.header("content-type") == "application/yaml"
    assert as_yaml.text == (
        "apiVersion: v1\ncode: 404\ndetails: {}\nkind: Status\n"
        "message: the server could not find the requested resource\n"
        "metadata: {}\nreason: NotFound\nstatus: Failure\n"
    )
    assert pretty.body == orjson.dumps(json.loads(PATH_NOT_FOUND), option=orjson.OPT_INDENT_2)
    assert (bare.status, bare.body) == (404, b"")
    assert bare.header("content-length") == str(len(PATH_NOT_FOUND))
    health_follows(after)
    assert table_only.body == PATH_NOT_FOUND


CHECK_ORDER = [
    # authentication beats everything
    (aggregator("x", cert=WRONG_PROXY_CERT).with_headers(("Impersonate-User", "x")), "/nope",
     "POST", 401),
    # impersonation beats authorization
    (DAVE.with_headers(("Impersonate-User", "kubernetes-admin")), cq("cq-a"), "GET", 403),
    # authorization beats route and method: no probing for paths or queues
    (DAVE, "/nope", "GET", 403),
    (DAVE, cq("nope"), "GET", 403),
    (ALICE, cq("cq-a"), "DELETE", 403),
    # route before method; method after authorization with the mapped verb
    (ADMIN, "/nope", "POST", 404),
    (ADMIN, cq("cq-a"), "PUT", 405),
    (ANONYMOUS, "/livez", "DELETE", 405),
    # Accept before the query, the query before the sync and the queue lookup
    (VIEWER.with_headers(("Accept", "text/html")), cq("cq-a") + "?limit=x", "GET", 406),
    (VIEWER, cq("nope") + "?limit=x", "GET", 400),
    (VIEWER, cq("nope"), "GET", 404),
]  # fmt: skip


async def test_the_order_of_checks(real_server: RealServer) -> None:
    for identity, path, method, code in CHECK_ORDER:
        reply = await real_server.client(identity).request(method, path)
        assert reply.status == code, (identity.label, method, path, reply.body)
        assert reply.json()["kind"] == "Status"


# -- docs/visibility-api.md#content-negotiation negotiation, pretty, Table -------------------------


@pytest.mark.parametrize(
    ("accept", "kind"),
    [
        ("application/json, */*", "json"),  # kubectl get --raw
        (JSON_TYPE, "json"),  # client-go's generated client
        ("APPLICATION/JSON", "json"),
        ("application/json;charset=utf-8", "json"),
        ("application/*", "json"),
        ("*/*", "json"),
        (None, "json"),
        (f"{PROTOBUF},{JSON_TYPE}", "json"),
        ("application/cbor, application/json", "json"),
        ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,*/*", "json"),
        ("application/yaml", "yaml"),
        ("application/json;q=0.8,application/yaml", "yaml"),
        ("application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/yaml", "yaml"),
        (KUBECTL_TABLE, "table"),
        (TABLE, "table"),
        ("application/json;g=meta.k8s.io;v=v1;as=Table", "table"),
        (PROTOBUF, 406),
        ("text/html", 406),
        ("application/json;q=0", 406),
        ("application/json;as=Table;v=v1beta1;g=meta.k8s.io", 406),
    ],
)
async def test_accept_on_the_summaries(
    real_server: RealServer, accept: str | None, kind: str | int
) -> None:
    headers = () if accept is None else (("Accept", accept),)
    json_reply = await real_server.client(VIEWER).get(cq("cq-a"))
    for path in (cq("cq-a"), lq("team-a", "lq-a")):
        reply = await real_server.client(VIEWER).get(path, *headers)
        if kind == 406:
            assert_status(reply, 406, NOT_ACCEPTABLE)
        elif kind == "json":
            assert reply.header("content-type") == JSON_TYPE
            assert reply.json()["kind"] == "PendingWorkloadsSummary"
            if path == cq("cq-a"):
                assert reply.body == json_reply.body
        elif kind == "yaml":
            assert reply.header("content-type") == "application/yaml"
            assert yaml.safe_load(reply.text)["kind"] == "PendingWorkloadsSummary"
        else:
            assert reply.header("content-type") == JSON_TYPE
            assert reply.json()["kind"] == "Table"


async def test_yaml_summary_reads_as_kubectl_would(real_server: RealServer) -> None:
    viewer = real_server.client(VIEWER)
    as_json, as_yaml = await viewer.exchange(
        get(cq("cq-jobs")), get(cq("cq-jobs"), ("Accept", "application/yaml"))
    )
    assert yaml.safe_load(as_yaml.text) == as_json.json()
    assert as_yaml.text.startswith(
        "apiVersion: visibility.kueue.x-k8s.io/v1beta2\nitems:\n- localQueueName: lq-jobs\n"
    )
    assert "  metadata:\n    creationTimestamp: '2026-01-01T00:00:00Z'\n" in as_yaml.text
    assert "    ownerReferences:\n    - apiVersion: batch/v1\n      kind: Job\n" in as_yaml.text


TABLE_COLUMNS = [
    ("Name", "string", "name", "Name of the Workload", 0),
    ("Namespace", "string", "", "Namespace of the Workload", 0),
    ("LocalQueue", "string", "", "LocalQueue the Workload was submitted to", 0),
    ("Priority", "integer", "", "Priority of the Workload", 0),
    ("Position in ClusterQueue", "integer", "", "0-based position in the ClusterQueue", 0),
    ("Position in LocalQueue", "integer", "", "0-based position in the LocalQueue", 0),
    ("Age", "string", "", "Time since the Workload was created", 0),
    ("Owner", "string", "", "Kind/name of the first owner", 1),
]


async def test_table_for_kubectl(real_server: RealServer) -> None:
    viewer = real_server.client(VIEWER)
    table_reply, jobs, summary_reply = await viewer.exchange(
        get(cq("cq-a"), ("Accept", KUBECTL_TABLE)),
        get(cq("cq-jobs"), ("Accept", KUBECTL_TABLE)),
        get(cq("cq-a")),
    )
    assert table_reply.header("content-type") == JSON_TYPE
    table = table_reply.json()
    assert list(table) == ["kind", "apiVersion", "metadata", "columnDefinitions", "rows"]
    assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    assert table["metadata"] == summary_reply.json()["metadata"]
    assert table["columnDefinitions"] == [
        {"name": n, "type": t, "format": f, "description": d, "priority": p}
        for n, t, f, d, p in TABLE_COLUMNS
    ]
    assert [row["cells"] for row in table["rows"]] == [
        ["a-high", "team-a", "lq-a", 100, 0, 0, "5m", ""],
        ["b-high", "team-a", "lq-b", 100, 1, 0, "4m59s", ""],
        ["a-low", "team-a", "lq-a", 50, 2, 1, "5m", ""],
        ["b-low", "team-a", "lq-b", 50, 3, 1, "4m59s", ""],
    ]
    assert table["rows"][0]["object"] == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {
            "name": "a-high",
            "namespace": "team-a",
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
    }
    assert jobs.json()["rows"][0]["cells"][-1] == "Job/train-a"


async def test_table_include_object_and_paging(real_server: RealServer) -> None:
    viewer = real_server.client(VIEWER)
    accept = ("Accept", TABLE)
    none, obj, default, unknown, paged, summary_reply = await viewer.exchange(
        get(cq("cq-a") + "?includeObject=None", accept),
        get(cq("cq-a") + "?includeObject=Object", accept),
        get(cq("cq-a") + "?includeObject=Metadata", accept),
        get(cq("cq-a") + "?includeObject=Everything", accept),
        get(lq("team-a", "lq-a") + "?offset=1", accept),
        get(cq("cq-a")),
    )
    assert all(set(row) == {"cells"} for row in none.json()["rows"])
    assert [row["object"] for row in obj.json()["rows"]] == summary_reply.json()["items"]
    assert unknown.json() == default.json()
    assert [row["cells"][0] for row in paged.json()["rows"]] == ["a-low"]


async def test_table_only_on_the_summaries(real_server: RealServer) -> None:
    viewer = real_server.client(VIEWER)
    kubectl, table_only = await viewer.exchange(
        get(pos("team-a", "a-low"), ("Accept", KUBECTL_TABLE)),
        get(pos("team-a", "a-low"), ("Accept", TABLE)),
    )
    assert kubectl.json()["kind"] == "PendingWorkloadPosition"
    assert_status(table_only, 406, NOT_ACCEPTABLE)


@pytest.mark.parametrize(
    ("query", "agent", "pretty"),
    [
        ("", "curl/8.5.0", True),
        ("", "Wget/1.21", True),
        ("", "Mozilla/5.0 (X11; Linux x86_64)", True),
        ("", "kubectl/v1.32.0 (linux/amd64) kubernetes/abc", False),
        ("", "Go-http-client/1.1", False),
        ("?pretty=", "curl/8", True),  # an empty value does not decide
        ("?pretty=0", "curl/8", False),
        ("?pretty=false", "curl/8", False),
        ("?pretty=yes", "curl/8", False),
        *((f"?pretty={v}", "kubectl/v1.32", True) for v in ("1", "t", "T", "TRUE", "true", "True")),
    ],
)  # fmt: skip
async def test_pretty_by_query_and_by_user_agent(
    real_server: RealServer, query: str, agent: str, pretty: bool
) -> None:
    viewer = real_server.client(VIEWER)
    reply, plain = await viewer.exchange(
        get(cq("cq-jobs") + query, ("User-Agent", agent)), get(cq("cq-jobs"))
    )
    document = plain.json()
    assert plain.body == orjson.dumps(document) + b"\n"  # compact: exactly one newline
    if pretty:
        assert reply.body == orjson.dumps(document, option=orjson.OPT_INDENT_2)
        assert not reply.body.endswith(b"\n")
        assert list(json.loads(reply.body)) == list(document)  # same key order
    else:
        assert reply.body == plain.body


# -- docs/visibility-api.md#openapi-documents OpenAPI ----------------------------------------------


def refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [
            ref
            for key, value in node.items()
            for ref in ([value] if key == "$ref" else refs(value))
        ]
    if isinstance(node, list):
        return [ref for value in node for ref in refs(value)]
    return []


def assert_refs_resolve(document: dict[str, Any], prefix: str) -> None:
    found = refs(document)
    assert found
    for ref in found:
        assert ref.startswith(prefix), ref
        node: Any = document
        for part in ref[2:].split("/"):
            key = part.replace("~1", "/").replace("~0", "~")
            assert isinstance(node, dict) and key in node, f"dangling $ref {ref}"
            node = node[key]


async def test_openapi_v2_for_the_aggregator(real_server: RealServer) -> None:
    validator = pytest.importorskip("openapi_spec_validator")
    downloader = real_server.client(OPENAPI_DOWNLOADER)
    reply = await downloader.get("/openapi/v2", ("Accept", JSON_TYPE))
    assert reply.status == 200 and reply.header("content-type") == JSON_TYPE
    document = reply.json()
    assert document["swagger"] == "2.0"
    assert document["info"] == {"title": "queuescope visibility API", "version": "v0.1.0"}
    assert_refs_resolve(document, "#/definitions/")
    for v in VERSIONS:
        for model in ("PendingWorkloadsSummary", "PendingWorkload"):
            assert f"io.k8s.kueue.visibility.{v}.{model}" in document["definitions"]
        assert f"io.queuescope.visibility.{v}.PendingWorkloadPosition" in document["definitions"]
        operation = document["paths"][f"/apis/{VIS}/{v}/clusterqueues/{{name}}/pendingworkloads"]
        assert operation["get"]["x-kubernetes-action"] == "get"
    validator.validate(document)
    etag = reply.header("etag")
    assert etag is not None
    not_modified, after = await downloader.exchange(
        get("/openapi/v2", ("If-None-Match", etag)), get("/healthz")
    )
    assert (not_modified.status, not_modified.body) == (304, b"")
    health_follows(after)


async def test_openapi_v3_root_and_documents(real_server: RealServer) -> None:
    validator = pytest.importorskip("openapi_spec_validator")
    downloader = real_server.client(OPENAPI_DOWNLOADER)
    root = await downloader.get("/openapi/v3")
    assert root.status == 200 and root.header("etag")
    paths = root.json()["paths"]
    assert list(root.json()) == ["paths"]
    assert list(paths) == [f"apis/{VIS}/v1beta1", f"apis/{VIS}/v1beta2"]
    for key, item in paths.items():
        url = item["serverRelativeURL"]
        path, _, query = url.partition("?")
        assert path == f"/openapi/v3/{key}"
        current, without, stale = await downloader.exchange(
            get(url), get(path), get(f"{path}?hash=ABC")
        )
        assert query == "hash=" + hashlib.sha512(current.body).hexdigest().upper()
        assert current.header("cache-control") == "public, immutable"
        assert current.header("expires") == email.utils.formatdate(NOW + 365 * 86400, usegmt=True)
        # [DIFF] a stale or missing hash: 200 with the current document, never a 301.
        for reply in (without, stale):
            assert reply.status == 200 and reply.body == current.body
            assert reply.header("cache-control") == "no-cache"
            assert reply.header("location") is None
        document = current.json()
        assert document["openapi"] == "3.0.0"
        assert all(f"/{key.rsplit('/', 1)[1]}/" in p for p in document["paths"])
        assert_refs_resolve(document, "#/components/schemas/")
        validator.validate(document)
        etag = current.header("etag")
        assert etag is not None
        not_modified, after = await downloader.exchange(
            get(url, ("If-None-Match", etag)), get("/healthz")
        )
        assert (not_modified.status, not_modified.body) == (304, b"")
        health_follows(after)


async def test_openapi_serves_json_only(real_server: RealServer) -> None:
    proto = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
    downloader = real_server.client(OPENAPI_DOWNLOADER)
    replies = await downloader.exchange(
        get("/openapi/v2", ("Accept", proto)),
        get("/openapi/v2", ("Accept", "application/yaml")),
        get("/openapi/v2", ("Accept", f"{proto},application/json")),
    )
    assert_status(replies[0], 406, NOT_ACCEPTABLE)
    assert_status(replies[1], 406, NOT_ACCEPTABLE)
    assert replies[2].json()["swagger"] == "2.0"


# -- docs/visibility-api.md#health-metrics-and-version health, metrics, version --------------------


async def test_health_endpoints(real_server: RealServer) -> None:
    anonymous = real_server.client(ANONYMOUS)
    replies = await anonymous.exchange(
        get("/healthz"),
        get("/livez"),
        get("/readyz"),
        get("/readyz?verbose"),
        get("/livez?verbose=1"),
        get("/healthz?verbose"),
        get("/readyz?exclude=informer-sync&exclude=nope&verbose"),
        get("/readyz/ping"),
        get("/healthz/informer-sync"),
    )
    for reply in replies:
        assert reply.status == 200
        assert reply.header("content-type") == TEXT_TYPE
        assert reply.header("x-content-type-options") == "nosniff"
    assert [r.body for r in replies[:3]] == [b"ok"] * 3
    assert replies[3].body == b"[+]ping ok\n[+]informer-sync ok\nreadyz check passed\n"
    assert replies[4].body == b"[+]ping ok\nlivez check passed\n"
    assert replies[5].body == b"[+]ping ok\n[+]informer-sync ok\nhealthz check passed\n"
    assert b"[+]informer-sync excluded: ok\n" in replies[6].body
    assert b'warn: some health checks cannot be excluded: no matches for "nope"\n' in (
        replies[6].body
    )
    assert replies[7].body == b"ok" and replies[8].body == b"ok"


async def test_metrics(real_server: RealServer) -> None:
    viewer = real_server.client(VIEWER)
    await viewer.exchange(get(cq("cq-a")), get(cq("nope")), get(lq("team-a", "lq-a", "v1beta1")))
    reply = await viewer.get("/metrics")
    assert reply.status == 200 and reply.header("content-type") == METRICS_TYPE
    text = reply.text
    assert 'code="200",endpoint="clusterqueue",version="v1beta2"' in text
    assert 'code="404",endpoint="clusterqueue",version="v1beta2"' in text
    assert 'code="200",endpoint="localqueue",version="v1beta1"' in text
    assert 'queuescope_visibility_request_duration_seconds_bucket{endpoint="clusterqueue"' in text
    assert "queuescope_visibility_requests_total{" in text
    # Prometheus scraping directly with a token reviewed by TokenReview.
    scraper = Identity("prometheus", headers=(("Authorization", f"Bearer {PROMETHEUS_TOKEN}"),))
    assert (await real_server.client(scraper).get("/metrics")).status == 200
    dave = await real_server.client(DAVE).get("/metrics")
    assert_status(dave, 403, forbidden_path("dave", "/metrics"))


async def test_version(real_server: RealServer) -> None:
    reply = await real_server.client(DAVE).get("/version")
    assert reply.status == 200 and reply.header("content-type") == JSON_TYPE
    assert reply.body == compact(VERSION_INFO)
    anonymous = await real_server.client(ANONYMOUS).get("/version")
    assert_status(anonymous, 403, forbidden_path("system:anonymous", "/version"))


# -- docs/visibility-api.md#pending-position [EXT] pendingposition ---------------------------------


@pytest.mark.parametrize("version", VERSIONS)
async def test_pending_position_exactly(real_server: RealServer, version: str) -> None:
    reply = await real_server.client(VIEWER).get(pos("team-a", "a-low", version))
    digest = SNAPSHOT.views["cq-a"].digest
    assert reply.body == compact(
        {
            "kind": "PendingWorkloadPosition",
            "apiVersion": f"{VIS}/{version}",
            "metadata": {
                "name": "a-low",
                "namespace": "team-a",
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "resourceVersion": digest,
            },
            "pending": True,
            "clusterQueueName": "cq-a",
            "localQueueName": "lq-a",
            "priority": 50,
            "positionInClusterQueue": 2,
            "positionInLocalQueue": 1,
            "pendingWorkloadsInClusterQueue": 4,
            "pendingWorkloadsInLocalQueue": 2,
        }
    )
    assert reply.header("etag") and reply.header("cache-control") == "private, no-cache"


async def test_positions_agree_with_the_summaries(real_server: RealServer) -> None:
    viewer = real_server.client(VIEWER)
    for cluster_queue, local_size in (("cq-a", 2), ("cq-d", 1), ("cq-jobs", 1)):
        items = (await viewer.get(cq(cluster_queue))).json()["items"]
        replies = await viewer.exchange(
            *(get(pos(i["metadata"]["namespace"], i["metadata"]["name"])) for i in items)
        )
        for item, reply in zip(items, replies, strict=True):
            body = reply.json()
            assert body["positionInClusterQueue"] == item["positionInClusterQueue"]
            assert body["positionInLocalQueue"] == item["positionInLocalQueue"]
            assert body["clusterQueueName"] == cluster_queue
            assert body["pendingWorkloadsInClusterQueue"] == len(items)
            assert body["pendingWorkloadsInLocalQueue"] == local_size
    last = (await viewer.get(pos("team-big", f"w{BIG - 1:05d}"))).json()
    assert (last["positionInClusterQueue"], last["positionInLocalQueue"]) == (BIG - 1, 2999)
    assert (last["pendingWorkloadsInClusterQueue"], last["pendingWorkloadsInLocalQueue"]) == (
        BIG,
        BIG // 2,
    )


async def test_pending_position_not_found_and_not_pending(real_server: RealServer) -> None:
    viewer = real_server.client(VIEWER)
    unknown, finished, ignored = await viewer.exchange(
        get(pos("team-a", "nope")),
        get(pos("team-a", "finished-job", "v1beta1")),
        get(pos("team-a", "a-low") + "?limit=abc&offset=x"),
    )
    assert_status(unknown, 404, not_found("workload", "nope"))
    assert finished.body == compact(
        {
            "kind": "PendingWorkloadPosition",
            "apiVersion": f"{VIS}/v1beta1",
            "metadata": {
                "name": "finished-job",
                "namespace": "team-a",
                "creationTimestamp": "2026-01-01T00:00:00Z",
            },
            "pending": False,
            "reason": "Finished",
            "clusterQueueName": "cq-a",
            "localQueueName": "lq-a",
        }
    )
    assert finished.header("etag") is None  # classified from the cache: no snapshot identity
    assert ignored.status == 200  # paging parameters do not apply


async def test_pending_position_authorization(real_server: RealServer) -> None:
    alice, dave = real_server.client(ALICE), real_server.client(DAVE)
    own, other = await alice.exchange(get(pos("team-a", "a-low")), get(pos("team-b", "y")))
    assert own.status == 200
    assert_status(
        other, 403, forbidden_resource("alice", "workloads", "pendingposition", "y", "team-b")
    )
    assert (await dave.get(pos("team-a", "a-low"))).status == 403


# -- docs/visibility-api.md#long-poll [EXT] long-poll ----------------------------------------------


async def _until(predicate: Any) -> None:
    for _ in range(1000):  # bounded: 10 s at most
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never became true")


_GENERATIONS = itertools.count(SNAPSHOT.generation + 1)


def _changed_snapshot(**changes: list[Any]) -> Snapshot:
    """The contract snapshot with some ClusterQueues' entries replaced."""
    views = {name: list(view.entries) for name, view in SNAPSHOT.views.items()}
    # Every publish has a new generation, as the runtime's publisher numbers them.
    return make_snapshot(
        {**views, **changes}, dict(SNAPSHOT.local_queues), generation=next(_GENERATIONS)
    )


async def test_long_poll() -> None:
    async with serve() as server:
        viewer = server.client(VIEWER)
        current = await viewer.get(cq("cq-a"))
        etag = current.header("etag")
        assert etag is not None
        changed, no_condition, bad = await viewer.exchange(
            get(cq("cq-a") + "?waitSeconds=50", ("If-None-Match", '"old"')),  # at once
            get(cq("cq-a") + "?waitSeconds=50"),  # nothing to wait for
            get(cq("cq-a") + "?waitSeconds=1.5", ("If-None-Match", etag)),
        )
        assert changed.status == 200 and no_condition.status == 200
        assert_status(bad, 400, bad_request("waitSeconds", "1.5"))
        assert server.notifier.waits == 0
        # Unchanged for the whole wait (clamped up to 1 s): 304.
        timed_out = await viewer.get(cq("cq-a") + "?waitSeconds=0", ("If-None-Match", etag))
        assert (timed_out.status, timed_out.body) == (304, b"")
        assert timed_out.header("etag") == etag
        assert timed_out.header("cache-control") == "private, no-cache"

        # Held until a publish changes *this* view's digest.
        started = server.notifier.waits
        waiter = asyncio.ensure_future(
            viewer.get(cq("cq-a") + "?waitSeconds=30", ("If-None-Match", etag))
        )
        await _until(lambda: server.notifier.waits == started + 1)  # it is waiting
        assert server.visibility.waiters == 1
        assert server.visibility.inflight == 0  # a waiter holds no in-flight slot
        # A publish that leaves cq-a alone: the waiter goes back to sleep.
        server.holder.current = _changed_snapshot(**{"cq-d": worked_example()[:1]})
        server.notifier.publish()
        await _until(lambda: server.notifier.waits == started + 2)
        assert not waiter.done()
        # One that changes it: answered with the new page.
        server.holder.current = _changed_snapshot(**{"cq-a": worked_example()[:3]})
        server.notifier.publish()
        reply = await waiter
        assert reply.status == 200 and reply.header("etag") != etag
        assert [i["metadata"]["name"] for i in reply.json()["items"]] == [
            "a-high",
            "b-high",
            "a-low",
        ]
        assert server.notifier.unwoken == 1  # only the deliberate 304 above timed out
        assert server.visibility.waiters == 0 and server.visibility.inflight == 0


async def test_a_long_poll_client_that_leaves_frees_its_slot() -> None:
    async with serve() as server:
        viewer = server.client(VIEWER)
        etag = (await viewer.get(cq("cq-a"))).header("etag")
        assert etag is not None
        connection = viewer.connection()

        def send_and_leave_unread() -> None:
            connection.putrequest("GET", cq("cq-a") + "?waitSeconds=50")
            for name, value in (*VIEWER.headers, ("If-None-Match", etag)):
                connection.putheader(name, value)
            connection.endheaders()

        await in_thread(send_and_leave_unread)
        try:
            await _until(lambda: server.visibility.waiters == 1)
        finally:
            await in_thread(connection.close)
        await _until(lambda: server.visibility.waiters == 0)
        assert server.visibility.inflight == 0
        assert (await viewer.get("/healthz")).status == 200


async def test_a_publish_just_before_the_wait_starts_is_not_lost() -> None:
    async with serve() as server:
        viewer = server.client(VIEWER)
        etag = (await viewer.get(cq("cq-a"))).header("etag")
        assert etag is not None
        newer = _changed_snapshot(**{"cq-a": worked_example()[:2]})
        reads = 0

        def publish() -> None:
            server.holder.current = newer
            server.notifier.publish()

        def publish_after_the_etag_check() -> None:
            # The request's first read is its ETag check; the publish lands right after
            # it, before the wait has started, as when the publisher's task is ready in
            # the same loop turn.
            nonlocal reads
            reads += 1
            if reads == 1:
                asyncio.get_running_loop().call_soon(publish)

        server.holder.on_read = publish_after_the_etag_check
        reply = await viewer.get(cq("cq-a") + "?waitSeconds=1", ("If-None-Match", etag))
        assert reads >= 2 and reply.status == 200  # answered with the new page ...
        assert len(reply.json()["items"]) == 2
        # ... woken by the publish, not by the end of the wait.
        assert server.notifier.unwoken == 0


async def test_waiters_beyond_the_cap_get_429() -> None:
    async with serve(max_waiters=0) as server:
        viewer = server.client(VIEWER)
        etag = (await viewer.get(cq("cq-a"))).header("etag")
        assert etag is not None
        reply = await viewer.get(cq("cq-a") + "?waitSeconds=5", ("If-None-Match", etag))
        assert_status(reply, 429, TOO_MANY)
        assert reply.header("retry-after") == "1"
        assert server.visibility.inflight == 0


# -- identities: the aggregator, certificate users, tokens, anonymous -------------------


async def test_alice_through_the_aggregator(real_server: RealServer) -> None:
    alice = real_server.client(ALICE)
    own, other_namespace, cluster, position = await alice.exchange(
        get(lq("team-a", "lq-a")),
        get(lq("team-b", "default")),
        get(cq("cq-a")),
        get(pos("team-a", "a-high")),
    )
    assert own.status == 200
    assert positions(own.json()) == [("a-high", 0, 0), ("a-low", 2, 1)]
    assert_status(
        other_namespace,
        403,
        forbidden_resource("alice", "localqueues", "pendingworkloads", "default", "team-b"),
    )
    assert_status(
        cluster, 403, forbidden_resource("alice", "clusterqueues", "pendingworkloads", "cq-a")
    )
    assert position.status == 200
    assert "content-encoding" not in own.header_names  # Accept-Encoding: gzip is not honoured


async def test_groups_come_from_repeated_header_lines(real_server: RealServer) -> None:
    """`queue-viewers` grants the ClusterQueue; it counts only as its own header line."""
    second_line = aggregator("erin", ["team-z", "queue-viewers"])
    first_only = aggregator("erin", ["team-z"])
    comma_joined = aggregator("erin", ["team-z,queue-viewers"])
    assert (await real_server.client(second_line).get(cq("cq-a"))).status == 200
    for identity in (first_only, comma_joined):
        reply = await real_server.client(identity).get(cq("cq-a"))
        assert_status(
            reply, 403, forbidden_resource("erin", "clusterqueues", "pendingworkloads", "cq-a")
        )
    who = await real_server.whoami(second_line)
    assert who.groups == ("team-z", "queue-viewers", "system:authenticated")
    who = await real_server.whoami(comma_joined)
    assert who.groups == ("team-z,queue-viewers", "system:authenticated")
    who = await real_server.whoami(aggregator("erin", ["", "g"]))
    assert who.groups == ("g", "system:authenticated")  # empty lines are skipped


async def test_extras_uid_and_system_masters_from_the_aggregator(real_server: RealServer) -> None:
    identity = aggregator(
        "frank",
        ["system:authenticated"],
        [
            ("Authentication.kubernetes.io%2Fpod-name", "pod-1"),
            ("authentication.kubernetes.io%2Fpod-name", "pod-2"),
            ("Scopes", "view"),
            ("bad%zzkey", "x"),
        ],
        uid="u-123",
    )
    who = await real_server.whoami(identity)
    assert who.name == "frank" and who.uid == "u-123"
    assert who.groups == ("system:authenticated",)  # not appended twice
    assert dict(who.extra) == {
        "authentication.kubernetes.io/pod-name": ("pod-1", "pod-2"),
        "scopes": ("view",),
        "bad%zzkey": ("x",),
    }
    masters = await real_server.client(PROBE).exchange(get(cq("cq-a")), get("/metrics"))
    assert [r.status for r in masters] == [200, 200]
    # An identity kube-apiserver forwards as unauthenticated stays unauthenticated.
    anonymous = aggregator("system:anonymous", ["system:unauthenticated"])
    who = await real_server.whoami(anonymous)
    assert who.groups == ("system:unauthenticated",)
    version, apis = await real_server.client(anonymous).exchange(get("/version"), get("/apis"))
    assert_status(version, 403, forbidden_path("system:anonymous", "/version"))
    assert apis.status == 403  # no authenticated short-cut for anonymous
    guest = await real_server.whoami(aggregator("guest", ["system:unauthenticated"]))
    assert guest.groups == ("system:unauthenticated",)  # not made authenticated


async def test_one_aggregator_connection_carries_many_users(real_server: RealServer) -> None:
    """kube-apiserver keeps one connection and sends every user's requests on it: the
    certificate is per connection, the identity per request."""
    client = real_server.client(
        Identity("front-proxy", FRONT_PROXY_CERT, (), ALICE.server_hostname)
    )

    def as_user(identity: Identity, path: str) -> Request:
        return Request("GET", path, identity.headers)

    replies = await client.exchange(
        as_user(ALICE, cq("cq-a")),
        as_user(VIEWER, cq("cq-a")),
        as_user(ALICE, lq("team-a", "lq-a")),
        as_user(PROBE, "/apis"),
        as_user(LEGACY_FALLBACK, V2),
        as_user(OPENAPI_DOWNLOADER, "/openapi/v2"),
        as_user(ALICE, cq("cq-a")),
    )
    assert [r.status for r in replies] == [403, 200, 200, 200, 200, 200, 403]
    assert all(not r.will_close for r in replies)


async def test_the_aggregator_negotiates_http_1_1(real_server: RealServer) -> None:
    client = real_server.client(ALICE)

    def alpn() -> str | None:
        connection = client.connection()
        try:
            connection.connect()
            return connection.sock.selected_alpn_protocol()
        finally:
            connection.close()

    assert await in_thread(alpn) == "http/1.1"


async def test_a_front_proxy_certificate_with_a_cn_not_allowed_is_401(
    real_server: RealServer,
) -> None:
    wrong = aggregator("kubernetes-admin", ["system:masters"], cert=WRONG_PROXY_CERT)
    for path in (cq("cq-a"), "/apis", "/healthz"):
        assert_status(await real_server.client(wrong).get(path), 401, UNAUTHORIZED)


async def test_a_401_is_logged_with_its_reason_once(caplog: pytest.LogCaptureFixture) -> None:
    """The caller reads "Unauthorized"; the operator reads why in the log: the CN seen and
    the allowed list, with the kube-apiserver request's Audit-ID, once for a reason that
    repeats (docs/operations.md#why-a-request-is-401). A server of its own, so that no
    other test's 401 of the same reason came first."""
    wrong = aggregator("kubernetes-admin", ["system:masters"], cert=WRONG_PROXY_CERT)
    async with serve() as server:
        with caplog.at_level("WARNING", logger="visibility_server.http.app_state"):
            for path in (cq("cq-a"), "/apis", "/healthz"):
                assert_status(await server.client(wrong).get(path), 401, UNAUTHORIZED)
    [line] = [record.getMessage() for record in caplog.records]
    # Both authenticators' reasons, as Go's union authenticator joins them.
    assert re.fullmatch(
        "unable to authenticate the request: x509: subject with cn=not-the-front-proxy is "
        "not in the allowed list \\(requestheader-allowed-names: front-proxy-client\\); "
        'verifying certificate SN=[0-9]+, subject="CN=not-the-front-proxy" failed: x509: '
        "certificate signed by unknown authority "
        f"\\(client=127\\.0\\.0\\.1:[0-9]+ audit_id={AUDIT_ID}\\)",
        line,
    ), line


async def test_a_front_proxy_certificate_without_a_user_is_401(real_server: RealServer) -> None:
    nameless = Identity("proxy", FRONT_PROXY_CERT, (("X-Remote-Group", "system:masters"),))
    assert_status(await real_server.client(nameless).get("/apis"), 401, UNAUTHORIZED)
    # Go's Header.Get: only the first X-Remote-User line counts, and it is empty.
    empty_first = Identity(
        "proxy", FRONT_PROXY_CERT, (("X-Remote-User", ""), ("X-Remote-User", "admin"))
    )
    assert_status(await real_server.client(empty_first).get("/healthz"), 401, UNAUTHORIZED)


async def test_forged_front_proxy_headers_without_the_certificate(
    real_server: RealServer,
) -> None:
    headers = aggregator("kubernetes-admin", ["system:masters", "queue-viewers"]).headers
    forged = Identity("forged", None, headers)
    client = real_server.client(forged)
    data, metrics, health = await client.exchange(get(cq("cq-a")), get("/metrics"), get("/healthz"))
    assert_status(
        data,
        403,
        forbidden_resource("system:anonymous", "clusterqueues", "pendingworkloads", "cq-a"),
    )
    assert_status(metrics, 403, forbidden_path("system:anonymous", "/metrics"))
    assert (health.status, health.body) == OK_HEALTH
    who = await real_server.whoami(forged)
    assert (who.name, who.groups) == ("system:anonymous", ("system:unauthenticated",))
    # With a client certificate, the forged headers are ignored too: the certificate wins.
    dave = DAVE.with_headers(
        ("X-Remote-User", "kubernetes-admin"), ("X-Remote-Group", "system:masters")
    )
    assert (await real_server.client(dave).get(cq("cq-a"))).status == 403
    who = await real_server.whoami(dave)
    assert (who.name, who.groups) == ("dave", ("team-z", "system:authenticated"))


@pytest.mark.parametrize(
    ("identity", "path"),
    [
        (ADMIN.with_headers(("Impersonate-User", "alice")), cq("cq-a")),
        (ALICE.with_headers(("Impersonate-Group", "system:masters")), lq("team-a", "lq-a")),
        (DAVE.with_headers(("Impersonate-Extra-Scopes", "x")), "/apis"),
        (ANONYMOUS.with_headers(("impersonate-uid", "1")), "/healthz"),
    ],
    ids=["admin-user", "aggregator-group", "cert-extra", "anonymous-uid"],
)
async def test_impersonation_is_403(real_server: RealServer, identity: Identity, path: str) -> None:
    reply = await real_server.client(identity).get(path)
    assert_status(reply, 403, IMPERSONATION)


async def test_client_certificate_users(real_server: RealServer) -> None:
    admin = real_server.client(ADMIN)
    replies = await admin.exchange(*map(get, KNOWN_PATHS))
    assert {r.status for r in replies} == {200}
    who = await real_server.whoami(ADMIN)
    assert (who.name, who.groups) == (
        "kubernetes-admin",
        ("system:masters", "system:authenticated"),
    )
    assert list(who.extra) == ["authentication.kubernetes.io/credential-id"]
    carol = await real_server.client(CAROL).exchange(get(cq("cq-a")), get("/metrics"))
    assert [r.status for r in carol] == [200, 200]
    dave = real_server.client(DAVE)
    data, apis, version, openapi = await dave.exchange(
        get(cq("cq-a")), get("/apis"), get("/version"), get("/openapi/v3")
    )
    assert_status(
        data, 403, forbidden_resource("dave", "clusterqueues", "pendingworkloads", "cq-a")
    )
    assert [apis.status, version.status, openapi.status] == [200, 200, 200]  # short-cut


async def test_bearer_tokens_from_direct_callers(real_server: RealServer) -> None:
    def bearer(token: str) -> Identity:
        return Identity("token", headers=(("Authorization", f"Bearer {token}"),))

    who = await real_server.whoami(bearer(PROMETHEUS_TOKEN), "/metrics")
    assert who.name == PROMETHEUS_USER
    assert_status(
        await real_server.client(bearer("not-a-token")).get("/healthz"), 401, UNAUTHORIZED
    )
    unavailable = await real_server.client(bearer(UNAVAILABLE_TOKEN)).get(cq("cq-a"))
    assert_status(
        unavailable,
        503,
        status_body(
            "authentication is temporarily unavailable: token review timed out",
            "ServiceUnavailable",
            503,
            {"retryAfterSeconds": 1},
        ),
    )
    assert unavailable.header("retry-after") == "1"
    # A client certificate wins over a token (the chain's order): no review at all.
    admin = ADMIN.with_headers(("Authorization", "Bearer not-a-token"))
    assert (await real_server.client(admin).get(cq("cq-a"))).status == 200


async def test_anonymous(real_server: RealServer) -> None:
    anonymous = real_server.client(ANONYMOUS)
    replies = await anonymous.exchange(
        get("/healthz"), get("/livez"), get("/readyz"), get("/apis"), get(cq("cq-a"))
    )
    assert [(r.status, r.body) for r in replies[:3]] == [OK_HEALTH] * 3
    assert_status(replies[3], 403, forbidden_path("system:anonymous", "/apis"))
    assert replies[4].status == 403
    who = await real_server.whoami(ANONYMOUS)
    assert who.name == "system:anonymous"


async def test_a_certificate_from_an_unknown_ca_fails_the_handshake(
    real_server: RealServer,
) -> None:
    client = real_server.client(certificate_user(MALLORY_CERT, "mallory"))
    with pytest.raises(Exception) as caught:  # which one depends on the TLS version
        await client.get("/healthz")
    assert refused(caught.value), repr(caught.value)
