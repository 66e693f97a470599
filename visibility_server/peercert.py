"""The TLS client certificate in the ASGI scope (docs/cluster.md#tls-in-python).

uvicorn ≤ 0.54 does not expose the peer certificate to the app. This protocol subclass
reads it once per connection, right after the handshake, and wraps the app for that
connection so that every request scope carries it under a private extension key. It relies
on `HttpToolsProtocol.app` (set in `__init__`, read per request), a uvicorn internal, so
uvicorn is pinned to one minor and this module refuses to import with any other.

Websocket upgrades are handed to uvicorn's websocket protocol, which reads the config's app
and so would not carry the certificate; the server runs with `ws="none"`.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, ClassVar, Final, cast

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from visibility_server.authn.credentials import credentials_from_headers
from visibility_server.authn.interface import RequestCredentials

if TYPE_CHECKING:
    from uvicorn._types import ASGI3Application, ASGIReceiveCallable, ASGISendCallable, Scope

PEER_CERT_EXTENSION: Final = "queuescope.peer_cert"
SUPPORTED_UVICORN_MINOR: Final = (0, 54)


def uvicorn_version_problem(version: str) -> str | None:
    """Why `version` of uvicorn cannot be used with this module, or None."""
    parts = version.split(".")
    try:
        minor = (int(parts[0]), int(parts[1]))
    except (IndexError, ValueError):
        minor = None
    if minor == SUPPORTED_UVICORN_MINOR:
        return None
    wanted = ".".join(map(str, SUPPORTED_UVICORN_MINOR))
    return (
        f"uvicorn {version} is installed, but visibility_server.peercert subclasses uvicorn's "
        f"httptools protocol and reads its internal `app` attribute, checked against "
        f"uvicorn {wanted}.x only. Install uvicorn>={wanted},<0.{SUPPORTED_UVICORN_MINOR[1] + 1} "
        "or re-check the subclass against the new release and move the pin "
        "(see docs/cluster.md#tls-in-python, Python TLS specifics)."
    )


_PROBLEM = uvicorn_version_problem(uvicorn.__version__)
if _PROBLEM is not None:
    raise ImportError(_PROBLEM)


class PeerCertHttpToolsProtocol(HttpToolsProtocol):
    """`uvicorn.Config(http=PeerCertHttpToolsProtocol)`: httptools, plus the peer
    certificate in `scope["extensions"]["queuescope.peer_cert"]` (DER bytes or None)."""

    # Read by uvicorn when it builds a context itself; ours sets the same (listener.py).
    alpn_protocols: ClassVar[list[str]] = ["http/1.1"]

    def connection_made(  # type: ignore[override]
        self, transport: asyncio.Transport
    ) -> None:
        super().connection_made(transport)
        self.app = _with_peer_cert(self.app, peer_cert_der(transport))


def peer_cert_der(transport: asyncio.BaseTransport) -> bytes | None:
    """The DER client certificate of a TLS transport whose handshake is complete (which
    it is by `connection_made`); None for plain TCP or when the client sent none."""
    ssl_object = transport.get_extra_info("ssl_object")
    if not isinstance(ssl_object, ssl.SSLObject | ssl.SSLSocket):
        return None
    try:
        return ssl_object.getpeercert(binary_form=True)
    except ValueError:  # handshake not done: no certificate to speak of
        return None


def _with_peer_cert(app: ASGI3Application, der: bytes | None) -> ASGI3Application:
    async def app_with_peer_cert(
        scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        if scope["type"] != "lifespan":
            mutable = cast("MutableMapping[str, Any]", scope)
            # A new dict rather than an update: a dict uvicorn put there could be shared.
            mutable["extensions"] = {**(mutable.get("extensions") or {}), PEER_CERT_EXTENSION: der}
        await app(scope, receive, send)

    return app_with_peer_cert


def peer_cert_from_scope(scope: Mapping[str, Any]) -> bytes | None:
    """The peer certificate our protocol recorded; None when absent (or not our server)."""
    extensions = scope.get("extensions")
    if not isinstance(extensions, Mapping):
        return None
    der = extensions.get(PEER_CERT_EXTENSION)
    return der if isinstance(der, bytes) else None


def credentials_from_scope(scope: Mapping[str, Any]) -> RequestCredentials:
    """What the authenticator chain needs from an ASGI request scope."""
    return credentials_from_headers(peer_cert_from_scope(scope), scope.get("headers", ()))


__all__ = [
    "PEER_CERT_EXTENSION",
    "SUPPORTED_UVICORN_MINOR",
    "PeerCertHttpToolsProtocol",
    "credentials_from_scope",
    "peer_cert_der",
    "peer_cert_from_scope",
    "uvicorn_version_problem",
]
