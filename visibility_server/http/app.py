"""`create_app`: the visibility server as a FastAPI application.

The contract (visibility-api.md §1) requires a FastAPI app with `redirect_slashes=False`
and no docs or OpenAPI routes of FastAPI's own. Every HTTP request is answered by
`VisibilityServer`, which the app hands each `http` scope to before anything of the
framework runs, so no framework behaviour (slash redirects, default 404/405 pages,
FastAPI's OpenAPI 3.1 document) can ever answer instead: the pipeline needs exact bytes
and a fixed check order, and no 3xx may ever be sent. Skipping the framework's
middleware stack (error middleware, body limit, telemetry, router) also takes several
layers of per-request work off every answer; other scopes (lifespan) go to FastAPI.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence

from fastapi import FastAPI
from prometheus_client import CollectorRegistry
from starlette.types import Receive, Scope, Send

from scheduler.runtime.snapshot import Snapshot
from visibility_server.authn.interface import Authenticator
from visibility_server.authz.pipeline import Authorizer
from visibility_server.http.documents import StaticDocuments
from visibility_server.http.health import NOT_LIVENESS, Health, HealthCheck, SyncLatch
from visibility_server.http.longpoll import ChangeNotifier
from visibility_server.http.metrics import http_metrics
from visibility_server.http.position import NotPendingLookup
from visibility_server.http.server import ServerConfig, VisibilityServer
from visibility_server.webhooks.conversion import is_conversion_request, serve_conversion

DEFAULT_VERSIONS = ("v1beta2", "v1beta1")
DEFAULT_EXTENSIONS = frozenset({"pendingposition", "longpoll"})
KNOWN_EXTENSIONS = frozenset({"pendingposition", "longpoll"})


class _VisibilityApp(FastAPI):
    """FastAPI whose every HTTP request is answered by the visibility server itself."""

    def __init__(self, server: VisibilityServer) -> None:
        super().__init__(redirect_slashes=False, docs_url=None, redoc_url=None, openapi_url=None)
        self._visibility_server = server
        self.state.visibility_server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if is_conversion_request(scope):  # kube-apiserver's CRD conversion, unauthenticated
            await serve_conversion(scope, receive, send)
        elif scope["type"] == "http":
            await self._visibility_server(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)


def create_app(
    *,
    snapshot: Callable[[], Snapshot],
    authenticator: Authenticator,
    authorizer: Authorizer,
    versions: Sequence[str] = DEFAULT_VERSIONS,
    extensions: Collection[str] = DEFAULT_EXTENSIONS,
    version_info: Mapping[str, str],
    metrics_registry: CollectorRegistry | None = None,
    max_inflight: int = 64,
    max_waiters: int = 1024,
    change_notifier: ChangeNotifier | None = None,
    clock: Callable[[], float] = time.time,
    health_checks: Sequence[HealthCheck] = (),
    not_pending: NotPendingLookup | None = None,
    dashboard: bool = True,
) -> FastAPI:
    """The visibility server's ASGI app (see the module and `server` docstrings).

    `versions` are in preference order (the first is the preferred version).
    `extensions` is a subset of `pendingposition`, `longpoll` (empty: exactly the
    upstream surface). `health_checks` adds the runtime's checks (`event-loop`,
    `authentication-config`, `shutdown`) to the built-in `ping` and `informer-sync`.
    `not_pending` classifies a Workload that the snapshot does not list as pending.
    `dashboard` serves the built-in dashboard under `/dashboard` (docs/dashboard.md),
    outside the API's paths.
    """
    unknown = set(extensions) - KNOWN_EXTENSIONS
    if unknown:
        raise ValueError(f"unknown visibility extensions: {sorted(unknown)}")
    if not versions:
        raise ValueError("at least one API version must be served")
    pendingposition = "pendingposition" in extensions
    longpoll = "longpoll" in extensions
    registry = metrics_registry if metrics_registry is not None else CollectorRegistry()

    synced = SyncLatch(lambda: snapshot().synced)
    checks = [
        HealthCheck("ping", lambda: True),
        HealthCheck("informer-sync", synced, NOT_LIVENESS),
        *health_checks,
    ]
    config = ServerConfig(
        snapshot=snapshot,
        authenticator=authenticator,
        authorizer=authorizer,
        versions=tuple(versions),
        pendingposition=pendingposition,
        longpoll=longpoll,
        documents=StaticDocuments(
            versions,
            pendingposition=pendingposition,
            longpoll=longpoll,
            version_info=version_info,
        ),
        health=Health(checks),
        metrics=http_metrics(registry),
        max_inflight=max_inflight,
        max_waiters=max_waiters,
        change_notifier=change_notifier,
        clock=clock,
        not_pending=not_pending,
        dashboard=dashboard,
    )
    return _VisibilityApp(VisibilityServer(config))
