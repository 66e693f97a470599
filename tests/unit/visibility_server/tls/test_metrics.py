"""The serving-certificate metrics follow the reloader: expiry of what is served, and
how many pairs were applied or rejected."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from prometheus_client import CollectorRegistry

from visibility_server.certs import (
    CertifiedKey,
    create_ca,
    issue_serving_cert,
    write_certified_key,
)
from visibility_server.tls.listener import ListenerTLS
from visibility_server.tls.metrics import register_serving_cert_metrics
from visibility_server.tls.reload import CertificateReloader
from visibility_server.tls.verify import load_pair

NOW = datetime.now(UTC)
CA = create_ca(now=NOW, common_name="metrics-test-ca")
SAN = "queuescope-visibility.queuescope-system.svc"


def serving(days: int) -> CertifiedKey:
    return issue_serving_cert(
        CA,
        namespace="queuescope-system",
        service="queuescope-visibility",
        now=NOW,
        validity=timedelta(days=days),
    )


async def test_expiry_and_reload_counts(tmp_path: Path) -> None:
    first = serving(30)
    write_certified_key(first, tmp_path / "tls.crt", tmp_path / "tls.key")
    listener = ListenerTLS(load_pair(tmp_path), CA.cert_pem)
    reloader = CertificateReloader(tmp_path, listener, [SAN])
    registry = CollectorRegistry()
    register_serving_cert_metrics(registry, reloader)

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    expiry = value("queuescope_serving_cert_not_after_seconds")
    assert expiry == first.cert.not_valid_after_utc.timestamp()
    assert value("queuescope_serving_cert_reloads_total", result="applied") == 0

    second = serving(60)
    write_certified_key(second, tmp_path / "tls.crt", tmp_path / "tls.key")
    assert await reloader.check_once()
    assert value("queuescope_serving_cert_not_after_seconds") == (
        second.cert.not_valid_after_utc.timestamp()
    )
    assert value("queuescope_serving_cert_reloads_total", result="applied") == 1

    (tmp_path / "tls.key").write_text("not a key")
    assert not await reloader.check_once()
    assert value("queuescope_serving_cert_reloads_total", result="rejected") == 1
