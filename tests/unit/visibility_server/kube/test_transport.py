"""`RestTransport` on `KubeRest` over a real kubernetes_asyncio `ApiClient`, against a small HTTP
server on 127.0.0.1 standing in for kube-apiserver: what goes over the wire, and how
statuses, silence and refused connections come back."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from scheduler.kubeapi.client import Call, KubeRest
from scheduler.kubeapi.errors import KubeError
from visibility_server.authz.attributes import request_attributes
from visibility_server.authz.identity import authenticated_user
from visibility_server.kube.sar import SubjectAccessReviewBackend
from visibility_server.kube.transport import (
    RestTransport,
    as_transport,
)

TOKEN = "our-service-account-token"
WATCH_PATH = "/api/v1/namespaces/kube-system/configmaps"


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes


@dataclass
class FakeApiserver:
    seen: list[Seen] = field(default_factory=list)
    hang: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append(
            Seen(
                request.method,
                request.path,
                dict(request.query),
                dict(request.headers),
                await request.read(),
            )
        )
        if request.path == "/hang":
            await self.hang.wait()
        if request.path == "/forbidden":
            return web.json_response({"kind": "Status", "message": "nope", "code": 403}, status=403)
        if request.path == WATCH_PATH and request.query.get("watch") == "true":
            if request.query.get("resourceVersion") == "refused":
                return web.json_response({"kind": "Status", "message": "no watch"}, status=403)
            stream = web.StreamResponse(headers={"Content-Type": "application/json"})
            await stream.prepare(request)
            if request.query.get("resourceVersion") == "garbage":
                await stream.write(b"<html>proxy error</html>\n")
            for rv in ("2", "3"):
                line = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": rv}}}
                await stream.write(json.dumps(line).encode() + b"\n")
            await stream.write_eof()
            return stream
        return web.json_response(
            {"kind": "SubjectAccessReview", "status": {"allowed": True}}, status=201
        )


@pytest.fixture
async def apiserver() -> AsyncIterator[tuple[FakeApiserver, KubeRest]]:
    fake = FakeApiserver()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    configuration = Configuration(host=f"http://127.0.0.1:{port}")
    configuration.api_key = {"BearerToken": TOKEN}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    client = ApiClient(configuration)
    rest = KubeRest(client)
    try:
        yield fake, rest
    finally:
        fake.hang.set()
        await rest.close()
        await client.close()
        await runner.cleanup()


async def test_a_review_goes_out_as_json_with_our_token(
    apiserver: tuple[FakeApiserver, KubeRest],
) -> None:
    fake, client = apiserver
    backend = SubjectAccessReviewBackend(client)
    user = authenticated_user("alice", groups=["devs"])
    decision = await backend.review(user, request_attributes("GET", "/metrics"))
    assert decision.allowed
    [seen] = fake.seen
    assert (seen.method, seen.path) == (
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
    )
    assert seen.headers["Authorization"] == f"Bearer {TOKEN}"
    assert seen.headers["Content-Type"] == "application/json"
    assert json.loads(seen.body) == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
            "user": "alice",
            "groups": ["devs", "system:authenticated"],
        },
    }


async def test_statuses_come_back_as_responses(apiserver: tuple[FakeApiserver, KubeRest]) -> None:
    fake, client = apiserver
    transport = RestTransport(client)
    answer = await transport.request(Call("GET", "/forbidden", (("a", "b c"),), timeout=5))
    assert answer.status == 403
    assert answer.message() == "nope"
    assert fake.seen[0].query == {"a": "b c"}
    assert fake.seen[0].body == b""


async def test_silence_is_a_transport_error(apiserver: tuple[FakeApiserver, KubeRest]) -> None:
    _, client = apiserver
    with pytest.raises(KubeError, match=r"did not answer within 0\.2s") as raised:
        await RestTransport(client).request(Call("GET", "/hang", timeout=0.2))
    assert raised.value.status == 0


async def test_a_refused_connection_is_a_transport_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        client = ApiClient(Configuration(host=f"http://127.0.0.1:{port}"))
        rest = KubeRest(client)
        try:
            with pytest.raises(KubeError, match="cannot reach kube-apiserver") as raised:
                await RestTransport(rest).request(Call("GET", "/x", timeout=5))
            assert raised.value.transient
        finally:
            await rest.close()
            await client.close()


async def test_a_watch_yields_decoded_events(apiserver: tuple[FakeApiserver, KubeRest]) -> None:
    fake, client = apiserver
    transport = RestTransport(client)
    events: list[Any] = [
        event
        async for event in transport.watch(
            WATCH_PATH, query=[("fieldSelector", "metadata.name=x")], read_timeout=5
        )
    ]
    assert [e["object"]["metadata"]["resourceVersion"] for e in events] == ["2", "3"]
    assert fake.seen[0].query == {"fieldSelector": "metadata.name=x", "watch": "true"}


@pytest.mark.parametrize(
    ("version", "status"), [("refused", 403), ("garbage", 0)], ids=["refused", "not-json"]
)
async def test_a_refused_or_garbled_watch_raises(
    apiserver: tuple[FakeApiserver, KubeRest], version: str, status: int
) -> None:
    _, client = apiserver
    stream = RestTransport(client).watch(
        WATCH_PATH, query=[("resourceVersion", version)], read_timeout=5
    )
    with pytest.raises(KubeError) as raised:
        await anext(stream)
    assert raised.value.status == status
    if status:
        assert raised.value.reason == "Forbidden"
    else:
        assert "not JSON" in str(raised.value)


async def test_a_rest_client_is_wrapped_and_a_transport_is_kept() -> None:
    client = ApiClient(Configuration(host="http://127.0.0.1:1"))
    try:
        rest = KubeRest(client)
        assert isinstance(as_transport(rest), RestTransport)
        transport = RestTransport(rest)
        assert as_transport(transport) is transport
    finally:
        await client.close()
