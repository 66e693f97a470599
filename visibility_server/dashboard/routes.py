"""The dashboard's routes (docs/dashboard.md): the page, its assets, its JSON endpoints.

The access middleware has authenticated the caller and, as for every path under
`/dashboard`, not authorized the request: the dashboard decides per object it shows.
Any other path under `/dashboard` is a 404 of the dashboard's own (after a 401 for an
anonymous caller under the JSON prefix), and any method but GET and HEAD is a 405.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response

from visibility_server.dashboard.handler import (
    API_PREFIX,
    DASHBOARD_PREFIX,
    STATIC_PREFIX,
    Dashboard,
    DashboardRequest,
    DashboardResponse,
)
from visibility_server.http.access import user_of
from visibility_server.http.requestinfo import info_of
from visibility_server.http.responses import BytesResponse
from visibility_server.http.routers.table import Endpoint, RouteTable

Answer = Callable[[Request, DashboardRequest], Awaitable[DashboardResponse]]


def _route(answer: Answer) -> Endpoint:
    async def endpoint(request: Request) -> Response:
        info = info_of(request.scope)
        asked = DashboardRequest(
            params=info.params,
            if_none_match=tuple(info.header_values("if-none-match")),
            user=user_of(request.scope),
        )
        answered = await answer(request, asked)
        return BytesResponse(answered.code, answered.headers, answered.body)

    return endpoint


def dashboard_routes(dashboard: Dashboard, table: RouteTable) -> None:
    def param(request: Request, name: str) -> str:
        return str(request.path_params[name])

    page = _route(lambda _request, asked: dashboard.page(asked))
    table.get(DASHBOARD_PREFIX, page, "dashboard")
    table.get(f"{DASHBOARD_PREFIX}/", page, "dashboard")
    table.get(
        f"{STATIC_PREFIX}{{name}}",
        _route(lambda request, asked: dashboard.static(param(request, "name"), asked)),
        "dashboard",
    )
    table.get(
        f"{API_PREFIX}overview",
        _route(lambda _request, asked: dashboard.overview(asked)),
        "dashboard",
    )
    table.get(
        f"{API_PREFIX}clusterqueues/{{name}}/pending",
        _route(lambda request, asked: dashboard.cluster_queue(param(request, "name"), asked)),
        "dashboard",
    )
    table.get(
        f"{API_PREFIX}namespaces/{{namespace}}/localqueues/{{name}}/pending",
        _route(
            lambda request, asked: dashboard.local_queue(
                param(request, "namespace"), param(request, "name"), asked
            )
        ),
        "dashboard",
    )
    table.get(
        f"{API_PREFIX}{{rest:path}}",
        _route(lambda request, asked: dashboard.api_not_found(param(request, "rest"), asked)),
        "dashboard",
    )
    table.get(
        f"{DASHBOARD_PREFIX}/{{rest:path}}",
        _route(lambda _request, _asked: dashboard.not_found()),
        "dashboard",
    )
