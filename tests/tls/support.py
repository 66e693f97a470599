"""A real uvicorn over TLS on 127.0.0.1, in the test's event loop, and a blocking TLS
client run in a thread (so the loop keeps serving while the client waits).

Every wait is bounded: socket timeouts for the client, `asyncio.timeout` for start-up and
shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import socket
import ssl
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn

from visibility_server.authn.chain import UNAUTHORIZED_MESSAGE, AuthenticatorChain
from visibility_server.authn.interface import AuthenticationFailed
from visibility_server.certs import CertifiedKey
from visibility_server.tls.listener import ListenerTLS

TIMEOUT = 10.0
SERVICE_SAN = "queuescope-visibility.queuescope-system.svc"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


@dataclass
class WhoAmI:
    """A tiny ASGI app: runs the chain on the request's credentials and answers with the
    identity as JSON, or a 401 Status. Counts the requests that reached it."""

    chain: AuthenticatorChain
    requests: int = 0
    peer_certs: list[bytes | None] = field(default_factory=list)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Imported here so that a refused uvicorn version fails the tests that need the
        # protocol, each with the import's message, not the whole module at collection.
        from visibility_server.peercert import credentials_from_scope  # noqa: PLC0415

        assert scope["type"] == "http"
        self.requests += 1
        credentials = credentials_from_scope(scope)
        self.peer_certs.append(credentials.peer_cert_der)
        try:
            user = await self.chain.authenticate(credentials)
        except AuthenticationFailed:
            status = 401
            body: dict[str, Any] = {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": UNAUTHORIZED_MESSAGE,
                "reason": "Unauthorized",
                "code": 401,
            }
        else:
            status = 200
            body = {
                "user": user.name,
                "uid": user.uid,
                "groups": list(user.groups),
                "extra": {key: list(values) for key, values in user.extra.items()},
            }
        payload = json.dumps(body).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})


class _EmbeddedServer(uvicorn.Server):
    """Signal handling belongs to the test runner (and to our TaskGroup in production)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def running_server(app: Any, listener: ListenerTLS) -> AsyncIterator[int]:
    """uvicorn with our protocol and TLS context on 127.0.0.1; yields the port."""
    from visibility_server.peercert import PeerCertHttpToolsProtocol  # noqa: PLC0415 (see WhoAmI)

    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        http=PeerCertHttpToolsProtocol,
        ws="none",
        lifespan="off",
        ssl_context_factory=listener.ssl_context_factory,
        proxy_headers=False,
        server_header=False,
        access_log=False,
        log_level="warning",
        timeout_keep_alive=120,
        timeout_graceful_shutdown=2,
    )
    server = _EmbeddedServer(config)
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(TIMEOUT):
            while not server.started:
                if task.done():
                    task.result()  # raises what stopped the server
                    raise RuntimeError("uvicorn exited before it started")
                await asyncio.sleep(0.01)
        port: int = server.servers[0].sockets[0].getsockname()[1]
        yield port
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


def client_context(
    trust: CertifiedKey,
    identity: CertifiedKey | None = None,
    *,
    maximum_version: ssl.TLSVersion | None = None,
) -> ssl.SSLContext:
    """A verifying client context trusting `trust`, presenting `identity` if given."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(cadata=trust.cert_pem.decode())
    # Like kube-apiserver's client-go transport.
    context.set_alpn_protocols(["h2", "http/1.1"])
    if maximum_version is not None:
        context.maximum_version = maximum_version
    if identity is not None:
        with tempfile.TemporaryDirectory() as tmp:
            cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            cert.write_bytes(identity.cert_pem)
            key.write_bytes(identity.key_pem)
            context.load_cert_chain(cert, key)
    return context


class TLSConnection(http.client.HTTPConnection):
    """HTTPS to 127.0.0.1 with a chosen SNI: the Service name, as kube-apiserver sends it,
    or `127.0.0.1`, for which Python sends no SNI at all."""

    def __init__(self, port: int, context: ssl.SSLContext, server_hostname: str) -> None:
        super().__init__("127.0.0.1", port, timeout=TIMEOUT)
        self._tls_context = context
        self._server_hostname = server_hostname
        self.server_cert: bytes | None = None

    def connect(self) -> None:
        super().connect()
        self.sock = self._tls_context.wrap_socket(self.sock, server_hostname=self._server_hostname)
        self.server_cert = self.sock.getpeercert(binary_form=True)

    def call(self, headers: Sequence[tuple[str, str]] = ()) -> tuple[int, dict[str, Any]]:
        """GET /whoami with these header lines (repeated names stay separate lines)."""
        self.putrequest("GET", "/whoami")
        for name, value in headers:
            self.putheader(name, value)
        self.endheaders()
        response = self.getresponse()
        return response.status, json.loads(response.read())


def _call_once(
    port: int,
    context: ssl.SSLContext,
    server_hostname: str,
    headers: Sequence[tuple[str, str]],
) -> tuple[int, dict[str, Any]]:
    connection = TLSConnection(port, context, server_hostname)
    try:
        return connection.call(headers)
    finally:
        connection.close()


async def call(
    port: int,
    context: ssl.SSLContext,
    headers: Sequence[tuple[str, str]] = (),
    *,
    server_hostname: str = SERVICE_SAN,
) -> tuple[int, dict[str, Any]]:
    """One request on a new connection, from a thread; bounded by the socket timeout."""
    async with asyncio.timeout(TIMEOUT * 2):
        return await asyncio.to_thread(_call_once, port, context, server_hostname, headers)


async def in_thread(function: Callable[[], Any]) -> Any:
    async with asyncio.timeout(TIMEOUT * 2):
        return await asyncio.to_thread(function)


def refused(error: BaseException) -> bool:
    """Whether a client error is the server refusing the handshake. With TLS 1.3 the
    client finishes its side first, so the server's alert can surface on the first read or
    as a reset instead of in `do_handshake`."""
    return isinstance(error, ssl.SSLError | ConnectionError | socket.timeout) and not isinstance(
        error, ssl.SSLCertVerificationError
    )
