"""The real visibility server on a real TLS socket, and clients that talk to it the way
kube-apiserver's aggregator, certificate users and anonymous callers do.

The server is `create_app` behind `visibility_server.serving.build_server` (our peer-cert
httptools protocol, our TLS listener) on 127.0.0.1 with an ephemeral port, running in the
test's event loop. Authentication is the real `AuthenticatorChain`, configured from an
`extension-apiserver-authentication` ConfigMap as kube-apiserver publishes it (client CA,
front-proxy CA with allowed name `front-proxy-client`, the X-Remote-* headers);
authorization is the real `Authorizer` in front of embedded RBAC. The snapshot is built
with `build_view` from docs/visibility-api.md#order-and-positions's worked example plus a 6000-entry
queue.

Clients are blocking `http.client` connections run in a worker thread, so the loop keeps
serving while they wait, and so that what is observed is what crossed the wire: HEAD and
304 without a body (a follow-up request on the same connection would read garbage
otherwise), chunked transfer encoding, exact bytes, repeated header lines (`putheader`
once per line). Every wait is bounded: socket timeouts, and `asyncio.timeout` around
start-up, shutdown and every thread hop.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import socket
import ssl
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Final, TypeVar

import pytest_asyncio
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from scheduler.core.workload import OwnerRef
from scheduler.runtime.pages import build_view
from scheduler.runtime.snapshot import Snapshot
from scheduler.runtime.workload_records import PendingEntry
from tests.tls.support import client_context
from tests.unit.visibility_server.authz.builders import (
    binding,
    cluster_binding,
    cluster_role,
    group,
    rule,
    user,
)
from visibility_server.authn.chain import AuthenticatorChain
from visibility_server.authn.config import AuthenticationConfig
from visibility_server.authn.interface import AuthenticationUnavailable, RequestCredentials
from visibility_server.authz.embedded import EmbeddedBackend
from visibility_server.authz.identity import UserInfo
from visibility_server.authz.pipeline import Authorizer
from visibility_server.authz.rbac import RBACAuthorizer
from visibility_server.certs import (
    CertifiedKey,
    PemPair,
    create_ca,
    issue_client_cert,
    issue_serving_cert,
)
from visibility_server.http import NotPending, NotPendingReason, create_app
from visibility_server.serving import build_server
from visibility_server.tls.listener import ListenerTLS

TIMEOUT: Final = 10.0
SERVICE_SAN: Final = "queuescope-visibility.queuescope-system.svc"
LOOPBACK: Final = "127.0.0.1"

VIS: Final = "visibility.kueue.x-k8s.io"
G: Final = f"/apis/{VIS}"
V2: Final = f"{G}/v1beta2"
V1: Final = f"{G}/v1beta1"
VERSIONS: Final = ("v1beta2", "v1beta1")

T0: Final = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z in µs
SECOND: Final = 1_000_000
# The server's injected clock (Table `Age`, OpenAPI `Expires`): five minutes after T0.
# Certificates are checked against the real clock by TLS and by the chain.
NOW: Final = T0 / SECOND + 300
BIG: Final = 6000  # entries of `cq-big`: above the 5000-item streaming threshold

VERSION_INFO: Final = {
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

# -- certificates (kubeadm's layout: serving CA, front-proxy CA, cluster client CA) ------

_CERT_NOW = datetime.now(UTC)  # real handshakes check validity against the real clock
SERVING_CA: Final = create_ca(now=_CERT_NOW, common_name="queuescope-visibility-ca")
FRONT_PROXY_CA: Final = create_ca(now=_CERT_NOW, common_name="front-proxy-ca")
CLIENT_CA: Final = create_ca(now=_CERT_NOW, common_name="kubernetes")
ROGUE_CA: Final = create_ca(now=_CERT_NOW, common_name="rogue-ca")

SERVING: Final = issue_serving_cert(
    SERVING_CA,
    namespace="queuescope-system",
    service="queuescope-visibility",
    now=_CERT_NOW,
    extra_sans=[LOOPBACK],
)
FRONT_PROXY_CERT: Final = issue_client_cert(
    FRONT_PROXY_CA, user="front-proxy-client", now=_CERT_NOW
)
AUDIT_ID: Final = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"  # what `aggregator` sends
WRONG_PROXY_CERT: Final = issue_client_cert(
    FRONT_PROXY_CA, user="not-the-front-proxy", now=_CERT_NOW
)
ADMIN_CERT: Final = issue_client_cert(
    CLIENT_CA, user="kubernetes-admin", groups=["system:masters"], now=_CERT_NOW
)
CAROL_CERT: Final = issue_client_cert(
    CLIENT_CA, user="carol", groups=["queue-viewers"], now=_CERT_NOW
)
DAVE_CERT: Final = issue_client_cert(CLIENT_CA, user="dave", groups=["team-z"], now=_CERT_NOW)
MALLORY_CERT: Final = issue_client_cert(
    ROGUE_CA, user="mallory", groups=["system:masters"], now=_CERT_NOW
)

# kube-apiserver's ConfigMap, as it publishes it (JSON string arrays).
AUTHENTICATION_CONFIGMAP: Final = {
    "client-ca-file": CLIENT_CA.cert_pem.decode(),
    "requestheader-client-ca-file": FRONT_PROXY_CA.cert_pem.decode(),
    "requestheader-allowed-names": '["front-proxy-client"]',
    "requestheader-username-headers": '["X-Remote-User"]',
    "requestheader-group-headers": '["X-Remote-Group"]',
    "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]',
    "requestheader-uid-headers": '["X-Remote-Uid"]',
}

# -- bearer tokens (direct callers only: kube-apiserver never forwards tokens) -----------

PROMETHEUS_TOKEN: Final = "prometheus-token-8c1f2e0d9b7a"
PROMETHEUS_USER: Final = "system:serviceaccount:monitoring:prometheus"
UNAVAILABLE_TOKEN: Final = "token-review-times-out-3e5a7c9b"


class StaticTokenReviewer:
    """A TokenReview stand-in: one good token, one whose review cannot be reached."""

    async def review(self, token: str) -> UserInfo | None:
        if token == PROMETHEUS_TOKEN:
            return UserInfo(PROMETHEUS_USER, groups=("queue-viewers", "system:serviceaccounts"))
        if token == UNAVAILABLE_TOKEN:
            raise AuthenticationUnavailable("token review timed out")
        return None


class RecordingAuthenticator:
    """The real chain, plus a record of who each request was authenticated as (so tests
    can see groups and extras that no response body shows)."""

    def __init__(self, chain: AuthenticatorChain) -> None:
        self.chain = chain
        self.users: list[UserInfo] = []

    async def authenticate(self, credentials: RequestCredentials) -> UserInfo:
        user_info = await self.chain.authenticate(credentials)
        self.users.append(user_info)
        return user_info


# -- RBAC ------------------------------------------------------------------------------


def contract_rbac() -> RBACAuthorizer:
    """alice: LocalQueue viewer in team-a only; group `queue-viewers`: everything,
    cluster-wide, plus `/metrics`; system:masters needs no binding."""
    viewer = cluster_role(
        "pending-viewer",
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
        "localqueue-viewer",
        rule(["get"], [VIS], ["localqueues/pendingworkloads", "workloads/pendingposition"]),
    )
    return RBACAuthorizer.from_objects(
        [
            viewer,
            lq_viewer,
            cluster_binding("queue-viewers", "pending-viewer", group("queue-viewers")),
            binding(
                "team-a", "alice-localqueues", "ClusterRole", "localqueue-viewer", user("alice")
            ),
        ]
    )


# -- the snapshot ----------------------------------------------------------------------

JOB_OWNER: Final = OwnerRef("batch/v1", "Job", "train-a", "0b6f3c52-8a55-4b8e-9d57-1c2a3e4f5a6b")


def entry(
    namespace: str,
    name: str,
    local_queue: str,
    priority: int,
    created: int,
    owners: Sequence[OwnerRef] = (),
) -> PendingEntry:
    return PendingEntry.make(namespace, name, created, tuple(owners), priority, local_queue)


def worked_example() -> list[PendingEntry]:
    """docs/visibility-api.md#order-and-positions, in queue order."""
    return [
        entry("team-a", "a-high", "lq-a", 100, T0),
        entry("team-a", "b-high", "lq-b", 100, T0 + SECOND),
        entry("team-a", "a-low", "lq-a", 50, T0),
        entry("team-a", "b-low", "lq-b", 50, T0 + SECOND),
    ]


def big_entries(count: int = BIG) -> list[PendingEntry]:
    """`team-big/lq-even` and `team-big/lq-odd` alternating: entry i is at CQ position i
    and LocalQueue position i // 2."""
    return [
        entry("team-big", f"w{i:05d}", "lq-even" if i % 2 == 0 else "lq-odd", 0, T0 + i * SECOND)
        for i in range(count)
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


def contract_snapshot(*, synced: bool = True) -> Snapshot:
    """The data every contract test reads.

    * `cq-a`: the worked example (`team-a/lq-a`, `team-a/lq-b`); `team-a/lq-idle` is bound
      to it with nothing queued.
    * `cq-d`: same-named LocalQueues `default` in `team-a` (x, t0) and `team-b` (y, t0+1s).
    * `cq-jobs`: docs/visibility-api.md#response-body's `job-train-a-5d2f1` with an owner, created
    0.999999 s after t0.
    * `cq-empty`: exists, nothing queued; `team-a/lq-orphan` points at a missing `cq-missing`.
    * `cq-big`: 6000 entries (streamed pages).
    """
    return make_snapshot(
        {
            "cq-a": worked_example(),
            "cq-d": [
                entry("team-a", "x", "default", 0, T0),
                entry("team-b", "y", "default", 0, T0 + SECOND),
            ],
            "cq-jobs": [
                entry("team-a", "job-train-a-5d2f1", "lq-jobs", 100, T0 + 999_999, (JOB_OWNER,))
            ],
            "cq-empty": [],
            "cq-big": big_entries(),
        },
        {("team-a", "lq-orphan"): "cq-missing", ("team-a", "lq-idle"): "cq-a"},
        synced=synced,
    )


NOT_PENDING: Final = {
    ("team-a", "finished-job"): NotPending(
        NotPendingReason.FINISHED, creation=T0, cluster_queue="cq-a", local_queue="lq-a"
    ),
}


def not_pending_lookup(namespace: str, name: str) -> NotPending | None:
    return NOT_PENDING.get((namespace, name))


@dataclass
class Holder:
    """A mutable snapshot reference, as the runtime publishes it. `on_read`, if set, runs
    at every read (tests use it to interleave a publish with a request)."""

    current: Snapshot
    on_read: Callable[[], None] | None = None

    def __call__(self) -> Snapshot:
        if self.on_read is not None:
            self.on_read()
        return self.current


@dataclass
class Notifier:
    """A ChangeNotifier the test drives: `publish` wakes every long-poll waiter."""

    event: asyncio.Event = field(default_factory=asyncio.Event)
    waits: int = 0  # calls of wait_for_change that have started
    unwoken: int = 0  # ... and of those, the ones that ended (timeout, cancel) unpublished

    # The published snapshot's generation, when wired: like the runtime's publisher, a
    # wait `after` a generation that is no longer current returns at once.
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
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout)
        finally:
            if not event.is_set():
                self.unwoken += 1

    def publish(self) -> None:
        self.event.set()
        self.event = asyncio.Event()


# -- clients ---------------------------------------------------------------------------

Header = tuple[str, str]
_T = TypeVar("_T")


@dataclass(frozen=True)
class Identity:
    """How a client connects: its certificate (or none), the SNI it sends, and header lines
    it puts on every request (in order; a repeated name is a repeated line)."""

    label: str
    cert: CertifiedKey | None = None
    headers: tuple[Header, ...] = ()
    server_hostname: str = LOOPBACK

    def with_headers(self, *headers: Header) -> Identity:
        return Identity(self.label, self.cert, (*self.headers, *headers), self.server_hostname)


def aggregator(
    user_name: str,
    groups: Sequence[str] = (),
    extra: Sequence[Header] = (),
    *,
    uid: str = "",
    cert: CertifiedKey = FRONT_PROXY_CERT,
) -> Identity:
    """kube-apiserver's proxy: the front-proxy client certificate, SNI = the Service name,
    `X-Remote-User`, one `X-Remote-Group` line per group (never comma-joined), one
    `X-Remote-Extra-<escaped key>` line per value, `X-Remote-Uid` when non-empty,
    `Audit-ID`, `X-Forwarded-For`, and Go's transport's `Accept-Encoding: gzip`."""
    headers: list[Header] = [("X-Remote-User", user_name)]
    headers += [("X-Remote-Group", g) for g in groups]
    headers += [(f"X-Remote-Extra-{key}", value) for key, value in extra]
    if uid:
        headers.append(("X-Remote-Uid", uid))
    headers += [
        ("Audit-ID", AUDIT_ID),
        ("X-Forwarded-For", "10.0.0.7"),
        ("Accept-Encoding", "gzip"),
    ]
    return Identity(f"aggregator:{user_name}", cert, tuple(headers), SERVICE_SAN)


def certificate_user(cert: CertifiedKey, label: str) -> Identity:
    return Identity(f"cert:{label}", cert)


ANONYMOUS: Final = Identity("anonymous")
ADMIN: Final = certificate_user(ADMIN_CERT, "admin")  # O=system:masters
CAROL: Final = certificate_user(CAROL_CERT, "carol")  # O=queue-viewers
DAVE: Final = certificate_user(DAVE_CERT, "dave")  # authenticated, no RBAC
# Through the aggregator: a cluster-wide viewer (RBAC via the group), and alice.
VIEWER: Final = aggregator("viewer", ["queue-viewers", "system:authenticated"])
ALICE: Final = aggregator("alice", ["team-a-devs", "system:authenticated"])
# The aggregator's own background identities (docs/cluster.md#the-aggregation-layer).
PROBE: Final = aggregator("system:kube-aggregator", ["system:masters"])
LEGACY_FALLBACK: Final = aggregator("system:kube-aggregator")
OPENAPI_DOWNLOADER: Final = aggregator("system:aggregator")


@dataclass(frozen=True)
class Request:
    method: str = "GET"
    path: str = "/"
    headers: tuple[Header, ...] = ()
    body: bytes | None = None


def get(path: str, *headers: Header) -> Request:
    return Request("GET", path, tuple(headers))


def head(path: str, *headers: Header) -> Request:
    return Request("HEAD", path, tuple(headers))


@dataclass(frozen=True)
class Reply:
    """One response as read from the wire (the body de-chunked by http.client)."""

    status: int
    headers: tuple[Header, ...]  # every line, in order, names as sent
    body: bytes
    chunked: bool
    will_close: bool

    def header(self, name: str) -> str | None:
        values = self.header_values(name)
        return values[0] if values else None

    def header_values(self, name: str) -> list[str]:
        lowered = name.lower()
        return [v for k, v in self.headers if k.lower() == lowered]

    @property
    def header_names(self) -> set[str]:
        return {k.lower() for k, _ in self.headers}

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")


class Connection(http.client.HTTPSConnection):
    """HTTPS to 127.0.0.1 with a chosen SNI (the Service name, as kube-apiserver sends it;
    or `127.0.0.1`, which the certificate carries as an IP SAN and for which Python sends
    no SNI at all)."""

    def __init__(self, port: int, context: ssl.SSLContext, server_hostname: str) -> None:
        super().__init__(LOOPBACK, port, timeout=TIMEOUT, context=context)
        self.server_hostname = server_hostname

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)
        self.sock = self._context.wrap_socket(  # type: ignore[attr-defined]
            self.sock, server_hostname=self.server_hostname
        )

    def send_request(self, request: Request, identity_headers: Iterable[Header] = ()) -> Reply:
        self.putrequest(request.method, request.path, skip_accept_encoding=True)
        for name, value in (*identity_headers, *request.headers):
            self.putheader(name, value)
        if request.body is not None:
            self.putheader("Content-Length", str(len(request.body)))
        self.endheaders(request.body)
        response = self.getresponse()
        chunked = bool(response.chunked)
        body = response.read()
        return Reply(
            status=response.status,
            headers=tuple(response.getheaders()),
            body=body,
            chunked=chunked,
            will_close=bool(response.will_close),
        )


_CONTEXTS: dict[int, ssl.SSLContext] = {}


def _client_context(cert: CertifiedKey | None) -> ssl.SSLContext:
    """One verifying context per client certificate (the certificates are module
    constants), offering ALPN h2 and http/1.1 as client-go does."""
    key = id(cert)
    if key not in _CONTEXTS:
        _CONTEXTS[key] = client_context(SERVING_CA, cert)
    return _CONTEXTS[key]


class Client:
    """Blocking requests on real TLS connections, run in a worker thread."""

    def __init__(self, port: int, identity: Identity) -> None:
        self.port = port
        self.identity = identity
        self.context = _client_context(identity.cert)

    def connection(self) -> Connection:
        return Connection(self.port, self.context, self.identity.server_hostname)

    def exchange_blocking(self, requests: Sequence[Request]) -> list[Reply]:
        connection = self.connection()
        try:
            return [connection.send_request(r, self.identity.headers) for r in requests]
        finally:
            connection.close()

    async def exchange(self, *requests: Request) -> list[Reply]:
        """Several requests, in order, on one kept-alive connection."""
        return await in_thread(lambda: self.exchange_blocking(requests))

    async def request(
        self,
        method: str,
        path: str,
        *headers: Header,
        body: bytes | None = None,
    ) -> Reply:
        (reply,) = await self.exchange(Request(method, path, tuple(headers), body))
        return reply

    async def get(self, path: str, *headers: Header) -> Reply:
        return await self.request("GET", path, *headers)

    async def head(self, path: str, *headers: Header) -> Reply:
        return await self.request("HEAD", path, *headers)

    def raw_blocking(self, data: bytes) -> bytes:
        """Send raw bytes and read everything until the server closes (send
        `Connection: close`)."""
        sni = self.identity.server_hostname
        with (
            socket.create_connection((LOOPBACK, self.port), timeout=TIMEOUT) as plain,
            self.context.wrap_socket(plain, server_hostname=sni) as tls,
        ):
            tls.sendall(data)
            received = bytearray()
            while chunk := tls.recv(65536):
                received += chunk
            return bytes(received)

    async def raw(self, data: bytes) -> bytes:
        return await in_thread(lambda: self.raw_blocking(data))

    def request_bytes(self, method: str, path: str, *headers: Header) -> bytes:
        lines = [f"{method} {path} HTTP/1.1", f"Host: {LOOPBACK}:{self.port}"]
        lines += [f"{name}: {value}" for name, value in (*self.identity.headers, *headers)]
        lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def in_thread(function: Callable[[], _T]) -> _T:
    """Run a blocking client call off the loop (which serves meanwhile), bounded."""
    async with asyncio.timeout(TIMEOUT * 3):
        return await asyncio.to_thread(function)


# -- the server ------------------------------------------------------------------------


@dataclass
class RealServer:
    port: int
    app: FastAPI
    holder: Holder
    notifier: Notifier
    recorder: RecordingAuthenticator

    def client(self, identity: Identity) -> Client:
        return Client(self.port, identity)

    @property
    def visibility(self) -> Any:
        """The app's request pipeline (in-flight and waiter counts)."""
        return self.app.state.visibility_server

    async def whoami(self, identity: Identity, path: str = "/healthz") -> UserInfo:
        """Who the server authenticated `identity` as, on a request that must succeed."""
        before = len(self.recorder.users)
        reply = await self.client(identity).get(path)
        assert reply.status == 200, (reply.status, reply.body)
        assert len(self.recorder.users) == before + 1
        return self.recorder.users[-1]


def authentication_config() -> AuthenticationConfig:
    return AuthenticationConfig.from_configmap(AUTHENTICATION_CONFIGMAP)


@contextlib.asynccontextmanager
async def serve(
    snapshot: Snapshot | None = None,
    *,
    authorizer: Authorizer | None = None,
    **app_options: Any,
) -> AsyncIterator[RealServer]:
    """The real app on uvicorn with TLS on 127.0.0.1:<ephemeral>, in the running loop."""
    holder = Holder(snapshot if snapshot is not None else contract_snapshot())
    notifier = Notifier(current_generation=lambda: holder.current.generation)
    config = authentication_config()
    recorder = RecordingAuthenticator(AuthenticatorChain(config, StaticTokenReviewer()))
    options: dict[str, Any] = {
        "metrics_registry": CollectorRegistry(),
        "change_notifier": notifier,
        "not_pending": not_pending_lookup,
        "clock": lambda: NOW,
        **app_options,
    }
    app = create_app(
        snapshot=holder,
        authenticator=recorder,
        authorizer=authorizer or Authorizer(EmbeddedBackend(contract_rbac())),
        version_info=VERSION_INFO,
        **options,
    )
    listener = ListenerTLS(PemPair(SERVING.cert_pem, SERVING.key_pem), config.accepted_cas_pem)
    server = build_server(app, listener, LOOPBACK, 0)
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(TIMEOUT):
            while not server.started:
                if task.done():
                    task.result()  # raises what stopped the server
                    raise RuntimeError("uvicorn exited before it started")
                await asyncio.sleep(0.01)
        port: int = server.servers[0].sockets[0].getsockname()[1]
        yield RealServer(port, app, holder, notifier, recorder)
    finally:
        server.should_exit = True
        try:
            async with asyncio.timeout(TIMEOUT):
                await task
        except TimeoutError:
            server.force_exit = True
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            raise


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def real_server() -> AsyncIterator[RealServer]:
    """One server per test module, in the module's event loop (mark the module's tests
    `pytest.mark.asyncio(loop_scope="module")`). Tests must not change its state."""
    async with serve() as server:
        yield server
