"""Fuzzing the real server over TLS: paths, query strings and headers, as the admin (client
certificate), as anonymous (who also forges X-Remote-* headers) and through the aggregator.

Whatever arrives, the server (synced, healthy) must answer:

* never a 5xx, never a 3xx other than a 304 to a conditional request, never `Location`;
* every error as a `Status` (JSON, or YAML when the caller negotiated YAML), with
  `X-Content-Type-Options: nosniff` and the HTTP code in `code`;
* a HEAD or a 304 without a body, and a connection that stays usable afterwards (a
  follow-up request on it parses cleanly), or that the server closed after a complete
  response;
* forged front-proxy headers never lift an anonymous caller above the health paths.

Requests are what a real HTTP client can put on the wire: `http.client` refuses control
characters in the target and in header values, and so do Go clients, so unicode reaches
the server percent-encoded and header values stay within RFC 9110's field-value bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.integration.realserver import (
    ADMIN,
    ANONYMOUS,
    PROMETHEUS_TOKEN,
    V1,
    V2,
    VIS,
    G,
    Identity,
    RealServer,
    Reply,
    Request,
    aggregator,
    get,
    in_thread,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

FUZZ_SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# -- paths -----------------------------------------------------------------------------

NAMES = [
    "apis",
    VIS,
    "v1beta2",
    "v1beta1",
    "v1",
    "clusterqueues",
    "localqueues",
    "workloads",
    "namespaces",
    "team-a",
    "team-b",
    "cq-a",
    "cq-d",
    "cq-jobs",
    "cq-empty",
    "lq-a",
    "lq-b",
    "lq-orphan",
    "default",
    "a-low",
    "finished-job",
    "pendingworkloads",
    "pendingposition",
    "openapi",
    "v2",
    "v3",
    "healthz",
    "readyz",
    "livez",
    "ping",
    "informer-sync",
    "metrics",
    "version",
    "watch",
    "status",
]
ODD_SEGMENTS = [
    "",
    ".",
    "..",
    "...",
    "%2E%2E",
    "%2F",
    "%2f..%2f",
    "%00",
    "%0A",
    "%",
    "%Z",
    "%ZZ",
    "%C3%28",  # invalid UTF-8
    "%FF%FE",
    "%25",
    "%3F",
    "%23",
    "~",
    "!$&'()*+,;=:@",
    "cq%2Da",
    "%E2%80%AE",  # right-to-left override
]
PCHARS = st.text(alphabet=st.sampled_from("abcXYZ019-._~!$&'()*+,;=:@%"), min_size=0, max_size=30)
SEGMENTS = st.one_of(
    st.sampled_from(NAMES),
    st.sampled_from(ODD_SEGMENTS),
    PCHARS,
    st.text(max_size=20).map(lambda s: quote(s, safe="")),  # unicode, percent-encoded
    st.integers(min_value=250, max_value=6000).map(lambda n: "n" * n),  # very long
)
BASES = [
    "",
    "/apis",
    G,
    V2,
    V1,
    f"{V2}/clusterqueues",
    f"{V1}/namespaces/team-a/localqueues",
    f"{V2}/namespaces/team-a/workloads",
    f"/openapi/v3/apis/{VIS}",
    "/healthz",
    "/readyz",
    "/livez",
]
VALID_PATHS = [
    "/apis",
    G,
    V2,
    f"{V1}/",
    f"{V2}/clusterqueues/cq-a/pendingworkloads",
    f"{V1}/clusterqueues/cq-empty/pendingworkloads",
    f"{V2}/namespaces/team-a/localqueues/lq-a/pendingworkloads",
    f"{V2}/namespaces/team-a/localqueues/lq-orphan/pendingworkloads",
    f"{V2}/namespaces/team-b/localqueues/default/pendingworkloads",
    f"{V2}/namespaces/team-a/workloads/a-low/pendingposition",
    f"{V1}/namespaces/team-a/workloads/finished-job/pendingposition",
    "/openapi/v2",
    "/openapi/v3",
    f"/openapi/v3/apis/{VIS}/v1beta2",
    "/healthz",
    "/readyz/informer-sync",
    "/metrics",
    "/version",
]
# Weighted towards the real paths, where queries and headers are read at all.
PATHS = st.one_of(
    st.sampled_from(VALID_PATHS),
    st.sampled_from(VALID_PATHS),
    st.sampled_from(VALID_PATHS),
    st.tuples(st.sampled_from(BASES), st.lists(SEGMENTS, min_size=1, max_size=6)).map(
        lambda t: t[0] + "/" + "/".join(t[1])
    ),
    st.lists(SEGMENTS, max_size=8).map(lambda parts: "/" + "/".join(parts)),
)

# -- query strings ---------------------------------------------------------------------

KEYS = st.sampled_from(
    [
        "offset",
        "limit",
        "pretty",
        "waitSeconds",
        "includeObject",
        "hash",
        "verbose",
        "exclude",
        "watch",
        "resourceVersion",
        "continue",
        "%6Cimit",  # `limit` once decoded
        "limit%00",
        "",
        "x",
    ]
)
VALUES = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.integers(min_value=-(2**70), max_value=2**70).map(lambda n: f"+{n}" if n >= 0 else str(n)),
    st.sampled_from(
        [
            "",
            "+",
            "-",
            "+-1",
            "--1",
            "0x10",
            "1e3",
            "1.5",
            "1_000",
            "%201",
            "%2B5",
            "%2D5",
            "%",
            "%ZZ",
            "%D9%A1",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "-9223372036854775809",
            "true",
            "True",
            "None",
            "Object",
            "Metadata",
            "ping",
            "informer-sync",
        ]
    ),
    st.text(max_size=12).map(lambda s: quote(s, safe="+")),
)
PAIRS = st.lists(
    st.tuples(KEYS, VALUES, st.booleans()),  # the boolean: `key=value`, or a bare `key`
    max_size=6,
)


def query_string(pairs: list[tuple[str, str, bool]]) -> str:
    parts = [f"{k}={v}" if with_value else k for k, v, with_value in pairs]
    return ("?" + "&".join(parts)) if parts else ""


# -- headers ---------------------------------------------------------------------------

# RFC 9110 field-value bytes: visible ASCII, SP, HTAB and obs-text (sent as latin-1).
FIELD_TEXT = st.text(
    alphabet=st.characters(
        min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f", include_characters="\t"
    ),
    max_size=60,
)
ACCEPTS = st.one_of(
    st.sampled_from(
        [
            "application/json",
            "application/yaml",
            "application/json, */*",
            "application/json;as=Table;v=v1;g=meta.k8s.io",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList",
            "application/vnd.kubernetes.protobuf",
            "application/vnd.kubernetes.protobuf, application/yaml",
            "*/*;q=0",
            "application/json;q=2",
            "application/json;q=abc",
            "application/yaml;q=0.1, application/json;q=0.0001",
            'application/json;x="a,b"',
            "text/html",
            "*",
            ";;;",
            ",",
            "application/",
            "/json",
        ]
    ),
    FIELD_TEXT,
)
IF_NONE_MATCH = st.one_of(
    st.just("*"),  # matches every ETag: 304s
    st.sampled_from(
        ["*", '"x"', 'W/"x"', '"a", "b"', "", '"', "W/", '""', "*, *", '"0000000000000000"']
    ),
    FIELD_TEXT,
)
USER_AGENTS = st.one_of(
    st.sampled_from(["curl/8.5.0", "Wget/1.21", "Mozilla/5.0", "kubectl/v1.32.0", ""]),
    FIELD_TEXT,
)
AUTHORIZATION = st.one_of(
    st.sampled_from(
        [
            "Bearer",
            "Bearer ",
            "Bearer  x",
            "bearer abc",
            "BEARER abc def",
            "Basic Zm9vOmJhcg==",
            f"Bearer {PROMETHEUS_TOKEN}x",
        ]
    ),
    FIELD_TEXT.map(lambda s: f"Bearer {s}"),
    FIELD_TEXT,
)
REMOTE_NAMES = st.sampled_from(
    [
        "X-Remote-User",
        "x-remote-user",
        "X-Remote-Group",
        "X-Remote-Uid",
        "X-Remote-Extra-Scopes",
        "X-Remote-Extra-a%2Fb",
        "X-Remote-Extra-%zz",
        "X-Remote-Extra-",
    ]
)
REMOTE_VALUES = st.one_of(
    st.sampled_from(["kubernetes-admin", "system:masters", "queue-viewers", "alice", ""]),
    FIELD_TEXT,
)
HEADER = st.one_of(
    st.tuples(st.just("Accept"), ACCEPTS),
    st.tuples(st.just("Accept"), ACCEPTS),
    st.tuples(st.just("If-None-Match"), IF_NONE_MATCH),
    st.tuples(st.just("If-None-Match"), IF_NONE_MATCH),
    st.tuples(st.just("User-Agent"), USER_AGENTS),
    st.tuples(st.just("Authorization"), AUTHORIZATION),
    st.tuples(REMOTE_NAMES, REMOTE_VALUES),
    st.tuples(st.sampled_from(["Accept-Encoding", "Audit-ID", "X-Forwarded-For"]), FIELD_TEXT),
)
IMPERSONATION = st.tuples(
    st.sampled_from(["Impersonate-User", "impersonate-group", "Impersonate-Extra-x"]), FIELD_TEXT
)
# Impersonation ends every request at 403: one request in ten carries it.
HEADERS = st.tuples(
    st.lists(HEADER, max_size=4),
    st.one_of(*[st.just([])] * 9, st.lists(IMPERSONATION, min_size=1, max_size=1)),
).map(lambda parts: parts[0] + parts[1])
METHODS = st.sampled_from(
    ["GET"] * 5 + ["HEAD"] * 2 + ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
)
BODIES = st.one_of(st.none(), st.binary(max_size=64))


@dataclass(frozen=True)
class Case:
    method: str
    path: str
    query: list[tuple[str, str, bool]]
    headers: list[tuple[str, str]]
    body: bytes | None

    def request(self) -> Request:
        headers = self.headers
        if any(k == "waitSeconds" for k, _, _ in self.query):
            # A matching If-None-Match (`*` matches everything) would make a valid
            # `waitSeconds` a long-poll of up to 50 s on a queue that never changes;
            # the long-poll has its own tests.
            headers = [(k, v) for k, v in headers if k.lower() != "if-none-match"]
        body = self.body if self.method in ("POST", "PUT", "PATCH") else None
        return Request(self.method, self.path + query_string(self.query), tuple(headers), body)


CASES = st.builds(Case, METHODS, PATHS, PAIRS, HEADERS, BODIES)

# -- the checks ------------------------------------------------------------------------

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    429: "TooManyRequests",
}
HEALTH = ("/healthz", "/livez", "/readyz")


def check_status_body(request: Request, reply: Reply) -> None:
    content_type = reply.header("content-type")
    assert reply.header("x-content-type-options") == "nosniff"
    if request.method == "HEAD":
        assert reply.body == b""
        return
    assert reply.header("content-length") == str(len(reply.body))
    if content_type == "application/yaml":
        accepts = " ".join(v for k, v in request.headers if k.lower() == "accept")
        assert "yaml" in accepts.lower(), "YAML only when negotiated"
        status: Any = yaml.safe_load(reply.body)
    else:
        assert content_type == "application/json", content_type
        status = json.loads(reply.body)
        pretty = reply.body.startswith(b"{\n")
        assert reply.body.endswith(b"}") if pretty else reply.body.endswith(b"}\n")
    assert isinstance(status, dict)
    assert status["kind"] == "Status" and status["apiVersion"] == "v1"
    assert status["metadata"] == {} and status["status"] == "Failure"
    assert status["code"] == reply.status
    assert status["reason"] == REASONS[reply.status]
    assert isinstance(status["message"], str) and status["message"]


def check(identity: Identity, request: Request, reply: Reply, follow_up: Reply | None) -> None:
    context = (identity.label, request, reply.status, reply.body[:300])
    event(f"{request.method} -> {reply.status}")  # --hypothesis-show-statistics
    assert reply.status < 500, context
    assert reply.header("location") is None, context
    if 300 <= reply.status < 400:
        assert reply.status == 304, context
        assert any(k.lower() == "if-none-match" for k, _ in request.headers), context
        assert reply.body == b"" and reply.header("content-type") is None, context
    elif reply.status >= 400:
        check_status_body(request, reply)
    if request.method == "HEAD":
        assert reply.body == b"", context
    if identity is ANONYMOUS:
        path = request.path.partition("?")[0]
        if reply.status in (200, 304):
            assert path.startswith(HEALTH), context  # forged X-Remote-* never count
        if reply.status == 401:
            assert any(k.lower() == "authorization" for k, _ in request.headers), context
    if follow_up is not None:
        assert (follow_up.status, follow_up.body) == (200, b"ok"), (context, follow_up)


def exchange(
    server: RealServer, identity: Identity, request: Request
) -> tuple[Reply, Reply | None]:
    """The request, then `GET /healthz` on the same connection unless the server closed it
    (after a complete response: http.client read its whole framed body)."""
    client = server.client(identity)
    connection = client.connection()
    try:
        reply = connection.send_request(request, identity.headers)
        if reply.will_close:
            return reply, None
        return reply, connection.send_request(get("/healthz"), identity.headers)
    finally:
        connection.close()


async def fuzz_one(server: RealServer, identity: Identity, case: Case) -> None:
    request = case.request()
    reply, follow_up = await in_thread(lambda: exchange(server, identity, request))
    check(identity, request, reply, follow_up)


# The aggregator, with the proxy certificate: its own X-Remote-* lines come first, the
# fuzzed ones (possibly more X-Remote-* lines) after them.
AGGREGATOR = aggregator("viewer", ["queue-viewers", "system:authenticated"])


@FUZZ_SETTINGS
@given(case=CASES)
async def test_fuzz_as_the_admin(real_server: RealServer, case: Case) -> None:
    await fuzz_one(real_server, ADMIN, case)


@FUZZ_SETTINGS
@given(case=CASES)
async def test_fuzz_as_anonymous(real_server: RealServer, case: Case) -> None:
    await fuzz_one(real_server, ANONYMOUS, case)


@settings(FUZZ_SETTINGS, max_examples=200)
@given(case=CASES)
async def test_fuzz_through_the_aggregator(real_server: RealServer, case: Case) -> None:
    await fuzz_one(real_server, AGGREGATOR, case)


async def test_the_fuzzed_server_is_still_healthy(real_server: RealServer) -> None:
    """After everything above: no request left behind, every slot given back."""
    assert real_server.visibility.inflight == 0
    assert real_server.visibility.waiters == 0
    reply = await real_server.client(ADMIN).get(f"{V2}/clusterqueues/cq-a/pendingworkloads")
    assert reply.status == 200
