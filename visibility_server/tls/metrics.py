"""Prometheus metrics of the serving certificate: when it expires, and how reloads went.

`queuescope_serving_cert_not_after_seconds` is what the CA rotation procedure watches
(docs/cluster.md#tls-and-certificates: move `caBundle` to the new CA only once every replica serves
a certificate from it).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from visibility_server.tls.reload import CertificateReloader


class ServingCertCollector(Collector):
    def __init__(self, reloader: CertificateReloader) -> None:
        self._reloader = reloader

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        expiry = GaugeMetricFamily(
            "queuescope_serving_cert_not_after_seconds",
            "Expiry of the served certificate, in seconds since the epoch",
        )
        expiry.add_metric([], self._reloader.not_after.timestamp())
        yield expiry
        reloads = CounterMetricFamily(
            "queuescope_serving_cert_reloads",
            "Serving certificate pairs found on disk, by outcome",
            labels=["result"],
        )
        reloads.add_metric(["applied"], self._reloader.applied)
        reloads.add_metric(["rejected"], self._reloader.rejected)
        yield reloads


def register_serving_cert_metrics(
    registry: CollectorRegistry, reloader: CertificateReloader
) -> None:
    registry.register(ServingCertCollector(reloader))
