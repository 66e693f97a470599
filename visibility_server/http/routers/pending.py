"""The data endpoints: pending workloads of a ClusterQueue or a LocalQueue, and the
`pendingposition` extension of one Workload (docs/visibility-api.md, "Pending
workloads endpoints" and "Extensions").

After routing: Accept 406 -> query 400 -> in-flight 429 -> (answers) initial sync 503 ->
queue lookup 404 -> If-None-Match 304 (or the long poll). A data answer holds an
in-flight slot until it has been written (the response gives it back); a long-poll
waiter gives it back while it waits and holds a waiter slot instead.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Final

from starlette.requests import Request
from starlette.responses import Response

from visibility_server.http import status
from visibility_server.http.answers import Answer, Answers
from visibility_server.http.app_state import VisibilityServer
from visibility_server.http.etag import none_match
from visibility_server.http.longpoll import wait_until_changed
from visibility_server.http.negotiation import OBJECT_MEDIA, SUMMARY_MEDIA, Media, negotiate
from visibility_server.http.query import PageQuery, parse_include_object, parse_wait_seconds
from visibility_server.http.render import STREAM_ABOVE_ITEMS
from visibility_server.http.requestinfo import RequestInfo, info_of, page_query
from visibility_server.http.responses import BytesResponse, ChunkedResponse, wait_for_disconnect
from visibility_server.http.routers.discovery import GROUP_PATH
from visibility_server.http.routers.table import Endpoint, RouteTable
from visibility_server.http.routes import Kind, Route

DATA_CACHE_CONTROL: Final = "private, no-cache"


def _data_headers(answer: Answer, *, with_content_type: bool = True) -> list[tuple[str, str]]:
    headers = [("cache-control", DATA_CACHE_CONTROL), ("vary", "Accept")]
    if with_content_type:
        headers.insert(0, ("content-type", answer.content_type))
    if answer.etag is not None:
        headers.append(("etag", answer.etag))
    return headers


@dataclass(frozen=True, slots=True)
class _Asked:
    """One data request, decided up to its answer: route, representation, paging."""

    request: Request
    info: RequestInfo
    route: Route
    media: Media
    page: PageQuery
    include: str

    def answer(self, answers: Answers) -> Answer:
        return answers.answer(self.route, self.media, self.info.pretty, self.page, self.include)


class _DataEndpoint:
    """One data route of one API version; `Route`s are made from the path parameters."""

    def __init__(self, server: VisibilityServer, kind: Kind, version: str) -> None:
        self._server = server
        self._kind = kind
        self._version = version
        self._offered = OBJECT_MEDIA if kind is Kind.POSITION else SUMMARY_MEDIA
        self._longpoll = server.config.longpoll

    async def serve(self, request: Request) -> Response:
        params = request.path_params
        route = Route(self._kind, self._version, params.get("namespace", ""), params["name"])
        info = info_of(request.scope)
        media = negotiate(info.accept, self._offered)
        if media is None:
            raise status.not_acceptable()
        position = route.kind is Kind.POSITION
        page = PageQuery() if position else page_query(info.query_string)
        wait = parse_wait_seconds(info.params) if self._longpoll else None
        include = parse_include_object(info.params) if media is Media.TABLE else ""

        inflight = self._server.inflight_gate
        if not inflight.try_enter():
            raise status.too_many_requests()
        try:
            return await self._respond(_Asked(request, info, route, media, page, include), wait)
        except BaseException:
            inflight.leave()
            raise

    async def _respond(self, asked: _Asked, wait: int | None) -> Response:
        """The answer, which gives the in-flight slot back once written."""
        leave = self._server.inflight_gate.leave
        answer = asked.answer(self._server.answers)
        if_none_match = asked.info.header_values("if-none-match")
        if answer.etag is not None and none_match(if_none_match, answer.etag):
            if wait is not None and self._server.config.change_notifier is not None:
                answer = await self._long_poll(asked, wait)
            if answer.etag is not None and none_match(if_none_match, answer.etag):
                headers = _data_headers(answer, with_content_type=False)
                return BytesResponse(304, headers, done=leave)
        headers = _data_headers(answer)
        if answer.count > STREAM_ABOVE_ITEMS:
            return ChunkedResponse(200, headers, answer.chunks, done=leave)
        return BytesResponse(200, headers, b"".join(answer.chunks()), done=leave)

    async def _long_poll(self, asked: _Asked, wait: int) -> Answer:
        """Hold a matching conditional GET until its ETag changes ("Long poll").

        The in-flight slot is given back while waiting (a waiter costs nothing) and a
        waiter slot taken instead; the answer is re-evaluated on each new snapshot.
        """
        server = self._server
        notifier = server.config.change_notifier
        assert notifier is not None
        if not server.waiter_gate.try_enter():
            raise status.too_many_requests()
        server.inflight_gate.leave()
        if_none_match = asked.info.header_values("if-none-match")

        def unchanged() -> bool:
            etag = asked.answer(server.answers).etag
            return etag is not None and none_match(if_none_match, etag)

        disconnected = asyncio.ensure_future(wait_for_disconnect(asked.request.receive))
        try:
            await wait_until_changed(
                notifier,
                wait,
                unchanged,
                disconnected,
                generation=lambda: server.config.snapshot().generation,
            )
        finally:
            server.waiter_gate.leave()
            server.inflight_gate.enter()
            if not disconnected.done():
                disconnected.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await disconnected
        # After the wait, answer from the newest snapshot (a 404 or 503 may win now).
        return asked.answer(server.answers)


def pending_routes(server: VisibilityServer, table: RouteTable) -> None:
    for version in server.config.versions:
        base = f"{GROUP_PATH}/{version}"
        endpoint: Endpoint = _DataEndpoint(server, Kind.CLUSTER_QUEUE, version).serve
        table.get(
            f"{base}/clusterqueues/{{name}}/pendingworkloads", endpoint, "clusterqueue", version
        )
        endpoint = _DataEndpoint(server, Kind.LOCAL_QUEUE, version).serve
        path = f"{base}/namespaces/{{namespace}}/localqueues/{{name}}/pendingworkloads"
        table.get(path, endpoint, "localqueue", version)
        if server.config.pendingposition:
            endpoint = _DataEndpoint(server, Kind.POSITION, version).serve
            path = f"{base}/namespaces/{{namespace}}/workloads/{{name}}/pendingposition"
            table.get(path, endpoint, "pendingposition", version)
