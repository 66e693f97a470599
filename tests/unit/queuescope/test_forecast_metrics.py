"""The served forecasts' metrics (docs/operations.md#forecasts)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from queuescope.forecast_metrics import ForecastCollector
from scheduler.runtime.estimates import MICROS, ServedForecast
from scheduler.runtime.forecasts import ForecastService
from scheduler.runtime.snapshot import EMPTY_SNAPSHOT

T0 = 1_767_225_600 * MICROS


def forecast(p50: int, low: int, high: int) -> ServedForecast:
    """Offsets in seconds from T0."""
    return ServedForecast("rate", T0, 3, T0 + p50 * MICROS, T0 + low * MICROS, T0 + high * MICROS)


def scrape(service: ForecastService, now: float) -> str:
    registry = CollectorRegistry()
    registry.register(ForecastCollector(service, lambda: now))
    return generate_latest(registry).decode()


def test_coverage_and_error_per_cluster_queue() -> None:
    service = ForecastService(lambda: EMPTY_SNAPSHOT, lambda: T0)
    band = forecast(100, 50, 400)
    service.calibration.record("cq-a", band, T0 + 100 * MICROS)  # on the median
    service.calibration.record("cq-a", band, T0 + 10 * MICROS)  # 90 s early, before the band
    service.calibration.record("cq-a", band, T0 + 1000 * MICROS)  # 900 s late
    service.calibration.record("cq-b", band, T0 + 130 * MICROS)
    text = scrape(service, T0 / MICROS)
    labels = '{cluster_queue="cq-a",method="rate"}'
    assert f"queuescope_forecast_checked_total{labels} 3.0" in text
    assert f"queuescope_forecast_in_band_total{labels} 1.0" in text
    assert f"queuescope_forecast_early_total{labels} 1.0" in text
    assert f"queuescope_forecast_band_coverage_ratio{labels} 0.3333333333333333" in text
    for le, count in (("1.0", 1), ("60.0", 1), ("120.0", 2), ("600.0", 2), ("1800.0", 3)):
        bucket = f'{{cluster_queue="cq-a",le="{le}",method="rate"}} {count}.0'
        assert "queuescope_forecast_p50_error_seconds_bucket" + bucket in text
    assert 'error_seconds_bucket{cluster_queue="cq-a",le="+Inf",method="rate"} 3.0' in text
    assert f"queuescope_forecast_p50_error_seconds_sum{labels} 990.0" in text
    assert 'queuescope_forecast_band_coverage_ratio{cluster_queue="cq-b",method="rate"} 1.0' in text


def test_worker_health_is_exported_once_known() -> None:
    service = ForecastService(lambda: EMPTY_SNAPSHOT, lambda: T0)
    text = scrape(service, T0 / MICROS)
    assert "queuescope_forecast_worker_restarts_total 0.0" in text
    # Before a first refresh there is no age, duration or worker memory to report.
    assert "queuescope_forecast_age_seconds" not in text
    assert "queuescope_forecast_refresh_duration_seconds" not in text
    assert "queuescope_forecast_worker_resident_bytes" not in text
    service.stats.refreshes = 1
    service.stats.last_refresh_seconds = 0.5
    service.stats.last_made_at = T0
    service.stats.restarts = 2
    service.stats.last_served, service.stats.last_fallback = 100, 40
    text = scrape(service, T0 / MICROS + 42)
    assert "queuescope_forecast_served_workloads 100.0" in text
    assert "queuescope_forecast_fallback_workloads 40.0" in text
    assert "queuescope_forecast_age_seconds 42.0" in text
    assert "queuescope_forecast_refresh_duration_seconds 0.5" in text
    assert "queuescope_forecast_worker_restarts_total 2.0" in text
