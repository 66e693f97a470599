"""What the data answers and the dashboard read (docs/visibility-api.md): the snapshot
published last, the server's clock, and the forecasts the forecast worker serves."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from scheduler.runtime.estimates import ServedForecast
from scheduler.runtime.snapshot import Snapshot
from scheduler.runtime.workload_records import Instant
from visibility_server.http.position import ForecastLookup
from visibility_server.http.waiting import estimate_instant


@dataclass(frozen=True, slots=True)
class AnswerSources:
    snapshot: Callable[[], Snapshot]  # read once per request
    clock: Callable[[], float]  # seconds since the epoch
    forecasts: ForecastLookup | None = None  # None where no forecast worker runs

    def estimate_now(self) -> Instant:
        """The instant estimates are evaluated at (`estimate_instant` of the clock)."""
        return estimate_instant(self.clock())

    def forecast(self, namespace: str, name: str) -> ServedForecast | None:
        return self.forecasts(namespace, name) if self.forecasts is not None else None
