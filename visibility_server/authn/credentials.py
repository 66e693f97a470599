"""Building :class:`RequestCredentials` from what the server received: the peer
certificate and the raw header lines."""

from __future__ import annotations

from collections.abc import Iterable

from visibility_server.authn.interface import RequestCredentials

_WHITESPACE = " \t\r\n\v\f"


def parse_bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` value, or None.

    Mirrors k8s.io/apiserver's bearertoken authenticator: the scheme is case-insensitive,
    the value is split on single spaces, and an empty token (`Bearer  x`, two spaces) is no
    token at all rather than an error.
    """
    if authorization is None:
        return None
    parts = authorization.strip(_WHITESPACE).split(" ", 2)
    if len(parts) < 2 or parts[0].lower() != "bearer":
        return None
    return parts[1] or None


def credentials_from_headers(
    peer_cert_der: bytes | None, raw_headers: Iterable[tuple[bytes, bytes]]
) -> RequestCredentials:
    """Header lines as received (ASGI: bytes, one pair per line) → credentials.

    latin-1 maps every byte to one character, so no header can fail to decode and the
    original bytes stay recoverable; names are lower-cased whatever the server did.
    """
    headers = tuple(
        (name.decode("latin-1").lower(), value.decode("latin-1")) for name, value in raw_headers
    )
    # Go's Header.Get: the first Authorization line decides.
    authorization = next((value for name, value in headers if name == "authorization"), None)
    return RequestCredentials(
        peer_cert_der=peer_cert_der,
        headers=headers,
        bearer_token=parse_bearer_token(authorization),
    )


__all__ = ["credentials_from_headers", "parse_bearer_token"]
