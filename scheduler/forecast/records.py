"""The forecast of one pending workload, as the callers receive it (docs/forecasting.md)."""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.core.clock import Instant

FORECAST = "forecast"
WALLTIME = "walltime"
RATE = "rate"
METHODS = (FORECAST, WALLTIME, RATE)


@dataclass(frozen=True, slots=True)
class StartBand:
    """Seconds from `made_at` until the workload reserves quota: the median and the
    90% band (low = 5th percentile, high = 95th)."""

    p50: float
    low: float
    high: float


@dataclass(frozen=True, slots=True)
class WaitForecast:
    key: str  # "namespace/name"
    cluster_queue: str
    band: StartBand
    method: str  # FORECAST, WALLTIME or RATE
    made_at: Instant
    # The uncalibrated wait the forward run (or the rate) gave; None when the forward
    # run reached its horizon before the workload was admitted.
    raw_seconds: float | None
    # Workloads pending in `cluster_queue` when the forecast was made, this one included:
    # the state its band was calibrated for (docs/forecasting.md#calibration).
    queue_depth: int = 0
