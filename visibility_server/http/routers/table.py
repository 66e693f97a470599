"""`RouteTable`: adds GET (and HEAD) routes to an `APIRouter` with their metric labels."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from fastapi import APIRouter
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

Endpoint = Callable[[Request], Awaitable[Response]]


class PreRenderedRoute(APIRoute):
    """A route whose endpoint takes the request and returns a finished `Response`.

    There are no parameters to solve, no body to read and no response model to
    validate or serialize, so the route's handler is the endpoint itself, through
    FastAPI's `get_route_handler` hook for custom route classes. FastAPI's general
    handler would solve an empty set of dependencies and parse the query string on
    every request (docs/benchmarks.md, "FastAPI routing cost").
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        endpoint: Callable[[Request], Coroutine[Any, Any, Response]] = self.endpoint
        return endpoint


class RouteTable:
    """Routes answer GET and HEAD only: any other method on a known path is 405.

    The routes go straight into the app's own `APIRouter` (an included router would be
    one more level of matching on every request). `labels` maps each route's path to
    the `endpoint` and `version` labels of the request metrics (a handful of values,
    never a name).
    """

    def __init__(self, router: APIRouter) -> None:
        self.router = router
        self.labels: dict[str, tuple[str, str]] = {}

    def get(self, path: str, endpoint: Endpoint, metric: str, version: str = "") -> None:
        self.router.add_api_route(
            path,
            endpoint,
            methods=["GET", "HEAD"],
            response_model=None,
            include_in_schema=False,
            route_class_override=PreRenderedRoute,
        )
        self.labels[path] = (metric, version)


def match_whole_paths(routes: list[BaseRoute]) -> None:
    """Anchor every route's pattern at the very end of the path.

    Starlette ends its patterns with `$`, which also matches before a final newline, so
    `/healthz%0A` would be `/healthz`; the contract's paths match exactly or not at all.
    """
    for route in routes:
        regex = getattr(route, "path_regex", None)
        if isinstance(regex, re.Pattern) and regex.pattern.endswith("$"):
            route.path_regex = re.compile(regex.pattern[:-1] + r"\Z")  # type: ignore[attr-defined]
