"""Prometheus metrics of the served forecasts: their live calibration and the forecast
worker's health (docs/operations.md#forecasts).

Here, not with the HTTP layer's metrics: they read the runtime's forecast service,
which the server never imports (docs/architecture.md#layers).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from scheduler.runtime.calibration import ERROR_BUCKETS
from scheduler.runtime.estimates import MICROS
from scheduler.runtime.forecasts import ForecastService


class ForecastCollector(Collector):
    """The served forecasts' live calibration and the forecast worker's health
    (docs/operations.md#forecasts), read from the service at each scrape."""

    def __init__(self, service: ForecastService, clock: Callable[[], float] = time.time) -> None:
        self._service = service
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        labels = ("cluster_queue", "method")
        checked = CounterMetricFamily(
            "queuescope_forecast_checked",
            "Served forecasts whose workload has since started, by ClusterQueue and method.",
            labels=labels,
        )
        in_band = CounterMetricFamily(
            "queuescope_forecast_in_band",
            "Of those, the workloads that started inside the forecast's 90% band.",
            labels=labels,
        )
        early = CounterMetricFamily(
            "queuescope_forecast_early",
            "Of those, the workloads that started before the band's low end.",
            labels=labels,
        )
        coverage = GaugeMetricFamily(
            "queuescope_forecast_band_coverage_ratio",
            "in_band / checked: the share of starts inside the 90% band (0.9 when calibrated).",
            labels=labels,
        )
        error = HistogramMetricFamily(
            "queuescope_forecast_p50_error_seconds",
            "Absolute difference between a workload's start and its forecast p50.",
            labels=labels,
        )
        for cq, method, score in self._service.calibration.scores():
            key = [cq, method]
            checked.add_metric(key, score.checked)
            in_band.add_metric(key, score.in_band)
            early.add_metric(key, score.early)
            coverage.add_metric(key, score.coverage)
            cumulative = list(itertools.accumulate(score.error_counts))
            bounds = [repr(float(b)) for b in ERROR_BUCKETS]
            buckets = list(zip(bounds, cumulative, strict=False))
            buckets.append(("+Inf", cumulative[-1]))
            error.add_metric(key, buckets, score.error_sum)
        yield from (checked, in_band, early, coverage, error)
        yield from self._worker()

    def _worker(self) -> Iterator[Metric]:
        stats = self._service.stats
        restarts = CounterMetricFamily(
            "queuescope_forecast_worker_restarts",
            "Forecast worker processes replaced after they died or stopped answering.",
        )
        restarts.add_metric([], stats.restarts)
        yield restarts
        gauges: list[tuple[str, str, float | None]] = [
            (
                "queuescope_forecast_worker_resident_bytes",
                "Resident memory of the forecast worker process.",
                self._service.worker_resident_bytes(),
            ),
            (
                "queuescope_forecast_refresh_duration_seconds",
                "Time of the last complete refresh, from the snapshot sent to the last result.",
                stats.last_refresh_seconds if stats.refreshes else None,
            ),
            (
                "queuescope_forecast_age_seconds",
                "Age of the newest complete refresh (from the instant it was made).",
                None
                if stats.last_made_at is None
                else max(0.0, self._clock() - stats.last_made_at / MICROS),
            ),
            (
                "queuescope_forecast_served_workloads",
                "Pending workloads with a forecast in the newest complete refresh.",
                float(stats.last_served),
            ),
            (
                "queuescope_forecast_fallback_workloads",
                "Of those, the ones given the rate estimate because the method did not reach them.",
                float(stats.last_fallback),
            ),
            (
                "queuescope_forecast_loop_step_cpu_max_seconds",
                "The most CPU one stretch of the forecast service used on the event loop.",
                stats.max_step_cpu_seconds,
            ),
        ]
        for name, documentation, value in gauges:
            if value is not None:
                yield GaugeMetricFamily(name, documentation, value=value)
