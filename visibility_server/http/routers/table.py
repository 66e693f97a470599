"""`RouteTable`: adds routes of pre-rendered answers to the app's `APIRouter`, with their
metric labels.

Every endpoint of this server takes the request and returns a finished `Response`: no
parameters to solve, no body model, no response model. So a route is a Starlette
`Route` in FastAPI's router whose endpoint is a small ASGI app (`PreRendered`), not an
`APIRoute`: an `APIRoute` wraps each request in FastAPI's `request_response` (a
`Request`, two `AsyncExitStack`s for dependencies with `yield`, its own exception
wrapper) for features these endpoints never use, about 7% of a page's CPU
(docs/benchmarks.md, "FastAPI routing cost"). Errors an endpoint raises still reach the
app's exception handlers, through the exception middleware around the router.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

Endpoint = Callable[[Request], Awaitable[Response]]
GET: Sequence[str] = ("GET", "HEAD")


class PreRendered:
    """The ASGI app of one route: the endpoint's `Response`, sent as it is."""

    __slots__ = ("endpoint",)

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = await self.endpoint(Request(scope, receive, send))
        await response(scope, receive, send)


class RouteTable:
    """Routes answer GET and HEAD unless told otherwise: any other method on a known path
    is 405.

    The routes go straight into the app's own `APIRouter` (an included router would be
    one more level of matching on every request). `labels` maps each route's app (the
    `endpoint` Starlette leaves in the scope) to the `endpoint` and `version` labels of
    the request metrics (a handful of values, never a name).
    """

    def __init__(self, router: APIRouter) -> None:
        self.router = router
        self.labels: dict[ASGIApp, tuple[str, str]] = {}

    def get(self, path: str, endpoint: Endpoint, metric: str, version: str = "") -> None:
        self.add(path, PreRendered(endpoint), metric, version)

    def add(
        self,
        path: str,
        app: ASGIApp,
        metric: str,
        version: str = "",
        methods: Sequence[str] | None = GET,
    ) -> None:
        """`app` answers `path` (every method when `methods` is None: it answers 405
        itself)."""
        methods_list = list(methods) if methods is not None else None
        self.router.routes.append(Route(path, app, methods=methods_list))
        self.labels[app] = (metric, version)


def match_whole_paths(routes: list[BaseRoute]) -> None:
    """Anchor every route's pattern at the very end of the path.

    Starlette ends its patterns with `$`, which also matches before a final newline, so
    `/healthz%0A` would be `/healthz`; the contract's paths match exactly or not at all.
    """
    for route in routes:
        regex = getattr(route, "path_regex", None)
        if isinstance(regex, re.Pattern) and regex.pattern.endswith("$"):
            route.path_regex = re.compile(regex.pattern[:-1] + r"\Z")  # type: ignore[attr-defined]
