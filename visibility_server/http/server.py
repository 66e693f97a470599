"""The request pipeline of the visibility server (visibility-api.md §1, §4, §5).

Checks run in the contract's order and the first failure decides:

    authentication 401/503 -> Impersonate-* 403 -> [dashboard paths: see dashboard/]
    -> authorization 403/500/503
    -> route 404 / method 405 -> Accept 406 -> query 400 -> in-flight 429
    -> initial sync 503 -> queue lookup 404 -> If-None-Match 304 (or long-poll)

Authorization comes before routing so that a forbidden caller cannot probe for paths
or queue names, and before the 304 decision so it cannot learn whether a queue
changed. A data request reads the snapshot reference once and answers from it alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import functools
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final
from urllib.parse import unquote

from starlette.types import Message, Receive, Scope, Send

from scheduler.runtime.snapshot import Snapshot
from visibility_server.authn.interface import (
    AuthenticationFailed,
    AuthenticationUnavailable,
    Authenticator,
)
from visibility_server.authz.attributes import Attributes, request_attributes
from visibility_server.authz.decision import Decision
from visibility_server.authz.identity import UserInfo
from visibility_server.authz.messages import forbidden_details, forbidden_message
from visibility_server.authz.pipeline import Authorizer
from visibility_server.dashboard import Dashboard, DashboardRequest, is_dashboard_path
from visibility_server.http import status
from visibility_server.http.answers import Answer, Answers
from visibility_server.http.asgi import Headers, send_body, send_chunks, wait_for_disconnect
from visibility_server.http.credentials import (
    decode_headers,
    has_impersonation,
    peer_certificate,
    request_credentials,
)
from visibility_server.http.documents import StaticDocuments
from visibility_server.http.encode import json_compact, json_pretty, to_yaml
from visibility_server.http.etag import none_match
from visibility_server.http.health import CONTENT_TYPE as HEALTH_CONTENT_TYPE
from visibility_server.http.health import Health
from visibility_server.http.longpoll import ChangeNotifier, Gate, wait_until_changed
from visibility_server.http.memo import RenderMemo
from visibility_server.http.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from visibility_server.http.metrics import HttpMetrics
from visibility_server.http.negotiation import (
    APIS_MEDIA,
    JSON_ONLY,
    OBJECT_MEDIA,
    SUMMARY_MEDIA,
    AcceptEntry,
    Media,
    error_media,
    negotiate,
    parse_accept,
    wants_pretty,
)
from visibility_server.http.position import (
    NotPendingLookup,
)
from visibility_server.http.query import (
    PageQuery,
    all_values,
    first_values,
    parse_include_object,
    parse_page,
    parse_wait_seconds,
)
from visibility_server.http.render import STREAM_ABOVE_ITEMS
from visibility_server.http.routes import Kind, Route, Router
from visibility_server.http.status import StatusError

log = logging.getLogger(__name__)

DATA_CACHE_CONTROL: Final = "private, no-cache"
ONE_YEAR_SECONDS: Final = 365 * 24 * 3600
UNEXPECTED_CAUSE: Final = "unexpected error while serving the request"

_STATIC_MEDIA: Final = {
    Kind.APIS: APIS_MEDIA,
    Kind.GROUP: OBJECT_MEDIA,
    Kind.VERSION: OBJECT_MEDIA,
    Kind.OPENAPI_V2: JSON_ONLY,
    Kind.OPENAPI_V3: JSON_ONLY,
    Kind.OPENAPI_V3_VERSION: JSON_ONLY,
    Kind.VERSION_INFO: JSON_ONLY,
}
# Conditional GET on static documents: `/apis` and OpenAPI only. `G/{v}` must always
# answer 200 with a body (the aggregator's legacy fallback treats anything else as a
# failure, and may send the `/apis` ETag it cached).
_STATIC_WITH_ETAG: Final = frozenset(
    {Kind.APIS, Kind.OPENAPI_V2, Kind.OPENAPI_V3, Kind.OPENAPI_V3_VERSION}
)


# Clients repeat the same few paths, queries and Accept headers; everything derived
# from them alone (decoded path, authorization attributes, route, query parameters) is
# remembered, in bounded memos, instead of re-parsed per request. Errors (400) are
# never remembered: the functions raise again.
_MEMO_SIZE: Final = 4096
_decoded_path = functools.lru_cache(maxsize=_MEMO_SIZE)(unquote)
_attributes = functools.lru_cache(maxsize=_MEMO_SIZE)(request_attributes)


@functools.lru_cache(maxsize=_MEMO_SIZE)
def _query_params(query_string: bytes) -> Mapping[str, str]:
    return MappingProxyType(first_values(query_string))


@functools.lru_cache(maxsize=_MEMO_SIZE)
def _page_query(query_string: bytes) -> PageQuery:
    return parse_page(_query_params(query_string))


@dataclass(slots=True)
class Request:
    """What the pipeline reads from the ASGI scope, decoded once."""

    method: str
    raw_path: str  # percent-encoded, as sent
    path: str  # percent-decoded once
    query_string: bytes
    headers: list[tuple[str, str]]
    params: Mapping[str, str]  # first value of each query parameter
    accept: tuple[AcceptEntry, ...] | None  # None: no Accept header at all
    pretty: bool
    peer_cert: bytes | None  # DER of the TLS client certificate, from the listener

    @property
    def head(self) -> bool:
        return self.method == "HEAD"

    def header_values(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k == name]

    @classmethod
    def of(cls, scope: Scope) -> Request:
        raw = scope.get("raw_path")
        raw_path = raw.decode("latin-1") if isinstance(raw, bytes) else str(scope.get("path", "/"))
        raw_path = raw_path.partition("?")[0]
        headers = decode_headers(scope)
        query_string = scope.get("query_string", b"")
        params = _query_params(query_string)
        accept_lines = [v for k, v in headers if k == "accept" and v.strip()]
        user_agent = next((v for k, v in headers if k == "user-agent"), "")
        return cls(
            method=str(scope.get("method", "GET")).upper(),
            raw_path=raw_path,
            path=_decoded_path(raw_path),
            query_string=query_string,
            headers=headers,
            params=params,
            accept=parse_accept(accept_lines) if accept_lines else None,
            pretty=wants_pretty(params.get("pretty"), user_agent),
            peer_cert=peer_certificate(scope),
        )


@dataclass(slots=True)
class _Outcome:
    endpoint: str = "unknown"
    version: str = ""
    code: int = 0
    started: bool = False


def _is_transient(exc: BaseException) -> bool:
    """Whether a backend failure is worth a 503 (retry) rather than a 500 (misconfiguration).

    Backends mark their errors with `transient = True` (SAR timeouts, connection
    errors, 429/5xx from kube-apiserver); plain timeouts and connection errors count too.
    """
    return getattr(exc, "transient", False) is True or isinstance(
        exc, TimeoutError | ConnectionError
    )


def _cause(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


@dataclass(slots=True)
class ServerConfig:
    snapshot: Callable[[], Snapshot]
    authenticator: Authenticator
    authorizer: Authorizer
    versions: tuple[str, ...]
    pendingposition: bool
    longpoll: bool
    documents: StaticDocuments
    health: Health
    metrics: HttpMetrics
    max_inflight: int
    max_waiters: int
    change_notifier: ChangeNotifier | None
    clock: Callable[[], float]
    not_pending: NotPendingLookup | None = None
    dashboard: bool = False  # serve the built-in dashboard under /dashboard
    router: Router = field(init=False)

    def __post_init__(self) -> None:
        self.router = Router(self.versions, pendingposition=self.pendingposition)


class VisibilityServer:
    """The ASGI application for `http` scopes."""

    def __init__(self, config: ServerConfig) -> None:
        self._c = config
        self._answers = Answers(config.snapshot, config.clock, config.not_pending)
        self._match = functools.lru_cache(maxsize=_MEMO_SIZE)(config.router.match)
        self._inflight = Gate(config.max_inflight)
        self._waiters = Gate(config.max_waiters)
        self._dashboard = (
            Dashboard(config.snapshot, config.clock, self.allowed, version=config.versions[0])
            if config.dashboard
            else None
        )

    @property
    def inflight(self) -> int:
        return self._inflight.count

    @property
    def waiters(self) -> int:
        return self._waiters.count

    @property
    def memo(self) -> RenderMemo:
        return self._answers.memo

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        outcome = _Outcome()

        async def tracking_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                outcome.started = True
                outcome.code = int(message["status"])
            await send(message)

        request = Request.of(scope)
        try:
            await self._serve(request, receive, tracking_send, outcome)
        except StatusError as error:
            await self._send_status(request, tracking_send, error)
        except Exception:
            log.exception("visibility request %s %s failed", request.method, request.raw_path)
            if not outcome.started:
                await self._send_status(
                    request, tracking_send, status.internal_error(UNEXPECTED_CAUSE)
                )
        finally:
            elapsed = time.perf_counter() - started
            self._c.metrics.observe(outcome.endpoint, outcome.version, outcome.code, elapsed)

    async def _send_status(self, request: Request, send: Send, error: StatusError) -> None:
        # 406 is always JSON: the aggregator's clean legacy fallback expects that.
        media = Media.JSON if error.code == 406 else error_media(request.accept)
        obj = error.body()
        if media is Media.YAML:
            body = to_yaml(obj)
        else:
            body = json_pretty(obj) if request.pretty else json_compact(obj)
        headers = [
            ("content-type", media.content_type),
            ("x-content-type-options", "nosniff"),
            *error.headers,
        ]
        await send_body(send, error.code, headers, body, head=request.head)

    # -- the pipeline ------------------------------------------------------------------

    async def _serve(
        self, request: Request, receive: Receive, send: Send, outcome: _Outcome
    ) -> None:
        user = await self._authenticate(request)
        if has_impersonation(request.headers):
            raise status.impersonation_forbidden()
        if self._dashboard is not None and is_dashboard_path(request.path):
            outcome.endpoint = "dashboard"
            await self._serve_dashboard(request, user, send)
            return
        attrs = _attributes(request.method, request.raw_path)
        await self._authorize(user, attrs)

        route = self._match(request.path)
        if route is None:
            raise status.path_not_found()
        outcome.endpoint = route.metric_endpoint
        outcome.version = route.version
        if request.method not in ("GET", "HEAD"):
            raise status.method_not_allowed()

        if route.kind.is_data:
            await self._data(route, request, receive, send)
        elif route.kind is Kind.HEALTH:
            await self._health(route, request, send)
        elif route.kind is Kind.METRICS:
            body = self._c.metrics.exposition()
            await send_body(
                send, 200, [("content-type", METRICS_CONTENT_TYPE)], body, head=request.head
            )
        else:
            await self._static(route, request, send)

    async def _authenticate(self, request: Request) -> UserInfo:
        credentials = request_credentials(request.peer_cert, request.headers)
        try:
            return await self._c.authenticator.authenticate(credentials)
        except AuthenticationFailed:
            raise status.unauthorized() from None
        except AuthenticationUnavailable as exc:
            raise status.authentication_unavailable(_cause(exc)) from None
        except Exception as exc:
            log.warning("authentication failed: %s", _cause(exc))
            raise status.internal_error(_cause(exc)) from None

    async def _decide(self, user: UserInfo, attrs: Attributes) -> Decision:
        try:
            return await self._c.authorizer.authorize(user, attrs)
        except Exception as exc:
            log.warning("authorization failed: %s", _cause(exc))
            if _is_transient(exc):
                raise status.authorization_unavailable(_cause(exc)) from None
            raise status.internal_error(_cause(exc)) from None

    async def allowed(self, user: UserInfo, attrs: Attributes) -> bool:
        """Whether `user` may do `attrs` (the dashboard filters with it); a failing
        backend raises the same 500/503 Status errors as a denied API request would."""
        return (await self._decide(user, attrs)).allowed

    async def _authorize(self, user: UserInfo, attrs: Attributes) -> None:
        decision = await self._decide(user, attrs)
        if not decision.allowed:
            message = forbidden_message(user, attrs, decision.reason)
            raise status.forbidden(message, forbidden_details(attrs))

    async def _serve_dashboard(self, request: Request, user: UserInfo, send: Send) -> None:
        assert self._dashboard is not None
        answer = await self._dashboard.answer(
            DashboardRequest(
                method=request.method,
                path=request.path,
                params=request.params,
                if_none_match=tuple(request.header_values("if-none-match")),
                user=user,
            )
        )
        head = request.head or answer.code == 304
        await send_body(send, answer.code, answer.headers, answer.body, head=head)

    # -- static documents, health, metrics ----------------------------------------------

    async def _static(self, route: Route, request: Request, send: Send) -> None:
        media = negotiate(request.accept, _STATIC_MEDIA[route.kind])
        if media is None:
            raise status.not_acceptable()
        doc = self._c.documents.get(route.kind, route.version, media, request.pretty)
        headers: list[tuple[str, str]] = [("content-type", doc.content_type)]
        if route.kind in (Kind.APIS, Kind.GROUP, Kind.VERSION, Kind.VERSION_INFO):
            headers.append(("vary", "Accept"))
        if route.kind is Kind.OPENAPI_V3_VERSION:
            headers.extend(self._openapi_v3_caching(route.version, request.params.get("hash")))
        if route.kind in _STATIC_WITH_ETAG:
            headers.append(("etag", doc.etag))
            if none_match(request.header_values("if-none-match"), doc.etag):
                # A 304 has no body, hence no Content-Type.
                await send_body(send, 304, headers[1:], b"", head=True)
                return
        await send_body(send, 200, headers, doc.body, head=request.head)

    def _openapi_v3_caching(self, version: str, requested_hash: str | None) -> Headers:
        """A matching `hash` may be cached for a year; anything else must revalidate.

        [DIFF] kube-openapi redirects (301) a stale hash to the current URL, which the
        aggregator turns into a 502; we answer 200 with the current document instead.
        """
        if (
            requested_hash is not None
            and requested_hash == self._c.documents.openapi_v3_hashes[version]
        ):
            expires = email.utils.formatdate(self._c.clock() + ONE_YEAR_SECONDS, usegmt=True)
            return [("cache-control", "public, immutable"), ("expires", expires)]
        return [("cache-control", "no-cache")]

    async def _health(self, route: Route, request: Request, send: Send) -> None:
        if route.check and not self._c.health.has_check(route.name, route.check):
            raise status.path_not_found()
        code, body = self._c.health.run(
            route.name,
            only=route.check,
            verbose="verbose" in request.params,
            exclude=all_values(request.query_string, "exclude"),
        )
        headers = [("content-type", HEALTH_CONTENT_TYPE), ("x-content-type-options", "nosniff")]
        await send_body(send, code, headers, body, head=request.head)

    # -- data endpoints -------------------------------------------------------------------

    async def _data(self, route: Route, request: Request, receive: Receive, send: Send) -> None:
        offered = OBJECT_MEDIA if route.kind is Kind.POSITION else SUMMARY_MEDIA
        media = negotiate(request.accept, offered)
        if media is None:
            raise status.not_acceptable()
        page = _page_query(request.query_string) if route.kind is not Kind.POSITION else PageQuery()
        wait = parse_wait_seconds(request.params) if self._c.longpoll else None
        include = parse_include_object(request.params) if media is Media.TABLE else ""

        if not self._inflight.try_enter():
            raise status.too_many_requests()
        try:
            answer = self._answers.answer(route, media, request.pretty, page, include)
            if_none_match = request.header_values("if-none-match")
            if answer.etag is not None and none_match(if_none_match, answer.etag):
                if wait is not None and self._c.change_notifier is not None:
                    answer = await self._long_poll(
                        route, request, receive, media, page, include, wait
                    )
                if answer.etag is not None and none_match(if_none_match, answer.etag):
                    headers = self._data_headers(answer, with_content_type=False)
                    await send_body(send, 304, headers, b"", head=True)
                    return
            await self._send_answer(request, send, answer)
        finally:
            self._inflight.leave()

    def _data_headers(
        self, answer: Answer, *, with_content_type: bool = True
    ) -> list[tuple[str, str]]:
        headers = [("cache-control", DATA_CACHE_CONTROL), ("vary", "Accept")]
        if with_content_type:
            headers.insert(0, ("content-type", answer.content_type))
        if answer.etag is not None:
            headers.append(("etag", answer.etag))
        return headers

    async def _send_answer(self, request: Request, send: Send, answer: Answer) -> None:
        headers = self._data_headers(answer)
        if answer.count > STREAM_ABOVE_ITEMS:
            await send_chunks(send, 200, headers, answer.chunks(), head=request.head)
        else:
            await send_body(send, 200, headers, b"".join(answer.chunks()), head=request.head)

    async def _long_poll(
        self,
        route: Route,
        request: Request,
        receive: Receive,
        media: Media,
        page: PageQuery,
        include: str,
        wait: int,
    ) -> Answer:
        """Hold a matching conditional GET until its ETag changes (§9.2).

        The in-flight slot is given back while waiting (a waiter costs nothing) and a
        waiter slot taken instead; the answer is re-evaluated on each new snapshot.
        """
        assert self._c.change_notifier is not None
        if not self._waiters.try_enter():
            raise status.too_many_requests()
        self._inflight.leave()
        if_none_match = request.header_values("if-none-match")

        def unchanged() -> bool:
            etag = self._answers.answer(route, media, request.pretty, page, include).etag
            return etag is not None and none_match(if_none_match, etag)

        disconnected = asyncio.ensure_future(wait_for_disconnect(receive))
        try:
            await wait_until_changed(
                self._c.change_notifier,
                wait,
                unchanged,
                disconnected,
                generation=lambda: self._c.snapshot().generation,
            )
        finally:
            self._waiters.leave()
            self._inflight.enter()
            if not disconnected.done():
                disconnected.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await disconnected
        # After the wait, answer from the newest snapshot (a 404 or 503 may win now).
        return self._answers.answer(route, media, request.pretty, page, include)
