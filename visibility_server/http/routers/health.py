"""`/healthz`, `/livez`, `/readyz` (all checks, or `/<endpoint>/<check>`) and `/metrics`."""

from __future__ import annotations

from typing import Final

from starlette.requests import Request
from starlette.responses import Response

from visibility_server.http import status
from visibility_server.http.app_state import VisibilityServer
from visibility_server.http.health import CONTENT_TYPE as HEALTH_CONTENT_TYPE
from visibility_server.http.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from visibility_server.http.query import all_values
from visibility_server.http.requestinfo import info_of
from visibility_server.http.responses import BytesResponse
from visibility_server.http.routers.table import Endpoint, RouteTable
from visibility_server.http.routes import HEALTH_ENDPOINTS

_HEALTH_HEADERS: Final = (
    ("content-type", HEALTH_CONTENT_TYPE),
    ("x-content-type-options", "nosniff"),
)


def _health(server: VisibilityServer, name: str, *, one_check: bool) -> Endpoint:
    health = server.config.health

    async def endpoint(request: Request) -> Response:
        check = str(request.path_params["check"]) if one_check else ""
        if check and not health.has_check(name, check):
            raise status.path_not_found()
        info = info_of(request.scope)
        code, body = health.run(
            name,
            only=check,
            verbose="verbose" in info.params,
            exclude=all_values(info.query_string, "exclude"),
        )
        return BytesResponse(code, _HEALTH_HEADERS, body)

    return endpoint


def health_routes(server: VisibilityServer, table: RouteTable) -> None:
    for name in HEALTH_ENDPOINTS:
        table.get(f"/{name}", _health(server, name, one_check=False), "health")
        table.get(f"/{name}/{{check}}", _health(server, name, one_check=True), "health")
    metrics = server.config.metrics

    async def exposition(request: Request) -> Response:
        return BytesResponse(200, [("content-type", METRICS_CONTENT_TYPE)], metrics.exposition())

    table.get("/metrics", exposition, "metrics")
