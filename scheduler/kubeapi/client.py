"""The one REST client of kube-apiserver, configured by a kubernetes-asyncio `ApiClient`
(or by `credentials.PlainApi`, which gives the same for the common kubeconfigs).

kubernetes-asyncio's generated methods deserialize into its own model classes and its
`Watch` helper hides the 410 and bookmark details we need. Its generic `call_api` is
slow on a hot path: every request deep-copies the body (`sanitize_for_serialization`),
and its aiohttp session has `trust_env=True`, which sends each request through a thread
to read proxy variables and `~/.netrc` (a quarter of the loop's time in the
cluster-sync benchmark). So we keep the ApiClient's configuration (server, CA, client
certificate) and credentials (`update_params_for_auth`, which also runs the token
refresh hook), and send plain JSON (orjson) on our own keep-alive session.

Two levels: `exchange` and `lines` hand back whatever kube-apiserver answered (the
visibility server's outcome rules read every status themselves); `request`, the verbs
and `watch` turn a non-2xx answer into `KubeError` and re-read the token once after a
401 (cluster mode). No answer at all is `KubeError` with status 0 at both levels, and
nothing here logs a request or response body: a TokenReview carries a bearer token
both ways.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Final, Protocol

import aiohttp
import orjson

from scheduler.kubeapi.errors import Json, KubeError

DEFAULT_TIMEOUT: Final = 30.0
CONNECT_TIMEOUT: Final = 10.0
JSON: Final = "application/json"
MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"

Query = Mapping[str, str] | Sequence[tuple[str, str]]
# "Re-read your token now": awaited after a 401 before the one retry.
CredentialRefresher = Callable[[], Awaitable[None]]


class ApiCredentials(Protocol):
    """What is read of a kubernetes-asyncio `ApiClient`: its `configuration` (`host`,
    `ssl_ca_cert`, `cert_file`, `key_file`, `verify_ssl`, `tls_server_name`) and the
    auth header it adds. Importing kubernetes-asyncio is left to whoever makes one."""

    configuration: Any

    async def update_params_for_auth(
        self, headers: dict[str, Any], queries: list[Any], auth_settings: list[str]
    ) -> None: ...

    async def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Call:
    """One request: `timeout` (seconds for the whole exchange) None means the client's."""

    method: str
    path: str
    query: Query = ()
    body: Any = None
    content_type: str = JSON
    timeout: float | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """What kube-apiserver answered, whatever the status. `reason` is the HTTP reason
    phrase as sent ("" means the standard one)."""

    status: int
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    reason: str = ""

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        """The decoded body; None when it is not JSON."""
        try:
            return orjson.loads(self.body)
        except orjson.JSONDecodeError:
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
        reason = self.reason
        if not reason:
            try:
                reason = HTTPStatus(self.status).phrase
            except ValueError:
                reason = ""
        return KubeError(self.status, reason, decode(self.body))


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
    object: Json


class KubeRest:
    """GET/POST/PUT/PATCH/DELETE and streaming watches, JSON in and out.

    `refresh_credentials` is awaited once after a 401 before the request is retried:
    bound ServiceAccount tokens rotate, and a client that cached the old one would fail
    for good (docs/operations.md#troubleshooting).
    """

    def __init__(
        self,
        api: ApiCredentials,
        *,
        refresh_credentials: CredentialRefresher | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.api = api
        self._refresh = refresh_credentials
        self.timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    def _ssl_context(self) -> ssl.SSLContext:
        cfg = self.api.configuration
        context = ssl.create_default_context(cafile=cfg.ssl_ca_cert)
        if cfg.cert_file:
            context.load_cert_chain(cfg.cert_file, keyfile=cfg.key_file)
        if not cfg.verify_ssl:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=32, ssl=self._ssl_context()),
                trust_env=False,
                read_bufsize=2**21,  # etcd's object limit is 1.5 MiB
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def _send(self, call: Call, timeout: aiohttp.ClientTimeout) -> aiohttp.ClientResponse:
        headers = {"Accept": JSON, "Content-Type": call.content_type}
        await self.api.update_params_for_auth(headers, [], ["BearerToken"])
        cfg = self.api.configuration
        query = call.query.items() if isinstance(call.query, Mapping) else call.query
        try:
            return await self.session().request(
                call.method,
                f"{cfg.host}{call.path}",
                params=list(query) or None,
                data=orjson.dumps(call.body) if call.body is not None else None,
                headers=headers,
                timeout=timeout,
                server_hostname=cfg.tls_server_name or None,
            )
        except (aiohttp.ClientError, OSError) as err:
            raise KubeError(0, f"cannot reach kube-apiserver: {_describe(err)}") from err

    async def exchange(self, call: Call) -> Reply:
        """One request and its whole answer, whatever its status; KubeError (status 0)
        when there is none within the timeout."""
        seconds = call.timeout if call.timeout is not None else self.timeout
        try:
            async with asyncio.timeout(seconds):
                response = await self._send(call, aiohttp.ClientTimeout(total=None))
                try:
                    raw = await response.read()
                except (aiohttp.ClientError, OSError) as err:
                    raise KubeError(0, f"answer interrupted: {_describe(err)}") from err
                finally:
                    response.release()
        except TimeoutError as err:
            raise KubeError(0, f"kube-apiserver did not answer within {seconds:g}s") from err
        return Reply(response.status, raw, dict(response.headers), response.reason or "")

    async def request(self, call: Call) -> Json:
        """The decoded JSON body of a 2xx answer, else KubeError; a 401 re-reads the
        credentials and tries once more."""
        reply = await self.exchange(call)
        if reply.status == 401 and self._refresh is not None:
            await self._refresh()
            reply = await self.exchange(call)
        if not reply.ok:
            raise reply.error()
        return decode(reply.body)

    async def get(self, path: str, query: Query | None = None) -> Json:
        return await self.request(Call("GET", path, query or ()))

    async def create(self, path: str, body: Json) -> Json:
        return await self.request(Call("POST", path, body=body))

    async def replace(self, path: str, body: Json) -> Json:
        return await self.request(Call("PUT", path, body=body))

    async def merge_patch(self, path: str, patch: Json) -> Json:
        return await self.request(Call("PATCH", path, body=patch, content_type=MERGE_PATCH))

    async def strategic_merge_patch(self, path: str, patch: Json) -> Json:
        """A strategic merge patch (built-in kinds only): lists merge by their keys, so a
        Pod condition is added beside the kubelet's instead of replacing them."""
        return await self.request(
            Call("PATCH", path, body=patch, content_type=STRATEGIC_MERGE_PATCH)
        )

    async def delete(self, path: str, options: Json | None = None) -> Json:
        """`options`: a DeleteOptions body (propagation policy, preconditions)."""
        return await self.request(Call("DELETE", path, body=options))

    async def lines(self, path: str, query: Query, *, read_timeout: float) -> AsyncIterator[bytes]:
        """`?watch=true` on `path`: each non-empty line until kube-apiserver ends the
        stream. KubeError with its status when it refuses the watch, with status 0 when
        the connection fails or stays silent for `read_timeout` seconds (dead
        connections otherwise hang forever)."""
        pairs = query.items() if isinstance(query, Mapping) else query
        call = Call("GET", path, [*pairs, ("watch", "true")])
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=CONNECT_TIMEOUT, sock_read=read_timeout
        )
        response = await self._send(call, timeout)
        try:
            if not 200 <= response.status < 300:
                raw = await response.read()
                raise Reply(response.status, raw, reason=response.reason or "").error()
            while True:
                try:
                    line = await response.content.readline()
                except (aiohttp.ClientError, aiohttp.http_exceptions.HttpProcessingError,
                        ValueError, TimeoutError, OSError) as err:  # fmt: skip
                    # HttpProcessingError: e.g. LineTooLong for an event above the buffer.
                    raise KubeError(0, f"watch interrupted: {_describe(err)}") from err
                if not line:
                    return
                if line.strip():
                    yield line
        finally:
            # Close, not release: a half-read stream must not go back to the pool.
            response.close()

    async def watch(
        self, path: str, query: Query, *, read_timeout: float
    ) -> AsyncIterator[WatchEvent]:
        """The events of `lines`; lines that are not an event are skipped. A refused
        watch re-reads the credentials after a 401 (for the next one) and raises."""
        try:
            async for line in self.lines(path, query, read_timeout=read_timeout):
                event = decode(line)
                kind = event.get("type")
                obj = event.get("object")
                if isinstance(kind, str) and isinstance(obj, dict):
                    yield WatchEvent(kind, obj)
        except KubeError as err:
            if err.status == 401 and self._refresh is not None:
                await self._refresh()
            raise


def decode(raw: bytes) -> Json:
    """A JSON object; other JSON under "value", not JSON as a short "message"."""
    if not raw:
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {"message": raw[:200].decode(errors="replace")}
    return value if isinstance(value, dict) else {"value": value}


def _describe(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__


__all__ = [
    "DEFAULT_TIMEOUT",
    "ApiCredentials",
    "Call",
    "CredentialRefresher",
    "KubeRest",
    "Query",
    "Reply",
    "WatchEvent",
    "decode",
]
