"""The access middleware: who is asking and may they, before any route is looked up.

The contract fixes the order of checks (docs/visibility-api.md, "Errors"), and the first two come
before routing so that an unauthenticated or forbidden caller cannot probe for paths or
queue names (authentication before the 404 of an unknown path):

    authentication 401/503 -> Impersonate-* 403 -> [dashboard paths: see dashboard/]
    -> authorization 403/500/503
    -> (routes) route 404 / method 405 -> Accept 406 -> query 400 -> in-flight 429
    -> initial sync 503 -> queue lookup 404 -> If-None-Match 304 (or long-poll)

This middleware also decodes the request once (`RequestInfo`, left in the scope with the
authenticated user), routes on the percent-decoded path exactly as authorization read it
(an encoded `%2F` separates segments), times every request for the metrics, and turns
any error it or a later stage lets through into a `Status` answer (an unexpected one
into a 500, unless the answer had already started).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from visibility_server.authz.identity import UserInfo
from visibility_server.dashboard import is_dashboard_path
from visibility_server.http import status
from visibility_server.http.app_state import VisibilityServer
from visibility_server.http.credentials import has_impersonation
from visibility_server.http.errors import UNEXPECTED_CAUSE, status_response
from visibility_server.http.requestinfo import REQUEST_KEY, RequestInfo, attributes
from visibility_server.http.status import StatusError

log = logging.getLogger(__name__)

USER_KEY: Final = "queuescope.user"
UNKNOWN: Final = ("unknown", "")
DASHBOARD: Final = ("dashboard", "")


def user_of(scope: Scope) -> UserInfo:
    user = scope[USER_KEY]
    assert isinstance(user, UserInfo)
    return user


class AccessMiddleware:
    """Authentication, authorization, metrics and last-resort errors around the routes.

    `labels` gives each route's app (the `endpoint` Starlette's router leaves in the
    scope) its metric labels (endpoint, API version).
    `open_paths` are answered without authentication or authorization: the CRD
    conversion webhook, which kube-apiserver calls without credentials.
    """

    def __init__(
        self,
        app: ASGIApp,
        server: VisibilityServer,
        labels: Mapping[ASGIApp, tuple[str, str]],
        open_paths: frozenset[str] = frozenset(),
    ) -> None:
        self._app = app
        self._open_paths = open_paths
        self._server = server
        self._labels = labels
        self._observe = server.config.metrics.observe
        self._dashboard = server.config.dashboard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()
        code = 0

        async def tracking_send(message: Message) -> None:
            nonlocal code
            if message["type"] == "http.response.start":
                code = int(message["status"])
            await send(message)

        info = scope[REQUEST_KEY] = RequestInfo.of(scope)
        scope["path"] = info.path
        dashboard = self._dashboard and is_dashboard_path(info.path)
        try:
            if info.path not in self._open_paths:
                await self._admit(info, scope, dashboard)
            await self._app(scope, receive, tracking_send)
        except StatusError as error:
            await status_response(info, error)(scope, receive, tracking_send)
        except Exception:
            log.exception("visibility request %s %s failed", info.method, info.raw_path)
            if not code:
                unexpected = status.internal_error(UNEXPECTED_CAUSE)
                await status_response(info, unexpected)(scope, receive, tracking_send)
        finally:
            answered_by = scope.get("endpoint")  # None: no route matched (404)
            if dashboard:
                endpoint, version = DASHBOARD
            elif answered_by is None:
                endpoint, version = UNKNOWN
            else:
                endpoint, version = self._labels.get(answered_by, UNKNOWN)
            self._observe(endpoint, version, code, time.perf_counter() - started)

    async def _admit(self, info: RequestInfo, scope: Scope, dashboard: bool) -> None:
        user = scope[USER_KEY] = await self._server.authenticate(info)
        if has_impersonation(info.headers):
            raise status.impersonation_forbidden()
        if not dashboard:
            await self._server.authorize(user, attributes(info.method, info.raw_path))
