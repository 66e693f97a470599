"""Accuracy of start-time forecasts: the `WorkloadForecast` items `queuescope simulate
--record-forecasts` appends to its output (docs/simulate.md#scoring-recorded-forecasts),
parsed and scored. Pure: lists in, figures out.

The figures (docs/benchmarks.md#forecast-accuracy-how-it-is-measured):
- coverage: the share of forecasts whose actual wait lies within [low, high], the 90% band;
- p50 error: the median of |p50 - actual| in seconds, and the median log ratio
  |ln((p50 + 1) / (actual + 1))| (0 = exact, ln 2 = off by a factor of two; the +1 s
  keeps zero waits finite and makes a 0 s vs 1 s error small);
- band width: the median of high - low;
- calibration: for each quantile the band names (p5, p50, p95), the share of actual waits
  at or below the predicted value; a calibrated forecaster gives 0.05, 0.5 and 0.95.
Only forecasts whose workload started in the replay have an actual wait; the others
are counted, never scored.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

FORECAST_API_VERSION = "simulation.queuescope.io/v1alpha1"
FORECAST_KIND = "WorkloadForecast"
BAND_QUANTILES = (0.05, 0.5, 0.95)  # low, p50, high


class ForecastParseError(ValueError):
    """An output item that claims to be a WorkloadForecast but is not one."""


@dataclass(frozen=True, slots=True)
class Forecast:
    namespace: str
    name: str
    made_at: str
    method: str
    low: float
    p50: float
    high: float
    actual: float | None  # seconds from arrival to QuotaReserved; None: never started


def _seconds(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ForecastParseError(f"{where}: expected a number of seconds, got {value!r}")
    if value < 0:
        raise ForecastParseError(f"{where}: negative wait {value!r}")
    return float(value)


def _forecast(item: Mapping[str, Any], where: str) -> Forecast:
    meta = item.get("metadata")
    if not isinstance(meta, Mapping) or not meta.get("name"):
        raise ForecastParseError(f"{where}.metadata: expected namespace and name")
    wait = item.get("waitSeconds")
    if not isinstance(wait, Mapping):
        raise ForecastParseError(f"{where}.waitSeconds: expected {{low, p50, high}}")
    low, p50, high = (
        _seconds(wait.get(k), f"{where}.waitSeconds.{k}") for k in ("low", "p50", "high")
    )
    if not low <= p50 <= high:
        raise ForecastParseError(f"{where}.waitSeconds: expected low <= p50 <= high")
    if "actualWaitSeconds" not in item:
        raise ForecastParseError(f"{where}.actualWaitSeconds: missing (null when it never started)")
    raw_actual = item["actualWaitSeconds"]
    actual = None if raw_actual is None else _seconds(raw_actual, f"{where}.actualWaitSeconds")
    return Forecast(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta["name"]),
        made_at=str(item.get("madeAt", "")),
        method=str(item.get("method", "")),
        low=low,
        p50=p50,
        high=high,
        actual=actual,
    )


def parse_forecasts(items: Iterable[Mapping[str, Any]]) -> list[Forecast]:
    """The WorkloadForecast items of a simulator's output `List`, in order; other items are
    left alone. ForecastParseError names the item and field of a malformed one."""
    out = []
    for index, item in enumerate(items):
        if item.get("kind") != FORECAST_KIND:
            continue
        where = f"items[{index}]"
        if item.get("apiVersion") != FORECAST_API_VERSION:
            raise ForecastParseError(f"{where}.apiVersion: expected {FORECAST_API_VERSION}")
        out.append(_forecast(item, where))
    return out


def log_ratio(predicted: float, actual: float) -> float:
    """|ln((predicted + 1) / (actual + 1))|: a factor error that tolerates zero waits."""
    return abs(math.log((predicted + 1.0) / (actual + 1.0)))


@dataclass(frozen=True, slots=True)
class Accuracy:
    forecasts: int
    resolved: int  # with an actual wait (the workload started in the replay)
    coverage: float | None  # share of resolved within [low, high]
    below_band: float | None
    above_band: float | None
    p50_abs_error: float | None  # median |p50 - actual|, seconds
    p50_log_ratio: float | None  # median |ln((p50 + 1) / (actual + 1))|
    band_width: float | None  # median high - low over every forecast, seconds
    calibration: tuple[tuple[float, float], ...]  # (nominal quantile, observed share)

    def to_json(self) -> dict[str, Any]:
        return {
            "forecasts": self.forecasts,
            "resolved": self.resolved,
            "coverage": self.coverage,
            "below_band": self.below_band,
            "above_band": self.above_band,
            "p50_abs_error_seconds": self.p50_abs_error,
            "p50_log_ratio": self.p50_log_ratio,
            "band_width_seconds": self.band_width,
            "calibration": [list(p) for p in self.calibration],
        }


def _share(flags: Sequence[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def _median(values: Sequence[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def accuracy(forecasts: Sequence[Forecast]) -> Accuracy:
    scored = [(f, f.actual) for f in forecasts if f.actual is not None]
    calibration = tuple(
        (q, share)
        for q, share in zip(
            BAND_QUANTILES,
            (_share([a <= getattr(f, band) for f, a in scored]) for band in ("low", "p50", "high")),
            strict=True,
        )
        if share is not None
    )
    return Accuracy(
        forecasts=len(forecasts),
        resolved=len(scored),
        coverage=_share([f.low <= a <= f.high for f, a in scored]),
        below_band=_share([a < f.low for f, a in scored]),
        above_band=_share([a > f.high for f, a in scored]),
        p50_abs_error=_median([abs(f.p50 - a) for f, a in scored]),
        p50_log_ratio=_median([log_ratio(f.p50, a) for f, a in scored]),
        band_width=_median([f.high - f.low for f in forecasts]),
        calibration=calibration,
    )


def error_ratio(candidate: Accuracy, reference: Accuracy) -> float | None:
    """candidate's median p50 error over reference's (0.7 = 30% below); None if either
    has none, infinite when the reference is exact and the candidate is not."""
    if candidate.p50_abs_error is None or reference.p50_abs_error is None:
        return None
    if reference.p50_abs_error == 0:
        return 1.0 if candidate.p50_abs_error == 0 else math.inf
    return candidate.p50_abs_error / reference.p50_abs_error
