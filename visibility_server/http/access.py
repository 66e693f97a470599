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
(an encoded `%2F` separates segments), times every request for the metrics and the
access log (docs/operations.md#the-access-log), and turns any error it or a later stage
lets through into a `Status` answer (an unexpected one into a 500, unless the answer had
already started).
"""

from __future__ import annotations

import json
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
# One line per request at INFO (docs/operations.md#the-access-log): its own logger, so
# `--log-level` or a logging configuration can silence it alone.
ACCESS_LOGGER: Final = "visibility_server.access"
access_log = logging.getLogger(ACCESS_LOGGER)

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
            elapsed = time.perf_counter() - started
            self._observe(endpoint, version, code, elapsed)
            if access_log.isEnabledFor(logging.INFO):
                log_request(info, scope.get(USER_KEY), code, elapsed)

    async def _admit(self, info: RequestInfo, scope: Scope, dashboard: bool) -> None:
        user = scope[USER_KEY] = await self._server.authenticate(info)
        if has_impersonation(info.headers):
            raise status.impersonation_forbidden()
        if not dashboard:
            await self._server.authorize(user, attributes(info.method, info.raw_path))


def log_request(info: RequestInfo, user: object, code: int, elapsed: float) -> None:
    """The access log's line for one request, in kube-apiserver's names for its fields
    (`verb`, `URI`, `latency`, `userAgent`, `audit-ID`, `srcIP`, `resp`) plus the user
    it was authenticated as: in the message as `key=value` pairs, the caller's text
    quoted as JSON strings (a newline or a quote in it cannot forge a line), and as
    fields of their own for `--log-format json`."""
    uri = info.raw_path
    if info.query_string:
        uri += "?" + info.query_string.decode("latin-1")
    name = user.name if isinstance(user, UserInfo) else ""
    agent = ",".join(info.header_values("user-agent"))
    audit_id = ",".join(info.header_values("audit-id"))
    latency = f"{elapsed * 1000:.3f}ms"
    access_log.info(
        "HTTP verb=%s URI=%s latency=%s user=%s userAgent=%s audit-ID=%s srcIP=%s resp=%d",
        _quoted(info.method),
        _quoted(uri),
        _quoted(latency),
        _quoted(name),
        _quoted(agent),
        _quoted(audit_id),
        _quoted(info.client),
        code,
        extra={
            "verb": info.method,
            "URI": uri,
            "latency": latency,
            "user": name,
            "userAgent": agent,
            "audit-ID": audit_id,
            "srcIP": info.client,
            "resp": code,
        },
    )


_quoted = json.JSONEncoder().encode  # one string as a JSON string: ASCII, escaped
