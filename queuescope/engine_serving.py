"""What both modes of `serve` build around their engine: the loop-lag monitor, the
optional forecast worker, the visibility app reading the engine's snapshots, and the
tasks that run them (docs/architecture.md, "The runtime on one event loop")."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import uvicorn
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from queuescope.lifecycle import ChangeNotifier
from queuescope.lookups import not_pending_lookup
from queuescope.serve_forecasts import forecast_service
from scheduler.api.integrations import NO_INTEGRATIONS, Integrations
from scheduler.runtime.engine import Engine
from scheduler.runtime.forecasts import ForecastService
from scheduler.runtime.what_if import WhatIfService
from visibility_server.authn.interface import Authenticator
from visibility_server.authz.pipeline import Authorizer
from visibility_server.http import create_app
from visibility_server.http.health import HealthCheck
from visibility_server.http.ratelimit import RateLimit
from visibility_server.looplag import LoopLagMonitor
from visibility_server.tls.reload import CertificateReloader

EVENT_LOOP_CHECK_PATHS = frozenset({"livez", "healthz"})


@dataclass(frozen=True)
class Access:
    """Who may ask the app what: the request authenticator and authorizer of a mode."""

    authenticator: Authenticator
    authorizer: Authorizer


@dataclass(frozen=True)
class EngineServing:
    """The parts both modes share, built once per process from the flags."""

    engine: Engine
    registry: CollectorRegistry
    loop_lag: LoopLagMonitor
    forecasts: ForecastService | None

    @classmethod
    def build(
        cls, args: argparse.Namespace, engine: Engine, registry: CollectorRegistry
    ) -> EngineServing:
        return cls(
            engine, registry, LoopLagMonitor(registry), forecast_service(args, engine, registry)
        )

    def app(  # noqa: PLR0913 - keyword-only settings, as create_app's
        self,
        args: argparse.Namespace,
        access: Access,
        *,
        version_info: Mapping[str, str],
        what_if: WhatIfService,
        health_checks: Sequence[HealthCheck] = (),
        integrations: Integrations = NO_INTEGRATIONS,
    ) -> FastAPI:
        """The visibility app on this engine; `health_checks` are the mode's own, beside
        the event-loop check both modes have; `integrations`: the webhooks carry out
        the `pod` and `deployment` integrations (cluster mode, if the Configuration turns
        them on)."""
        return create_app(
            snapshot=self.engine.snapshot,
            authenticator=access.authenticator,
            authorizer=access.authorizer,
            version_info=version_info,
            change_notifier=ChangeNotifier(self.engine),
            not_pending=not_pending_lookup(self.engine),
            forecasts=self.forecasts.forecast if self.forecasts is not None else None,
            metrics_registry=self.registry,
            health_checks=[
                HealthCheck("event-loop", self.loop_lag.healthy, EVENT_LOOP_CHECK_PATHS),
                *health_checks,
            ],
            what_if=what_if,
            what_if_limit=RateLimit(rate=args.whatif_rate, burst=args.whatif_burst),
            max_inflight=args.visibility_max_inflight,
            max_waiters=args.visibility_max_waiters,
            integrations=integrations,
        )

    def start(
        self,
        server: uvicorn.Server,
        reloader: CertificateReloader,
        own: Mapping[str, Coroutine[Any, Any, None]],
    ) -> list[asyncio.Task[Any]]:
        """One task per service, named for the logs; `own` are the mode's (name → run).
        The `https` task keeps its name: the drain lets uvicorn finish instead of
        cancelling it."""
        runs: dict[str, Coroutine[Any, Any, None]] = {
            "engine": self.engine.run(),
            **own,
            "cert-reload": reloader.run(),
            "loop-lag": self.loop_lag.run(),
            "https": server.serve(),
        }
        if self.forecasts is not None:
            runs["forecasts"] = self.forecasts.run()
        return [asyncio.create_task(run, name=name) for name, run in runs.items()]
