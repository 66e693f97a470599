"""The HTTP layer's Prometheus metrics (docs/visibility-api.md#health-metrics-and-version).

Metrics are registered once per registry (`visibility_server/metrics_registry.py`).
Other components (snapshot publishing, authn, authz, TLS, leader election, loop lag)
register their own metrics in the same registry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest

from visibility_server.metrics_registry import OncePerRegistry

CONTENT_TYPE: Final = CONTENT_TYPE_PLAIN_0_0_4

# From 0.5 ms: a 100-item page is expected well under 5 ms (docs/performance.md).
_BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


@dataclass(frozen=True, slots=True)
class HttpMetrics:
    registry: CollectorRegistry
    requests: Counter
    duration: Histogram
    # Labelled children by label values: `labels()` costs more than the increment itself,
    # and the label space is small (endpoints x versions x codes).
    _counters: dict[tuple[str, str, int], Counter] = field(default_factory=dict)
    _histograms: dict[str, Histogram] = field(default_factory=dict)

    def observe(self, endpoint: str, version: str, code: int, seconds: float) -> None:
        key = (endpoint, version, code)
        counter = self._counters.get(key)
        if counter is None:
            counter = self._counters[key] = self.requests.labels(endpoint, version, str(code))
        counter.inc()
        histogram = self._histograms.get(endpoint)
        if histogram is None:
            histogram = self._histograms[endpoint] = self.duration.labels(endpoint)
        histogram.observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def _make_http_metrics(registry: CollectorRegistry) -> HttpMetrics:
    return HttpMetrics(
        registry,
        Counter(
            "queuescope_visibility_requests",
            "Visibility server requests by endpoint, API version and HTTP status code.",
            ("endpoint", "version", "code"),
            registry=registry,
        ),
        Histogram(
            "queuescope_visibility_request_duration_seconds",
            "Time to answer a visibility server request, by endpoint.",
            ("endpoint",),
            registry=registry,
            buckets=_BUCKETS,
        ),
    )


http_metrics = OncePerRegistry(_make_http_metrics)
