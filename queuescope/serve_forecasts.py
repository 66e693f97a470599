"""The forecast worker's flags and wiring, shared by both serve modes
(docs/operations.md#forecasts)."""

from __future__ import annotations

import argparse
import time

from prometheus_client import CollectorRegistry

from queuescope import flag_values
from queuescope.env_twins import add_twin
from queuescope.forecast_metrics import ForecastCollector
from scheduler.runtime.engine import Engine
from scheduler.runtime.forecast_method import DEFAULT_METHOD, METHODS
from scheduler.runtime.forecasts import ForecastConfig, ForecastService

OFF = "none"


def add_forecast_flags(p: argparse.ArgumentParser) -> None:
    methods = (*sorted(METHODS), OFF)
    add_twin(
        p.add_argument,
        "--forecast-method",
        "FORECAST_METHOD",
        DEFAULT_METHOD,
        flag_values.one_of(methods),
        metavar=flag_values.metavar(methods),
        help=(
            "how the forecast worker predicts start times: forecast (the scheduler run "
            "forward with learned runtimes), walltime (runtimes = maximumExecutionTimeSeconds), "
            "rate (position over the admission rate); none: no worker, no estimatedStart"
        ),
    )
    add_twin(
        p.add_argument,
        "--forecast-interval",
        "FORECAST_INTERVAL",
        "10",
        flag_values.positive_seconds,
        metavar="SECONDS",
        help="seconds between two full refreshes of every pending workload's forecast",
    )


def forecast_service(
    args: argparse.Namespace, engine: Engine, registry: CollectorRegistry
) -> ForecastService | None:
    """The service the flags ask for, hooked to the engine's admissions and to /metrics;
    None when forecasts are off. Its `run` is for the caller to start."""
    if args.forecast_method == OFF:
        return None
    config = ForecastConfig(method=args.forecast_method, interval=args.forecast_interval)
    service = ForecastService(engine.snapshot, engine.scheduler.now, config)
    engine.admission_observers.append(service.record_start)
    registry.register(ForecastCollector(service, time.time))
    return service
