"""What the authenticator chain sees of a request (docs/visibility-api.md#errors,
docs/cluster.md#authentication).

The TLS listener's protocol puts the client certificate (DER, or None) in the ASGI
scope under `extensions["queuescope.peer_cert"]`; the bearer token is read the way
k8s.io/apiserver reads it: the first `Authorization` header, trimmed, split on single
spaces, scheme `bearer` in any case, an empty token meaning "no token".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from starlette.types import Scope

from visibility_server.authn.interface import RequestCredentials

PEER_CERT_EXTENSION: Final = "queuescope.peer_cert"
IMPERSONATE_PREFIX: Final = "impersonate-"


def decode_headers(scope: Scope) -> list[tuple[str, str]]:
    """Every header line of the scope, names lower-cased, latin-1, in order."""
    raw: Sequence[tuple[bytes, bytes]] = scope.get("headers", ())
    return [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in raw]


def peer_certificate(scope: Scope) -> bytes | None:
    extensions = scope.get("extensions") or {}
    der = extensions.get(PEER_CERT_EXTENSION)
    return der if isinstance(der, bytes) and der else None


def bearer_token(headers: Sequence[tuple[str, str]]) -> str | None:
    for name, value in headers:
        if name != "authorization":
            continue
        parts = value.strip().split(" ", 2)
        if len(parts) < 2 or parts[0].lower() != "bearer" or not parts[1]:
            return None
        return parts[1]
    return None


def request_credentials(
    peer_cert: bytes | None, headers: Sequence[tuple[str, str]]
) -> RequestCredentials:
    return RequestCredentials(
        peer_cert_der=peer_cert,
        headers=tuple(headers),
        bearer_token=bearer_token(headers),
    )


def has_impersonation(headers: Sequence[tuple[str, str]]) -> bool:
    """kube-apiserver resolves impersonation and strips these before proxying, so on
    our side they only arrive on direct requests, which we refuse."""
    return any(name.startswith(IMPERSONATE_PREFIX) for name, _ in headers)
