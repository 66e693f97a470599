"""`VisibilityServer`: what the routes of one app share (docs/visibility-api.md).

The configuration, the answers of the data endpoints and the server's caches, the
in-flight and long-poll gates, the dashboard, and the two access decisions every
request goes through (authentication, authorization). The FastAPI app keeps it in
`app.state.visibility_server`; the routers (`visibility_server/http/routers/`) and the
access middleware (`access.py`) are built around it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from scheduler.runtime.snapshot import Snapshot
from visibility_server.authn.interface import (
    AuthenticationFailed,
    AuthenticationUnavailable,
    Authenticator,
    NoCredentials,
)
from visibility_server.authz.attributes import Attributes
from visibility_server.authz.decision import Decision
from visibility_server.authz.identity import UserInfo
from visibility_server.authz.messages import forbidden_details, forbidden_message
from visibility_server.authz.pipeline import Authorizer
from visibility_server.dashboard import Dashboard
from visibility_server.http import status
from visibility_server.http.answers import Answers
from visibility_server.http.credentials import request_credentials
from visibility_server.http.documents import StaticDocuments
from visibility_server.http.health import Health
from visibility_server.http.longpoll import ChangeNotifier, Gate
from visibility_server.http.memo import RenderMemo
from visibility_server.http.metrics import HttpMetrics
from visibility_server.http.position import ForecastLookup, NotPendingLookup
from visibility_server.http.repeats import RepeatFilter
from visibility_server.http.requestinfo import RequestInfo
from visibility_server.http.sources import AnswerSources

log = logging.getLogger(__name__)


def _is_transient(exc: BaseException) -> bool:
    """Whether a backend failure is worth a 503 (retry) rather than a 500 (misconfiguration).

    Backends mark their errors with `transient = True` (SAR timeouts, connection
    errors, 429/5xx from kube-apiserver); plain timeouts and connection errors count too.
    """
    return getattr(exc, "transient", False) is True or isinstance(
        exc, TimeoutError | ConnectionError
    )


def _cause(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


@dataclass(slots=True)
class ServerConfig:
    snapshot: Callable[[], Snapshot]
    authenticator: Authenticator
    authorizer: Authorizer
    versions: tuple[str, ...]
    pendingposition: bool
    longpoll: bool
    documents: StaticDocuments
    health: Health
    metrics: HttpMetrics
    max_inflight: int
    max_waiters: int
    change_notifier: ChangeNotifier | None
    clock: Callable[[], float]
    not_pending: NotPendingLookup | None = None
    forecasts: ForecastLookup | None = None  # the served forecast of a pending Workload
    dashboard: bool = False  # serve the built-in dashboard under /dashboard


class VisibilityServer:
    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        sources = AnswerSources(config.snapshot, config.clock, config.forecasts)
        self.answers = Answers(sources, config.not_pending)
        self.unauthenticated = RepeatFilter()  # the 401s' log lines
        self.inflight_gate = Gate(config.max_inflight)
        self.waiter_gate = Gate(config.max_waiters)
        self.dashboard = (
            Dashboard(sources, self.allowed, version=config.versions[0])
            if config.dashboard
            else None
        )

    @property
    def _c(self) -> ServerConfig:  # the name the tests and the benchmarks know
        return self.config

    @property
    def inflight(self) -> int:
        return self.inflight_gate.count

    @property
    def waiters(self) -> int:
        return self.waiter_gate.count

    @property
    def memo(self) -> RenderMemo:
        return self.answers.memo

    async def authenticate(self, request: RequestInfo) -> UserInfo:
        credentials = request_credentials(request.peer_cert, request.headers)
        try:
            return await self.config.authenticator.authenticate(credentials)
        except NoCredentials:
            raise status.unauthorized() from None
        except AuthenticationFailed as exc:
            self._log_unauthenticated(request, str(exc))
            raise status.unauthorized() from None
        except AuthenticationUnavailable as exc:
            raise status.authentication_unavailable(_cause(exc)) from None
        except Exception as exc:
            log.warning("authentication failed: %s", _cause(exc))
            raise status.internal_error(_cause(exc)) from None

    def _log_unauthenticated(self, request: RequestInfo, reason: str) -> None:
        """The answer says only "Unauthorized"; the operator reads why in the log, once
        per reason and interval (docs/operations.md#why-a-request-is-401)."""
        held_back = self.unauthenticated.admit(reason)
        if held_back is None:
            return
        log.warning(
            "unable to authenticate the request: %s (client=%s audit_id=%s%s)",
            # A certificate's CN is the caller's text: escaped, it cannot start a line.
            reason.encode("unicode_escape").decode("ascii"),
            request.client or "-",
            ",".join(request.header_values("audit-id")) or "-",
            f"; {held_back} more since the last line of this reason" if held_back else "",
        )

    async def _decide(self, user: UserInfo, attrs: Attributes) -> Decision:
        try:
            return await self.config.authorizer.authorize(user, attrs)
        except Exception as exc:
            log.warning("authorization failed: %s", _cause(exc))
            if _is_transient(exc):
                raise status.authorization_unavailable(_cause(exc)) from None
            raise status.internal_error(_cause(exc)) from None

    async def allowed(self, user: UserInfo, attrs: Attributes) -> bool:
        """Whether `user` may do `attrs` (the dashboard filters with it); a failing
        backend raises the same 500/503 Status errors as a denied API request would."""
        return (await self._decide(user, attrs)).allowed

    async def authorize(self, user: UserInfo, attrs: Attributes) -> None:
        decision = await self._decide(user, attrs)
        if not decision.allowed:
            message = forbidden_message(user, attrs, decision.reason)
            raise status.forbidden(message, forbidden_details(attrs))
