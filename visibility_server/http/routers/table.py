"""`RouteTable`: adds GET (and HEAD) routes to an `APIRouter` with their metric labels."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

Endpoint = Callable[[Request], Awaitable[Response]]


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
