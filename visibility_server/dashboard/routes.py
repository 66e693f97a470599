"""The dashboard's routes: `/dashboard` and every path under it (docs/dashboard.md).

The access middleware has authenticated the caller (and, as for every dashboard path,
not authorized the request: the dashboard decides per object shown); `Dashboard`
answers the page, its assets and its JSON endpoints.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from visibility_server.dashboard.handler import DASHBOARD_PREFIX, Dashboard, DashboardRequest
from visibility_server.http.access import user_of
from visibility_server.http.requestinfo import info_of
from visibility_server.http.responses import BytesResponse
from visibility_server.http.routers.table import RouteTable


def dashboard_routes(dashboard: Dashboard, table: RouteTable) -> None:
    async def endpoint(request: Request) -> Response:
        info = info_of(request.scope)
        answer = await dashboard.answer(
            DashboardRequest(
                method=info.method,
                path=info.path,
                params=info.params,
                if_none_match=tuple(info.header_values("if-none-match")),
                user=user_of(request.scope),
            )
        )
        return BytesResponse(answer.code, answer.headers, answer.body)

    table.get(DASHBOARD_PREFIX, endpoint, "dashboard")
    table.get(f"{DASHBOARD_PREFIX}/{{rest:path}}", endpoint, "dashboard")
