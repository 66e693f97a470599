"""The path table (docs/visibility-api.md#paths-served): no 3xx ever, 404 for everything else,
parents without verbs."""

from __future__ import annotations

import pytest

from tests.unit.visibility_server.http.support import (
    ADMIN,
    ADMIN_RAW,
    V2,
    G,
    app_for,
    call_raw,
    client,
    get,
)
from visibility_server.http.credentials import bearer_token, request_credentials

PROBES = [
    "/",
    "//",
    "/apis",
    "/apis/",
    "/apis//",
    G,
    f"{G}/",
    V2,
    f"{V2}/",
    f"{V2}//",
    f"{V2}/clusterqueues",
    f"{V2}/clusterqueues/",
    f"{V2}/clusterqueues/cq-a",
    f"{V2}/clusterqueues/cq-a/",
    f"{V2}/clusterqueues/cq-a/pendingworkloads",
    f"{V2}/clusterqueues/cq-a/pendingworkloads/",
    f"{V2}/clusterqueues/cq-a/pendingworkloads/extra",
    f"{V2}/clusterqueues/cq-a/status",
    f"{V2}/namespaces/team-a/clusterqueues/cq-a/pendingworkloads",
    f"{V2}/namespaces/team-a",
    f"{V2}/namespaces/team-a/localqueues",
    f"{V2}/namespaces/team-a/localqueues/lq-a",
    f"{V2}/namespaces/team-a/localqueues/lq-a/",
    f"{V2}/namespaces/team-a/localqueues/lq-a/pendingworkloads",
    f"{V2}/namespaces/team-a/localqueues/lq-a/pendingworkloads/",
    f"{V2}/localqueues/lq-a/pendingworkloads",
    f"{V2}/namespaces/team-a/workloads",
    f"{V2}/namespaces/team-a/workloads/a-low",
    f"{V2}/namespaces/team-a/workloads/a-low/pendingposition",
    f"{V2}/namespaces/team-a/workloads/a-low/pendingposition/",
    f"{V2}/workloads/a-low/pendingposition",
    f"{V2}/watch/clusterqueues/cq-a",
    f"{G}/v1/clusterqueues/cq-a/pendingworkloads",
    "/api",
    "/api/",
    "/api/v1",
    "/openapi",
    "/openapi/",
    "/openapi/v2",
    "/openapi/v2/",
    "/openapi/v3",
    "/openapi/v3/",
    f"/openapi/v3/apis/{G[6:]}/v1beta2",
    f"/openapi/v3/apis/{G[6:]}/v1beta2/",
    "/healthz",
    "/healthz/",
    "/healthz/ping",
    "/healthz/ping/",
    "/livez/nope",
    "/readyz",
    "/metrics",
    "/metrics/",
    "/version",
    "/version/",
    "/docs",
    "/redoc",
    "/openapi.json",
    "/static/x",
    "/dashboard",
    "/index.html",
]


@pytest.mark.parametrize("method", ["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"])
async def test_no_3xx_anywhere(method: str) -> None:
    app = app_for()
    async with client(app) as c:
        for path in PROBES:
            for query in ("", "?pretty=1", "?hash=X"):
                r = await c.request(method, path + query, headers=ADMIN)
                assert not 300 <= r.status_code < 400, (method, path, r.status_code)
                assert "location" not in r.headers


@pytest.mark.parametrize(
    "path",
    [
        f"{V2}/clusterqueues",
        f"{V2}/clusterqueues/cq-a",
        f"{V2}/namespaces/team-a/localqueues/lq-a",
        f"{V2}/namespaces/team-a/clusterqueues/cq-a/pendingworkloads",
        f"{V2}/namespaces/team-a/workloads/a-low",
        f"{V2}/namespaces/team-a/workloads",
    ],
)
async def test_parents_without_verbs_are_404(path: str) -> None:
    r = await get(app_for(), path)
    assert r.status_code == 404
    assert r.json()["message"] == "the server could not find the requested resource"


async def test_names_are_percent_decoded_and_not_validated() -> None:
    app = app_for()
    assert (await get(app, f"{V2}/clusterqueues/cq%2Da/pendingworkloads")).status_code == 200
    r = await get(app, f"{V2}/clusterqueues/NOT_A_DNS_NAME%21/pendingworkloads")
    assert r.status_code == 404
    assert r.json()["details"]["name"] == "NOT_A_DNS_NAME!"
    # An encoded slash separates segments, as in the authorization attributes.
    assert (await get(app, f"{V2}/clusterqueues/a%2Fb/pendingworkloads")).status_code == 404


async def test_route_table() -> None:
    """Each path reaches its route with its parameters and metric labels; nothing else."""
    app = app_for()
    r = await get(app, f"{V2}/namespaces/team-a/localqueues/lq-a/pendingworkloads")
    assert r.status_code == 200
    assert [i["metadata"]["name"] for i in r.json()["items"]] == ["a-high", "a-low"]
    r = await get(app, "/readyz/informer-sync?verbose")
    assert r.text == "[+]informer-sync ok\nreadyz check passed\n"
    # Paths match whole: not a prefix, not up to a final newline.
    for path in ("", "*", "/healthz\n", "/healthz%0A", "/metrics\n", f"{V2}\n", "/dashboard%0A"):
        raw = await call_raw(app, path, ADMIN_RAW)
        assert raw.status == 404, path
        assert b"the server could not find the requested resource" in raw.body
    metrics = (await get(app, "/metrics")).text
    counter = "queuescope_visibility_requests_total"
    assert f'{counter}{{code="200",endpoint="localqueue",version="v1beta2"}} 1.0' in metrics
    assert f'{counter}{{code="404",endpoint="unknown",version=""}} 7.0' in metrics
    without = app_for(extensions=frozenset({"longpoll"}))
    path = f"{V2}/namespaces/team-a/workloads/a-low/pendingposition"
    assert (await get(without, path)).status_code == 404


@pytest.mark.parametrize(
    ("values", "token"),
    [
        (["Bearer abc"], "abc"),
        (["bearer abc"], "abc"),
        (["  BEARER abc  "], "abc"),
        (["Bearer abc def"], "abc"),
        (["Bearer "], None),
        (["Bearer  abc"], None),  # split on single spaces: the token is empty
        (["Basic abc"], None),
        (["Bearer"], None),
        ([], None),
        (["Basic x", "Bearer y"], None),  # only the first Authorization header counts
    ],
)
def test_bearer_token(values: list[str], token: str | None) -> None:
    assert bearer_token([("authorization", v) for v in values]) == token


async def test_credentials_reach_the_authenticator() -> None:
    app = app_for()
    authenticator = app.state.visibility_server._c.authenticator
    headers = [
        (b"X-Remote-Group", b"a"),
        (b"x-remote-group", b"b,c"),
        (b"Authorization", b"Bearer tok"),
        (b"x-test-user", b"admin"),
        (b"x-test-groups", b"system:masters"),
    ]
    await call_raw(app, "/version", headers, extensions={"queuescope.peer_cert": b"\x30\x82"})
    seen = authenticator.seen[-1]
    assert seen.peer_cert_der == b"\x30\x82"
    assert seen.bearer_token == "tok"
    assert seen.values("x-remote-group") == ["a", "b,c"]
    assert seen.headers[0] == ("x-remote-group", "a")
    await call_raw(app, "/version", headers)
    assert authenticator.seen[-1].peer_cert_der is None
    creds = request_credentials(None, [("x", "\u00e9")])
    assert creds.values("X") == ["\u00e9"]
