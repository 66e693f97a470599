"""KubeRest against a real local HTTP server, configured (host, bearer token) by a real
kubernetes-asyncio ApiClient: JSON in and out, errors as KubeError, 401 -> refresh ->
one retry, watch streaming and the watch read timeout."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import aiohttp
import pytest
from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from scheduler.kubeapi.client import Call, KubeRest, WatchEvent
from scheduler.kubeapi.errors import KubeError

Json = dict[str, Any]
NS_PATH = "/api/v1/namespaces/team"
WATCH_PATH = "/apis/kueue.x-k8s.io/v1beta1/workloads"


def status_body(code: int, reason: str, message: str) -> Json:
    return {
        "kind": "Status",
        "status": "Failure",
        "reason": reason,
        "message": message,
        "code": code,
    }


@dataclass
class Server:
    """What the handlers saw, and what they should answer."""

    url: str = ""
    token: str = "Bearer fresh"  # the only credential accepted on /auth paths
    seen: list[tuple[str, str, str, str, bytes]] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    watch_lines: list[bytes] = field(default_factory=list)


def build_app(state: Server) -> web.Application:
    async def record(request: web.Request) -> None:
        state.seen.append(
            (
                request.method,
                request.path_qs,
                request.headers.get("Authorization", ""),
                request.headers.get("Content-Type", ""),
                await request.read(),
            )
        )

    async def echo(request: web.Request) -> web.Response:
        await record(request)
        body = await request.read()
        return web.json_response(
            {
                "method": request.method,
                "query": dict(request.query),
                "body": json.loads(body) if body else None,
            },
            status=201 if request.method == "POST" else 200,
        )

    async def not_found(request: web.Request) -> web.Response:
        await record(request)
        return web.json_response(
            status_body(404, "NotFound", 'namespaces "gone" not found'), status=404
        )

    async def not_json(request: web.Request) -> web.Response:
        await record(request)
        return web.Response(status=502, text="<html>bad gateway</html>")

    async def auth(request: web.Request) -> web.Response:
        await record(request)
        if request.headers.get("Authorization") != state.token:
            return web.json_response(status_body(401, "Unauthorized", "Unauthorized"), status=401)
        return web.json_response({"ok": True})

    async def slow(request: web.Request) -> web.Response:
        await record(request)
        await state.release.wait()
        return web.json_response({})

    async def watch(request: web.Request) -> web.StreamResponse:
        await record(request)
        if request.query.get("watch") != "true":
            return web.json_response(status_body(400, "BadRequest", "not a watch"), status=400)
        response = web.StreamResponse()
        await response.prepare(request)
        for line in state.watch_lines:
            await response.write(line)
        return response

    async def watch_auth(request: web.Request) -> web.Response:
        await record(request)
        return web.json_response(status_body(401, "Unauthorized", "Unauthorized"), status=401)

    async def watch_gone(request: web.Request) -> web.Response:
        await record(request)
        return web.json_response(
            status_body(410, "Expired", "too old resource version: 1 (50)"), status=410
        )

    async def watch_silent(request: web.Request) -> web.StreamResponse:
        await record(request)
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b'{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n')
        await state.release.wait()
        return response

    app = web.Application()
    app.router.add_route("*", NS_PATH, echo)
    app.router.add_get("/api/v1/namespaces/gone", not_found)
    app.router.add_get("/bad", not_json)
    app.router.add_route("*", "/auth", auth)
    app.router.add_get("/slow", slow)
    app.router.add_get(WATCH_PATH, watch)
    app.router.add_get("/watch-auth", watch_auth)
    app.router.add_get("/watch-gone", watch_gone)
    app.router.add_get("/watch-silent", watch_silent)
    return app


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    state = Server()
    runner = web.AppRunner(build_app(state), shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    state.url = f"http://127.0.0.1:{port}"
    yield state
    state.release.set()
    await runner.cleanup()


def api_client(url: str, token: str = "stale") -> ApiClient:
    config = Configuration(host=url)
    config.api_key = {"BearerToken": token}
    config.api_key_prefix = {"BearerToken": "Bearer"}
    return ApiClient(configuration=config)


@pytest.fixture
async def api(server: Server) -> AsyncIterator[ApiClient]:
    client = api_client(server.url)
    yield client
    await client.close()


class Rest(KubeRest):
    """A KubeRest whose session the test closes at its end."""

    made: ClassVar[list[KubeRest]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        Rest.made.append(self)


@pytest.fixture(autouse=True)
async def close_sessions() -> AsyncIterator[None]:
    yield
    while Rest.made:
        await Rest.made.pop().close()


class Refresher:
    def __init__(self, api: ApiClient, token: str) -> None:
        self.api, self.token, self.calls = api, token, 0

    async def __call__(self) -> None:
        self.calls += 1
        self.api.configuration.api_key = {"BearerToken": self.token}


# -- requests -------------------------------------------------------------------------
async def test_verbs_send_json_and_decode_json(server: Server, api: ApiClient) -> None:
    rest = Rest(api)
    got = await rest.get(NS_PATH, {"limit": "5", "continue": "abc"})
    assert got == {"method": "GET", "query": {"limit": "5", "continue": "abc"}, "body": None}
    assert await rest.create(NS_PATH, {"a": 1}) == {"method": "POST", "query": {}, "body": {"a": 1}}
    assert (await rest.replace(NS_PATH, {"b": [1]}))["body"] == {"b": [1]}
    assert (await rest.merge_patch(NS_PATH, {"spec": None}))["body"] == {"spec": None}
    assert (await rest.delete(NS_PATH))["method"] == "DELETE"
    content_types = {method: ctype for method, _, _, ctype, _ in server.seen}
    assert content_types["PATCH"] == "application/merge-patch+json"
    assert content_types["PUT"] == "application/json"
    assert {auth for _, _, auth, _, _ in server.seen} == {"Bearer stale"}


async def test_status_error_becomes_kube_error_with_the_body(
    server: Server, api: ApiClient
) -> None:
    with pytest.raises(KubeError) as caught:
        await Rest(api).get("/api/v1/namespaces/gone")
    err = caught.value
    assert err.status == 404
    assert err.reason == "Not Found"
    assert err.status_reason == "NotFound"
    assert err.body["message"] == 'namespaces "gone" not found'
    assert str(err) == '404 Not Found: namespaces "gone" not found'
    assert not err.transient


async def test_a_non_json_error_body_is_kept_as_its_message(server: Server, api: ApiClient) -> None:
    with pytest.raises(KubeError) as caught:
        await Rest(api).get("/bad")
    assert caught.value.status == 502
    assert caught.value.body == {"message": "<html>bad gateway</html>"}
    assert caught.value.transient


async def test_401_refreshes_the_credentials_and_retries_once(
    server: Server, api: ApiClient
) -> None:
    refresh = Refresher(api, "fresh")
    assert await Rest(api, refresh_credentials=refresh).get("/auth") == {"ok": True}
    assert refresh.calls == 1
    assert [auth for _, _, auth, _, _ in server.seen] == ["Bearer stale", "Bearer fresh"]


async def test_401_after_the_refresh_is_an_error_not_a_loop(server: Server, api: ApiClient) -> None:
    refresh = Refresher(api, "still-wrong")
    with pytest.raises(KubeError) as caught:
        await Rest(api, refresh_credentials=refresh).get("/auth")
    assert caught.value.status == 401
    assert refresh.calls == 1
    assert len(server.seen) == 2


async def test_401_without_a_refresher_fails_at_once(server: Server, api: ApiClient) -> None:
    with pytest.raises(KubeError) as caught:
        await Rest(api).create("/auth", {})
    assert caught.value.status == 401
    assert len(server.seen) == 1


async def test_request_timeout_is_a_transport_error(server: Server, api: ApiClient) -> None:
    with pytest.raises(KubeError) as caught:
        await Rest(api, timeout=0.05).get("/slow")
    assert caught.value.status == 0
    assert caught.value.transient


async def test_connection_refused_is_a_transport_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    client = api_client(f"http://127.0.0.1:{port}")
    try:
        with pytest.raises(KubeError) as caught:
            await Rest(client).get(NS_PATH)
    finally:
        await client.close()
    assert caught.value.status == 0
    assert "ClientConnectorError" in caught.value.reason


# -- watches --------------------------------------------------------------------------
async def collect(rest: KubeRest, path: str, read_timeout: float = 5.0) -> list[WatchEvent]:
    return [e async for e in rest.watch(path, {"resourceVersion": "7"}, read_timeout=read_timeout)]


def line(event: Json) -> bytes:
    return json.dumps(event).encode() + b"\n"


async def test_watch_streams_one_event_per_line(server: Server, api: ApiClient) -> None:
    wl = {"metadata": {"name": "a", "resourceVersion": "8"}}
    server.watch_lines = [
        line({"type": "ADDED", "object": wl}),
        b"\n",  # blank keep-alive lines are skipped
        line({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}}),
        line({"type": "MODIFIED"}),  # no object: not an event
        # one event split across writes, as chunked transfer may deliver it
        b'{"type":"DELETED","obj',
        b'ect":{"metadata":{"name":"a"}}}\n',
        line({"type": "ERROR", "object": status_body(410, "Expired", "too old")}),
    ]
    events = await collect(Rest(api), WATCH_PATH)
    assert events == [
        WatchEvent("ADDED", wl),
        WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": "9"}}),
        WatchEvent("DELETED", {"metadata": {"name": "a"}}),
        WatchEvent("ERROR", status_body(410, "Expired", "too old")),
    ]
    method, path_qs, _, _, _ = server.seen[0]
    assert method == "GET"
    assert path_qs == f"{WATCH_PATH}?resourceVersion=7&watch=true"


async def test_watch_carries_events_larger_than_the_stream_buffer(
    server: Server, api: ApiClient
) -> None:
    """Objects up to etcd's 1.5 MiB limit arrive as one line each."""
    big = {"metadata": {"name": "big", "annotations": {"blob": "x" * 1_400_000}}}
    server.watch_lines = [
        line({"type": "ADDED", "object": big}),
        line({"type": "DELETED", "object": big}),
    ]
    events = await collect(Rest(api), WATCH_PATH)
    assert [e.type for e in events] == ["ADDED", "DELETED"]
    assert events[0].object == big


async def test_watch_410_on_the_request_is_a_kube_error(server: Server, api: ApiClient) -> None:
    with pytest.raises(KubeError) as caught:
        await collect(Rest(api), "/watch-gone")
    assert caught.value.status == 410
    assert caught.value.status_reason == "Expired"


async def test_watch_401_refreshes_and_reports_the_error(server: Server, api: ApiClient) -> None:
    """A watch is not retried in place: the caller reconnects with fresh credentials."""
    refresh = Refresher(api, "fresh")
    with pytest.raises(KubeError) as caught:
        await collect(Rest(api, refresh_credentials=refresh), "/watch-auth")
    assert caught.value.status == 401
    assert refresh.calls == 1


async def test_a_silent_watch_hits_the_read_timeout(server: Server, api: ApiClient) -> None:
    rest = Rest(api)
    events: list[WatchEvent] = []
    with pytest.raises(KubeError) as caught:
        async for event in rest.watch("/watch-silent", {}, read_timeout=0.05):
            events.append(event)
    assert [e.object["metadata"]["name"] for e in events] == ["a"]
    assert caught.value.status == 0
    assert caught.value.reason.startswith("watch interrupted")
    assert caught.value.transient


async def test_closing_a_watch_early_closes_the_connection(server: Server, api: ApiClient) -> None:
    """A consumer that stops reading (cancellation, a Gone event) must not leave a
    half-read stream in the pool: the next request still works."""
    server.watch_lines = [
        line({"type": "ADDED", "object": {"metadata": {"name": str(i)}}}) for i in range(3)
    ]
    rest = Rest(api)
    stream = rest.watch(WATCH_PATH, {}, read_timeout=5)
    first = await anext(stream)
    await stream.aclose()  # type: ignore[attr-defined]
    assert first.object == {"metadata": {"name": "0"}}
    assert (await rest.get(NS_PATH))["method"] == "GET"


def test_kube_error_shapes() -> None:
    assert str(KubeError(0, "ClientConnectorError: refused")) == "0 ClientConnectorError: refused"
    assert KubeError(429, "Too Many Requests").transient
    assert KubeError(503, "Service Unavailable").transient
    assert not KubeError(409, "Conflict").transient
    assert KubeError(409, "Conflict", {"reason": 7}).status_reason == ""


async def test_timeouts_are_passed_per_request(server: Server, api: ApiClient) -> None:
    """A per-call timeout overrides the client default."""
    rest = Rest(api, timeout=30)
    with pytest.raises(KubeError) as caught:
        await rest.request(Call("GET", "/slow", timeout=0.05))
    assert caught.value.status == 0
    assert isinstance(caught.value.__cause__, (TimeoutError, aiohttp.ClientError))
