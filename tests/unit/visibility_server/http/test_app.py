"""The factory: options, the FastAPI shell, HEAD everywhere."""

from __future__ import annotations

import pytest
from fastapi import FastAPI

from tests.unit.visibility_server.http.support import (
    ADMIN,
    ADMIN_RAW,
    T0,
    V1,
    V2,
    G,
    app_for,
    call_raw,
    entry,
    get,
    make_snapshot,
)


def test_fastapi_shell_has_no_framework_routes() -> None:
    app = app_for()
    assert isinstance(app, FastAPI)
    assert app.router.redirect_slashes is False
    assert app.docs_url is None and app.redoc_url is None and app.openapi_url is None


def test_unknown_extension_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown visibility extensions"):
        app_for(extensions=frozenset({"watch"}))


async def test_one_version_only() -> None:
    app = app_for(versions=("v1beta1",))
    assert (await get(app, f"{V1}/clusterqueues/cq-a/pendingworkloads")).status_code == 200
    assert (await get(app, f"{V2}/clusterqueues/cq-a/pendingworkloads")).status_code == 404
    assert (await get(app, V2)).status_code == 404
    group = (await get(app, G)).json()
    assert group["preferredVersion"]["version"] == "v1beta1"
    assert [v["version"] for v in group["versions"]] == ["v1beta1"]


@pytest.mark.parametrize(
    "path",
    [
        "/apis",
        G,
        V2,
        "/openapi/v2",
        "/version",
        "/healthz",
        "/readyz/ping",
        "/metrics",
        f"{V2}/namespaces/team-a/localqueues/lq-a/pendingworkloads",
        f"{V2}/namespaces/team-a/workloads/a-low/pendingposition",
    ],
)
async def test_head_everywhere(path: str) -> None:
    app = app_for()
    full = await get(app, path)
    head = await get(app, path, method="HEAD")
    assert head.status_code == full.status_code == 200
    assert head.content == b""
    assert head.headers.get("content-type") == full.headers.get("content-type")
    if path != "/metrics":  # metrics move between the two requests
        assert head.headers.get("content-length") == full.headers.get("content-length")


async def test_head_of_a_streamed_page_sends_no_body() -> None:
    entries = [entry("ns", f"w{i}", "lq", 0, T0 + i) for i in range(5001)]
    app = app_for(make_snapshot({"cq-a": entries}))
    path = f"{V2}/clusterqueues/cq-a/pendingworkloads"
    r = await call_raw(app, path, ADMIN_RAW, method="HEAD", query=b"limit=6000")
    assert r.status == 200 and r.body == b""
    assert "content-length" not in r.headers


async def test_lifespan_scopes_reach_the_framework() -> None:
    app = app_for()
    messages = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[str] = []

    async def receive() -> dict[str, str]:
        return messages.pop(0)

    async def send(message: object) -> None:
        assert isinstance(message, dict)
        sent.append(message["type"])

    await app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, receive, send)
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


async def test_lifespan_shutdown_forgets_what_was_rendered() -> None:
    app = app_for()
    server = app.state.visibility_server
    assert (await get(app, f"{V2}/clusterqueues/cq-a/pendingworkloads")).status_code == 200
    assert (len(server.memo.chunks), len(server.memo.views)) == (1, 1)
    messages = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]

    async def receive() -> dict[str, str]:
        return messages.pop(0)

    async def send(message: object) -> None:
        pass

    await app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, receive, send)
    assert (len(server.memo.chunks), len(server.memo.views)) == (0, 0)
    # Still answers (a server that is stopping may get one more request).
    assert (await get(app, f"{V2}/clusterqueues/cq-a/pendingworkloads")).status_code == 200


async def test_admin_is_allowed_everything_known() -> None:
    assert (await get(app_for(), "/metrics", ADMIN)).status_code == 200
