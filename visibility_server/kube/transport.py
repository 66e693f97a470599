"""How the delegated-auth clients talk to kube-apiserver.

`KubeTransport` is the small seam they use: one JSON request (the client's `Call`, with a
deadline), and a watch stream of decoded events. `RestTransport` implements it on
`KubeRest`, the client cluster mode uses too (scheduler/kubeapi); unit tests pass fakes.
Connection failures and timeouts come out as `KubeError` with status 0, whatever aiohttp
raised, and nothing here logs a request or response body: a TokenReview carries a bearer
token both ways.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

from scheduler.kubeapi.client import Call, CredentialRefresher, KubeRest, Reply
from scheduler.kubeapi.errors import KubeError

Query = Sequence[tuple[str, str]]


class KubeTransport(Protocol):
    async def request(self, call: Call) -> Reply:
        """Any HTTP status comes back as a response; KubeError (status 0) when there is
        none within `call.timeout` seconds (every delegated-auth call sets one)."""
        ...

    def watch(self, path: str, *, query: Query, read_timeout: float) -> AsyncIterator[Any]:
        """`?watch=true` on `path`: the decoded events, until kube-apiserver ends the
        stream. KubeError with its status when it refuses the watch, with status 0 when the
        connection fails or stays silent for `read_timeout` seconds."""
        ...


class RestTransport:
    """`KubeTransport` on the shared client `KubeRest` (its server, CA, credentials and
    connection pool come from a kubernetes_asyncio `ApiClient`)."""

    def __init__(self, rest: KubeRest) -> None:
        self._rest = rest

    async def request(self, call: Call) -> Reply:
        return await self._rest.exchange(call)

    async def watch(self, path: str, *, query: Query, read_timeout: float) -> AsyncIterator[Any]:
        async for line in self._rest.lines(path, query, read_timeout=read_timeout):
            yield _event(line)


def as_transport(api: KubeRest | KubeTransport) -> KubeTransport:
    """The transport over a `KubeRest`, or `api` itself when it already is one."""
    if isinstance(api, KubeRest):
        return RestTransport(api)
    return api


def _event(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        raise KubeError(0, "the watch sent a line that is not JSON") from None


__all__ = [
    "CredentialRefresher",  # re-exported: the callers' type of a credential re-read
    "KubeTransport",
    "Query",
    "RestTransport",
    "as_transport",
]
