"""How the delegated-auth clients talk to kube-apiserver.

`KubeTransport` is the small seam they use: one JSON request with a deadline, and a watch
stream of decoded events. `ApiClientTransport` implements it on a
`kubernetes_asyncio.client.ApiClient` (whose configuration carries the server, the CA and
our credentials); unit tests pass fakes. Connection failures and timeouts come out as
`KubeError` with status 0 (the error cluster mode uses too), whatever aiohttp raised, and
nothing here logs a request or response body: a TokenReview carries a bearer token both
ways.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Final, Protocol

import aiohttp
from kubernetes_asyncio.client import ApiClient

from scheduler.kubeapi.errors import KubeError

Query = Sequence[tuple[str, str]]
# "Re-read your token now": what a review does after a 401 before its one retry
# (docs/cluster.md#decision-pipeline).
CredentialRefresher = Callable[[], Awaitable[None]]

_JSON_HEADERS: Final = {"Accept": "application/json", "Content-Type": "application/json"}
_CONNECT_TIMEOUT: Final = 10.0


@dataclass(frozen=True, slots=True)
class KubeResponse:
    status: int
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        """The decoded body; None when it is not JSON."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def message(self) -> str:
        """The `message` of a `Status` body, else a short rendering of the body."""
        doc = self.json()
        if isinstance(doc, dict) and isinstance(doc.get("message"), str):
            return str(doc["message"])
        text = self.body.decode("utf-8", "replace").strip()
        return text[:200] if text else "(empty body)"

    def error(self) -> KubeError:
        """This answer as the error of a call that needed a 2xx."""
        doc = self.json()
        body = doc if isinstance(doc, dict) else {"message": self.message()}
        try:
            reason = HTTPStatus(self.status).phrase
        except ValueError:
            reason = ""
        return KubeError(self.status, reason, body)


class KubeTransport(Protocol):
    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Query = (),
        body: Mapping[str, Any] | None = None,
        timeout: float,
    ) -> KubeResponse:
        """Any HTTP status comes back as a response; KubeError (status 0) when there is
        none within `timeout` seconds."""
        ...

    def watch(self, path: str, *, query: Query, read_timeout: float) -> AsyncIterator[Any]:
        """`?watch=true` on `path`: the decoded events, until kube-apiserver ends the
        stream. KubeError with its status when it refuses the watch, with status 0 when the
        connection fails or stays silent for `read_timeout` seconds."""
        ...


class ApiClientTransport:
    """`KubeTransport` on a kubernetes_asyncio `ApiClient` (its server, CA, credentials)."""

    def __init__(self, api_client: ApiClient) -> None:
        self._api = api_client

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Query = (),
        body: Mapping[str, Any] | None = None,
        timeout: float,
    ) -> KubeResponse:
        try:
            async with asyncio.timeout(timeout):
                response = await self._call(method, path, query, body, None)
                try:
                    data = await response.read()
                finally:
                    response.release()
        except TimeoutError:
            raise _no_answer(f"kube-apiserver did not answer within {timeout:g}s") from None
        except (aiohttp.ClientError, OSError) as err:
            raise _no_answer(f"cannot reach kube-apiserver: {_describe(err)}") from None
        return KubeResponse(response.status, data, dict(response.headers))

    async def watch(self, path: str, *, query: Query, read_timeout: float) -> AsyncIterator[Any]:
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=_CONNECT_TIMEOUT, sock_read=read_timeout
        )
        try:
            response = await self._call("GET", path, [*query, ("watch", "true")], None, timeout)
        except (aiohttp.ClientError, OSError, TimeoutError) as err:
            raise _no_answer(f"cannot reach kube-apiserver: {_describe(err)}") from None
        try:
            if not 200 <= response.status < 300:
                data = await response.read()
                raise KubeResponse(response.status, data, dict(response.headers)).error()
            async for line in response.content:
                if line.strip():
                    yield _event(line)
        except (aiohttp.ClientError, OSError, TimeoutError) as err:
            raise _no_answer(f"watch interrupted: {_describe(err)}") from None
        finally:
            response.release()

    async def _call(
        self,
        method: str,
        path: str,
        query: Query,
        body: Mapping[str, Any] | None,
        timeout: aiohttp.ClientTimeout | None,
    ) -> aiohttp.ClientResponse:
        # `_preload_content=False`: the raw aiohttp response, whatever its status, with
        # nothing decoded into models and no body logged by the client.
        response: aiohttp.ClientResponse = await self._api.call_api(
            path,
            method,
            query_params=list(query),
            header_params=dict(_JSON_HEADERS),
            body=dict(body) if body is not None else None,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=timeout,
        )
        return response


def as_transport(api: ApiClient | KubeTransport) -> KubeTransport:
    """The transport for an `ApiClient`, or `api` itself when it already is one."""
    if isinstance(api, ApiClient):
        return ApiClientTransport(api)
    return api


def _event(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        raise _no_answer("the watch sent a line that is not JSON") from None


def _no_answer(why: str) -> KubeError:
    return KubeError(0, why)


def _describe(err: BaseException) -> str:
    return str(err) or type(err).__name__


__all__ = [
    "ApiClientTransport",
    "CredentialRefresher",
    "KubeResponse",
    "KubeTransport",
    "Query",
    "as_transport",
]
