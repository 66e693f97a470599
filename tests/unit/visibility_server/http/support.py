"""Shared fixtures for the HTTP app tests: snapshots, a fake authenticator, RBAC."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import httpx
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from scheduler.core.workload import OwnerRef
from scheduler.runtime.pages import build_view
from scheduler.runtime.snapshot import Snapshot
from scheduler.runtime.workload_records import PendingEntry
from tests.unit.visibility_server.authz.builders import (
    VIS,
    binding,
    cluster_binding,
    cluster_role,
    group,
    rule,
    user,
)
from visibility_server.authn.interface import (
    AuthenticationFailed,
    AuthenticationUnavailable,
    NoCredentials,
    RequestCredentials,
)
from visibility_server.authz.attributes import Attributes
from visibility_server.authz.decision import Decision
from visibility_server.authz.embedded import EmbeddedBackend
from visibility_server.authz.identity import ANONYMOUS, UserInfo, authenticated_user
from visibility_server.authz.pipeline import Authorizer
from visibility_server.authz.rbac import RBACAuthorizer
from visibility_server.http import create_app
from visibility_server.http.longpoll import ChangeNotifier

G = f"/apis/{VIS}"
V2 = f"{G}/v1beta2"
V1 = f"{G}/v1beta1"
T0 = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z in µs
SECOND = 1_000_000
NOW = T0 / SECOND + 300  # the injected clock: five minutes after T0
VERSION_INFO = {
    "major": "0",
    "minor": "1",
    "gitVersion": "v0.1.0",
    "gitCommit": "abc123",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "cpython-3.11.7",
    "compiler": "cpython",
    "platform": "linux/amd64",
}

# Who the fake authenticator says the caller is.
USER_HEADER = "x-test-user"
GROUPS_HEADER = "x-test-groups"
# "fail" -> 401 (an error), "none" -> 401 (no credentials), "unavailable" -> 503, "boom" -> 500
FAIL_HEADER = "x-test-authn"

ADMIN = {USER_HEADER: "admin", GROUPS_HEADER: "system:masters"}
ALICE = {USER_HEADER: "alice"}  # cluster-wide viewer
BOB = {USER_HEADER: "bob"}  # LocalQueue viewer in team-a only
CAROL = {USER_HEADER: "carol"}  # authenticated, no rights


class FakeAuthenticator:
    def __init__(self) -> None:
        self.seen: list[RequestCredentials] = []

    async def authenticate(self, credentials: RequestCredentials) -> UserInfo:
        self.seen.append(credentials)
        failure = credentials.values(FAIL_HEADER)
        if failure == ["fail"]:
            raise AuthenticationFailed(
                "x509: subject with cn=front\nproxy is not in the allowed list"
            )
        if failure == ["none"]:
            raise NoCredentials("no credentials, and anonymous requests are disabled")
        if failure == ["unavailable"]:
            raise AuthenticationUnavailable("token review timed out")
        if failure == ["boom"]:
            raise RuntimeError("tokenreviews.authentication.k8s.io is forbidden")
        names = credentials.values(USER_HEADER)
        if not names:
            return ANONYMOUS
        groups = [g for line in credentials.values(GROUPS_HEADER) for g in line.split(",") if g]
        return authenticated_user(names[0], groups=groups)


def rbac() -> RBACAuthorizer:
    viewer = cluster_role(
        "cq-viewer",
        rule(
            ["get"],
            [VIS],
            [
                "clusterqueues/pendingworkloads",
                "localqueues/pendingworkloads",
                "workloads/pendingposition",
            ],
        ),
        rule(["get"], urls=["/metrics"]),
    )
    lq_viewer = cluster_role(
        "lq-viewer",
        rule(["get"], [VIS], ["localqueues/pendingworkloads", "workloads/pendingposition"]),
    )
    return RBACAuthorizer.from_objects(
        [
            viewer,
            lq_viewer,
            cluster_binding("alice-viewer", "cq-viewer", user("alice")),
            binding("team-a", "bob-lq", "ClusterRole", "lq-viewer", user("bob")),
            cluster_binding("never", "cq-viewer", group("nobody")),
        ]
    )


def embedded_authorizer() -> Authorizer:
    return Authorizer(EmbeddedBackend(rbac()))


class FailingBackend:
    """A SAR backend that raises: `transient` picks 503 over 500."""

    def __init__(self, message: str, *, transient: bool) -> None:
        self.message = message
        self.transient = transient

    async def review(self, user: UserInfo, attrs: Attributes) -> Decision:
        error = RuntimeError(self.message)
        error.transient = self.transient  # type: ignore[attr-defined]
        raise error


class ReasonBackend:
    """Denies with a reason, as a SAR `status.reason` would."""

    async def review(self, user: UserInfo, attrs: Attributes) -> Decision:
        return Decision.deny("no RBAC policy matched")


def entry(
    namespace: str,
    name: str,
    local_queue: str,
    priority: int,
    created: int,
    owners: Sequence[OwnerRef] = (),
    why: str = "",
) -> PendingEntry:
    return PendingEntry.make(namespace, name, created, tuple(owners), priority, local_queue, why)


def example_entries() -> list[PendingEntry]:
    """docs/visibility-api.md#order-and-positions's worked example, already in queue order."""
    return [
        entry("team-a", "a-high", "lq-a", 100, T0),
        entry("team-a", "b-high", "lq-b", 100, T0 + SECOND),
        entry("team-a", "a-low", "lq-a", 50, T0),
        entry("team-a", "b-low", "lq-b", 50, T0 + SECOND),
    ]


def make_snapshot(
    views: Mapping[str, Sequence[PendingEntry]],
    local_queues: Mapping[tuple[str, str], str] | None = None,
    *,
    synced: bool = True,
    generation: int = 1,
) -> Snapshot:
    built = {name: build_view(name, entries) for name, entries in views.items()}
    lqs: dict[tuple[str, str], str] = dict(local_queues or {})
    workloads: dict[tuple[str, str], str] = {}
    for name, view in built.items():
        for e in view.entries:
            lqs.setdefault(e.local_queue_key, name)
            workloads[e.key] = name
    return Snapshot(
        generation=generation,
        synced=synced,
        views=MappingProxyType(built),
        local_queues=MappingProxyType(lqs),
        workloads=MappingProxyType(workloads),
    )


def example_snapshot(**kwargs: Any) -> Snapshot:
    return make_snapshot(
        {"cq-a": example_entries(), "cq-empty": []},
        {("team-a", "lq-orphan"): "cq-missing", ("team-a", "lq-idle"): "cq-a"},
        **kwargs,
    )


@dataclass
class Holder:
    """A mutable snapshot reference, as the runtime publishes it."""

    current: Snapshot

    def __call__(self) -> Snapshot:
        return self.current


@dataclass
class Notifier:
    """A ChangeNotifier the test drives: `publish` wakes every waiter."""

    event: asyncio.Event = field(default_factory=asyncio.Event)
    waits: int = 0

    current_generation: Callable[[], int] | None = None

    async def wait_for_change(self, timeout: float, *, after: int | None = None) -> None:
        self.waits += 1
        if (
            after is not None
            and self.current_generation is not None
            and self.current_generation() != after
        ):
            return
        event = self.event
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            return

    def publish(self) -> None:
        self.event.set()
        self.event = asyncio.Event()


def app_for(
    snap: Snapshot | Callable[[], Snapshot] | None = None,
    *,
    authorizer: Authorizer | None = None,
    extensions: frozenset[str] = frozenset({"pendingposition", "longpoll"}),
    change_notifier: ChangeNotifier | None = None,
    **kwargs: Any,
) -> FastAPI:
    source = snap if callable(snap) else Holder(snap if snap is not None else example_snapshot())
    kwargs.setdefault("metrics_registry", CollectorRegistry())
    kwargs.setdefault("clock", lambda: NOW)
    return create_app(
        snapshot=source,
        authenticator=FakeAuthenticator(),
        authorizer=authorizer or embedded_authorizer(),
        extensions=extensions,
        version_info=VERSION_INFO,
        change_notifier=change_notifier,
        **kwargs,
    )


def client(app: FastAPI, headers: Mapping[str, str] | None = None) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="https://visibility.test",
        headers={"user-agent": "test-client", **(headers or {})},
    )


async def get(
    app: FastAPI, path: str, headers: Mapping[str, str] | None = None, method: str = "GET"
) -> httpx.Response:
    async with client(app) as c:
        return await c.request(method, path, headers=dict(ADMIN if headers is None else headers))


@dataclass
class RawResponse:
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[bytes] = field(default_factory=list)

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)


async def call_raw(
    app: FastAPI,
    path: str,
    headers: Sequence[tuple[bytes, bytes]] = (),
    *,
    method: str = "GET",
    query: bytes = b"",
    on_send: Callable[[MutableMapping[str, Any]], Any] | None = None,
    receive: Callable[[], Any] | None = None,
    extensions: dict[str, Any] | None = None,
) -> RawResponse:
    """Call the ASGI app directly: arbitrary header bytes, a controllable send/receive."""
    out = RawResponse()
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "https",
        "path": path,
        "raw_path": path.encode("utf-8", "surrogateescape"),
        "query_string": query,
        "root_path": "",
        "headers": list(headers),
        "server": ("127.0.0.1", 8443),
        "client": ("127.0.0.1", 5555),
        "extensions": extensions or {},
    }
    sent_request = False

    async def default_receive() -> dict[str, Any]:
        nonlocal sent_request
        if not sent_request:
            sent_request = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()  # the client never leaves
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        if on_send is not None:
            result = on_send(message)
            if asyncio.iscoroutine(result):
                await result
        if message["type"] == "http.response.start":
            out.status = message["status"]
            out.headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in message["headers"]}
        elif message["type"] == "http.response.body":
            out.chunks.append(message.get("body", b""))

    await app(scope, receive or default_receive, send)
    return out


ADMIN_RAW = [(b"x-test-user", b"admin"), (b"x-test-groups", b"system:masters")]
