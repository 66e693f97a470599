"""A small JSON REST client configured by a kubernetes-asyncio `ApiClient`.

kubernetes-asyncio's generated methods deserialize into its own model classes and its
`Watch` helper hides the 410 and bookmark details we need. Its generic `call_api` is
slow on a hot path: every request deep-copies the body (`sanitize_for_serialization`),
and its aiohttp session has `trust_env=True`, which sends each request through a thread
to read proxy variables and `~/.netrc` (a quarter of the loop's time in the
cluster-sync benchmark). So the runtime keeps the ApiClient's configuration (server,
CA, client certificate) and credentials (`update_params_for_auth`, which also runs the
token refresh hook), and sends plain JSON (orjson) on its own keep-alive session.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from kubernetes_asyncio.client import ApiClient

from scheduler.kubeapi.errors import Json, KubeError

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 30.0


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
        api: ApiClient,
        *,
        refresh_credentials: Callable[[], Awaitable[None]] | None = None,
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

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | aiohttp.ClientTimeout | None = None,
    ) -> aiohttp.ClientResponse:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        await self.api.update_params_for_auth(headers, [], ["BearerToken"])
        cfg = self.api.configuration
        if not isinstance(timeout, aiohttp.ClientTimeout):
            timeout = aiohttp.ClientTimeout(total=timeout if timeout is not None else self.timeout)
        try:
            response = await self.session().request(
                method,
                f"{cfg.host}{path}",
                params=dict(query) if query else None,
                data=orjson.dumps(body) if body is not None else None,
                headers=headers,
                timeout=timeout,
                server_hostname=cfg.tls_server_name or None,
            )
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            raise KubeError(0, f"{type(err).__name__}: {err}") from err
        return response

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> Json:
        """One request; the decoded JSON body, or KubeError."""
        for attempt in (0, 1):
            response = await self._send(
                method, path, query=query, body=body, content_type=content_type, timeout=timeout
            )
            try:
                raw = await response.read()
            except (aiohttp.ClientError, TimeoutError, OSError) as err:
                raise KubeError(0, f"{type(err).__name__}: {err}") from err
            finally:
                response.release()
            data = _decode(raw)
            if response.status == 401 and attempt == 0 and self._refresh is not None:
                await self._refresh()
                continue
            if not 200 <= response.status < 300:
                raise KubeError(response.status, response.reason or "", data)
            return data
        raise AssertionError("unreachable")

    async def get(self, path: str, query: Mapping[str, str] | None = None) -> Json:
        return await self.request("GET", path, query=query)

    async def create(self, path: str, body: Json) -> Json:
        return await self.request("POST", path, body=body)

    async def replace(self, path: str, body: Json) -> Json:
        return await self.request("PUT", path, body=body)

    async def merge_patch(self, path: str, patch: Json) -> Json:
        return await self.request(
            "PATCH", path, body=patch, content_type="application/merge-patch+json"
        )

    async def delete(self, path: str) -> Json:
        return await self.request("DELETE", path)

    async def watch(
        self, path: str, query: Mapping[str, str], *, read_timeout: float
    ) -> AsyncIterator[WatchEvent]:
        """Stream watch events; a silent connection longer than `read_timeout` raises
        KubeError(0) (dead connections otherwise hang forever)."""
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=read_timeout)
        response = await self._send("GET", path, query={**query, "watch": "true"}, timeout=timeout)
        try:
            if response.status == 401 and self._refresh is not None:
                await self._refresh()
            if not 200 <= response.status < 300:
                raise KubeError(
                    response.status, response.reason or "", _decode(await response.read())
                )
            while True:
                try:
                    line = await response.content.readline()
                except (aiohttp.ClientError, aiohttp.http_exceptions.HttpProcessingError,
                        ValueError, TimeoutError, OSError) as err:  # fmt: skip
                    # HttpProcessingError: e.g. LineTooLong for an event above the buffer.
                    raise KubeError(0, f"watch interrupted: {type(err).__name__}: {err}") from err
                if not line:
                    return
                if not line.strip():
                    continue
                event = _decode(line)
                kind = event.get("type")
                obj = event.get("object")
                if isinstance(kind, str) and isinstance(obj, dict):
                    yield WatchEvent(kind, obj)
        finally:
            # Close, not release: a half-read stream must not go back to the pool.
            response.close()


def _decode(raw: bytes) -> Json:
    if not raw:
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {"message": raw[:200].decode(errors="replace")}
    return value if isinstance(value, dict) else {"value": value}


# KubeError is re-exported: the cluster-mode modules take the client and its error from here.
__all__ = ["DEFAULT_TIMEOUT", "Json", "KubeError", "KubeRest", "WatchEvent"]
