"""`create_app`: the visibility server as a FastAPI application.

The API, health, metrics and dashboard paths are routes of FastAPI's router (`routers/`,
one module per concern), each a GET/HEAD route returning a `Response` of pre-rendered
bytes (no response model, no validation; `routers/table.py` says why they are Starlette
routes). Authentication and authorization run in a small ASGI
middleware before routing (`access.py`: the contract checks them before a 404), and
errors are exception handlers that render Kubernetes `Status` objects (`errors.py`).
The framework's own behaviours that the contract forbids are off: no slash redirects
(no 3xx is ever sent), no docs or OpenAPI routes of FastAPI's own, no default error
pages. Startup and shutdown go through the lifespan.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from scheduler.api.integrations import NO_INTEGRATIONS, Integrations
from scheduler.runtime.snapshot import Snapshot
from visibility_server.authn.interface import Authenticator
from visibility_server.authz.pipeline import Authorizer
from visibility_server.dashboard.routes import dashboard_routes
from visibility_server.http.access import AccessMiddleware
from visibility_server.http.app_state import ServerConfig, VisibilityServer
from visibility_server.http.documents import StaticDocuments
from visibility_server.http.errors import install_error_handlers
from visibility_server.http.health import NOT_LIVENESS, Health, HealthCheck, SyncLatch
from visibility_server.http.longpoll import ChangeNotifier
from visibility_server.http.metrics import http_metrics
from visibility_server.http.position import ForecastLookup, NotPendingLookup
from visibility_server.http.ratelimit import RateLimit, UserRateLimiter
from visibility_server.http.routers.discovery import discovery_routes, openapi_routes
from visibility_server.http.routers.health import health_routes
from visibility_server.http.routers.pending import pending_routes
from visibility_server.http.routers.table import RouteTable, match_whole_paths
from visibility_server.http.routers.whatif import WhatIfBackend, whatif_routes
from visibility_server.webhooks.routes import webhook_routes

log = logging.getLogger(__name__)

DEFAULT_VERSIONS = ("v1beta2", "v1beta1")
DEFAULT_EXTENSIONS = frozenset({"pendingposition", "longpoll", "whatif"})
KNOWN_EXTENSIONS = frozenset({"pendingposition", "longpoll", "whatif"})


def _lifespan(
    server: VisibilityServer,
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        config = server.config
        log.info(
            "visibility server started: versions=%s pendingposition=%s longpoll=%s",
            ",".join(config.versions),
            config.pendingposition,
            config.longpoll,
        )
        yield
        # Rendered bodies and items are only worth keeping while the server answers.
        server.answers.forget()
        log.info("visibility server stopped")

    return lifespan


def create_app(  # noqa: PLR0913 - keyword-only settings; each caller names the few it sets
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
    forecasts: ForecastLookup | None = None,
    dashboard: bool = True,
    what_if: WhatIfBackend | None = None,
    what_if_limit: RateLimit | None = None,
    integrations: Integrations = NO_INTEGRATIONS,
) -> FastAPI:
    """The visibility server's ASGI app (see the module and `server` docstrings).

    `versions` are in preference order (the first is the preferred version).
    `extensions` is a subset of `pendingposition`, `longpoll` (empty: exactly the
    upstream surface). `health_checks` adds the runtime's checks (`event-loop`,
    `authentication-config`, `shutdown`) to the built-in `ping` and `informer-sync`.
    `not_pending` classifies a Workload that the snapshot does not list as pending;
    `forecasts` gives the forecast served for a pending one (`estimatedStart`).
    `dashboard` serves the built-in dashboard under `/dashboard` (docs/dashboard.md),
    outside the API's paths. `what_if` is the runtime's dry run: with it (and the
    `whatif` extension on) the LocalQueues' `whatif` subresource is served, each user
    limited by `what_if_limit` (docs/visibility-api.md#what-if). `integrations`:
    the admission webhooks carry out the `pod` and `deployment` integrations
    (docs/cluster.md#plain-pods, docs/cluster.md#deployments).
    """
    unknown = set(extensions) - KNOWN_EXTENSIONS
    if unknown:
        raise ValueError(f"unknown visibility extensions: {sorted(unknown)}")
    if not versions:
        raise ValueError("at least one API version must be served")
    pendingposition = "pendingposition" in extensions
    longpoll = "longpoll" in extensions
    whatif = "whatif" in extensions and what_if is not None
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
            whatif=whatif,
        ),
        health=Health(checks),
        metrics=http_metrics(registry),
        max_inflight=max_inflight,
        max_waiters=max_waiters,
        change_notifier=change_notifier,
        clock=clock,
        not_pending=not_pending,
        forecasts=forecasts,
        dashboard=dashboard,
    )
    server = VisibilityServer(config)
    app = FastAPI(
        redirect_slashes=False,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        lifespan=_lifespan(server),
        # The server exports its own Prometheus metrics (http/metrics.py) and sets up no
        # OpenTelemetry; FastAPI's native telemetry would only look for providers on
        # every request.
        telemetry={"tracing": False, "metrics": False, "logs": False, "operation_spans": False},
    )
    app.state.visibility_server = server
    install_error_handlers(app)
    table = RouteTable(app.router)
    # The data routes first: they are the hot path, and routes are matched in order.
    pending_routes(server, table)
    if whatif:
        assert what_if is not None
        limiter = UserRateLimiter(what_if_limit or RateLimit(), time.monotonic)
        whatif_routes(server, table, what_if, limiter)
    discovery_routes(server, table)
    openapi_routes(server, table)
    health_routes(server, table)
    if server.dashboard is not None:
        dashboard_routes(server.dashboard, table)
    open_paths = webhook_routes(table, snapshot, integrations)
    match_whole_paths(app.router.routes)
    app.add_middleware(AccessMiddleware, server=server, labels=table.labels, open_paths=open_paths)
    return app
