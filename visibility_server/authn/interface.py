"""The seam between the HTTP app and the authenticator chain.

The app builds a :class:`RequestCredentials` from the connection and the headers and
asks an :class:`Authenticator` who the caller is. The outcome is a
:class:`~visibility_server.authz.identity.UserInfo` or one of the errors below, which
the app turns into a Kubernetes ``Status``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from visibility_server.authz.identity import UserInfo


@dataclass(frozen=True, slots=True)
class RequestCredentials:
    peer_cert_der: bytes | None  # the TLS client certificate (leaf), if one was presented
    headers: Sequence[tuple[str, str]]  # every header line, lower-case names, in order
    bearer_token: str | None  # from `Authorization: Bearer ...`, if any

    def values(self, name: str) -> list[str]:
        """Every value of a repeated header, one line = one value (no comma splitting)."""
        lowered = name.lower()
        return [v for k, v in self.headers if k == lowered]


class AuthenticationFailed(Exception):  # noqa: N818 (the name is the seam's API)
    """401 Unauthorized: an authenticator erred and none succeeded. The message says
    why; the server logs it (docs/operations.md#why-a-request-is-401)."""


class NoCredentials(AuthenticationFailed):
    """401 Unauthorized without an error: the request carried no credentials and
    anonymous requests are disabled. Not logged, as kube-apiserver does not log it."""


class AuthenticationUnavailable(Exception):  # noqa: N818
    """503 with Retry-After: the token reviewer could not be reached
    (docs/cluster.md#authenticator-chain)."""


class Authenticator(Protocol):
    async def authenticate(self, credentials: RequestCredentials) -> UserInfo:
        """Who is calling; raises AuthenticationFailed or AuthenticationUnavailable."""
        ...
