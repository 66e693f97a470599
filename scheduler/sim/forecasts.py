"""`queuescope simulate --record-forecasts` (docs/simulate.md#recording-forecasts).

At the end of the cycles of each instant, every workload that arrived at that
instant and is still pending gets one forecast, made from the replay's state at that
instant. The forecaster learns online from what the replay has shown so far: the
admissions (the rate method), the runtimes of workloads that finished, and the
errors of earlier forecasts whose workloads have started. It never reads the
runtime annotations nor the scenario's timeline (docs/forecasting.md#no-leakage).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.core.changes import Changes
from scheduler.core.clock import MICROS_PER_SECOND, Instant, format_instant
from scheduler.core.scheduler import Scheduler
from scheduler.forecast.forecaster import Forecaster
from scheduler.forecast.records import WaitForecast

FORECAST_API_VERSION = "simulation.queuescope.io/v1alpha1"


@dataclass(slots=True)
class Recorded:
    forecast: WaitForecast
    arrival: Instant
    started: Instant | None = None


@dataclass(slots=True)
class ForecastRecorder:
    """A ReplayObserver (scheduler/sim/observer.py) that records forecasts."""

    forecaster: Forecaster
    recorded: dict[str, Recorded] = field(default_factory=dict)
    _arrivals: dict[str, Instant] = field(default_factory=dict)  # this instant's
    _arrived_at: dict[str, Instant] = field(default_factory=dict)  # first arrival
    _admitted_at: dict[str, Instant] = field(default_factory=dict)  # latest admission

    def arrived(self, key: str, at: Instant) -> None:
        self._arrived_at.setdefault(key, at)
        self._arrivals[key] = at

    def changed(self, s: Scheduler, changes: Changes) -> None:
        now = s.now()
        for key in changes.admitted:
            wl = s.workload(key)
            if wl is None or wl.admission is None:
                continue
            self._admitted_at[key] = now
            self.forecaster.observe_admitted(wl.admission.cluster_queue, now)
            record = self.recorded.get(key)
            if record is not None and record.started is None:
                record.started = now
                self.forecaster.observe_start(
                    record.forecast, (now - record.forecast.made_at) / MICROS_PER_SECOND
                )

    def finished(self, s: Scheduler, keys: Sequence[str]) -> None:
        now = s.now()
        for key in keys:
            wl = s.workload(key)
            admitted = self._admitted_at.pop(key, None)
            if wl is not None and admitted is not None:
                self.forecaster.observe_finished(wl, (now - admitted) / MICROS_PER_SECOND)

    def instant_done(self, s: Scheduler) -> None:
        now = s.now()
        arrivals, self._arrivals = self._arrivals, {}
        targets = [
            key
            for key, at in arrivals.items()
            if at == now
            and key not in self.recorded
            and (wl := s.workload(key)) is not None
            and wl.active
            and not wl.finished
            and not wl.holds_quota
        ]
        if not targets:
            return
        for key, forecast in self.forecaster.forecast(s, targets).items():
            self.recorded[key] = Recorded(forecast, self._arrived_at.get(key, now))

    def items(self) -> list[dict[str, Any]]:
        """One WorkloadForecast per recorded forecast, by namespace and name."""
        return [_item(self.recorded[key]) for key in sorted(self.recorded)]


def _seconds(value: float) -> float | int:
    """Whole seconds print as integers; otherwise to the millisecond."""
    rounded = round(value, 3)
    return int(rounded) if rounded == int(rounded) else rounded


def _item(record: Recorded) -> dict[str, Any]:
    forecast = record.forecast
    namespace, _, name = forecast.key.partition("/")
    band = forecast.band
    actual = (
        None
        if record.started is None
        else _seconds((record.started - record.arrival) / MICROS_PER_SECOND)
    )
    return {
        "apiVersion": FORECAST_API_VERSION,
        "kind": "WorkloadForecast",
        "metadata": {"namespace": namespace, "name": name},
        "madeAt": format_instant(forecast.made_at),
        "method": forecast.method,
        "waitSeconds": {
            "low": _seconds(band.low),
            "p50": _seconds(band.p50),
            "high": _seconds(band.high),
        },
        "actualWaitSeconds": actual,
    }
