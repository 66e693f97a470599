"""The running server's own check that kube-apiserver trusts it
(docs/cluster.md#tls-and-certificates, docs/operations.md#troubleshooting).

At startup and every five minutes (every 30 s while not trusted): read both APIServices
and check that each names our Service, does not skip TLS verification, and has a
`caBundle` under which the certificate we serve right now verifies for the Service's
name. A mismatch is an ERROR log and `queuescope_apiservice_cabundle_trusted 0`, never
a readiness failure: an unready pod takes the APIService down cluster-wide, which is
worse than the symptom.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime

from cryptography import x509
from prometheus_client import CollectorRegistry, Gauge

from scheduler.kubeapi.errors import KubeError
from visibility_server.kube.apiservices import ApiServiceReadError, read_apiservices
from visibility_server.kube.periodic import check_forever
from visibility_server.kube.transport import KubeTransport
from visibility_server.tls.deploy import APISERVICE_NAMES, ServiceName, check_live_apiservices

logger = logging.getLogger(__name__)

CHECK_INTERVAL = 300.0
RETRY_INTERVAL = 30.0  # while not (yet) trusted: an install applies the APIServices last


class CaBundleCheck:
    def __init__(
        self,
        transport: KubeTransport,
        served_cert_pem: Callable[[], bytes],
        *,
        registry: CollectorRegistry | None = None,
        service: ServiceName,
    ) -> None:
        self._transport = transport
        self._served = served_cert_pem
        self._service = service
        self.interval = CHECK_INTERVAL
        self.retry_interval = RETRY_INTERVAL
        self.trusted: bool | None = None  # None: not known yet (never read)
        self._gauge = (
            Gauge(
                "queuescope_apiservice_cabundle_trusted",
                "1 when both APIServices' caBundle verifies the served certificate",
                registry=registry,
            )
            if registry is not None
            else None
        )

    async def check_once(self) -> bool | None:
        try:
            found = await read_apiservices(self._transport, APISERVICE_NAMES)
        except (KubeError, ApiServiceReadError) as err:
            detail = err.detail if isinstance(err, KubeError) else str(err)
            logger.warning("event=apiservice-check-skipped error=%s", detail)
            return self.trusted
        leaf = x509.load_pem_x509_certificates(self._served())[0]
        findings = check_live_apiservices(
            leaf,
            found,
            now=datetime.now(UTC),
            service=self._service,
        )
        if findings.ok != self.trusted:
            for problem in findings.errors:
                logger.error("event=apiservice-untrusted problem=%s", problem)
        self.trusted = findings.ok
        if self._gauge is not None:
            self._gauge.set(1.0 if findings.ok else 0.0)
        return self.trusted

    async def run(self) -> None:
        await check_forever(
            self.check_once, self._pause, log=logger, failure="event=apiservice-check-failed"
        )

    async def _pause(self) -> None:
        await asyncio.sleep(self.interval if self.trusted else self.retry_interval)
