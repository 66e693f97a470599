"""Hot reload of the serving certificate (docs/cluster.md#tls-and-certificates, "Hot reload").

The mounted Secret changes through an atomic `..data` symlink swap, which does not keep
file times, so changes are found by hashing the content every `--cert-reload-interval`. A
new pair is validated before it is applied; a bad pair is logged and counted once per
distinct content, and the pair being served stays.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from cryptography import x509

from visibility_server.kube.periodic import check_forever
from visibility_server.tls.listener import ListenerTLS
from visibility_server.tls.verify import PemPair, load_pair, validate_serving_pair

logger = logging.getLogger(__name__)

DEFAULT_RELOAD_INTERVAL = 10.0


class CertificateReloader:
    """Polls `tls.crt`/`tls.key` of `cert_dir` and swaps good new pairs into `listener`.

    Counters (`applied`, `rejected`) and `not_after` are read by the metrics endpoint.
    """

    def __init__(
        self,
        cert_dir: Path,
        listener: ListenerTLS,
        required_sans: Sequence[str],
        interval: float = DEFAULT_RELOAD_INTERVAL,
        *,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        self._dir = cert_dir
        self._listener = listener
        self._required_sans = tuple(required_sans)
        self._interval = interval
        self._now = now or _utcnow
        # The served pair's digest: unchanged files are never re-applied.
        self._served = listener.serving_pair.sha256
        # The content last reported as bad (or the last read error), so a bad pair left in
        # place is logged once, not every interval; it is still re-checked each time, since
        # a pair "not yet valid" becomes good without changing.
        self._reported: str | None = None
        self.applied = 0
        self.rejected = 0
        self.last_error: str | None = None

    @property
    def interval(self) -> float:
        return self._interval

    @property
    def not_after(self) -> datetime:
        """When the served certificate expires (`queuescope_serving_cert_not_after_seconds`)."""
        pem = self._listener.serving_pair.cert_pem
        return x509.load_pem_x509_certificates(pem)[0].not_valid_after_utc

    async def run(self) -> None:
        """Poll until cancelled, first after one interval (the pair being served was just
        loaded). A failure of one poll never ends the loop: the server would keep
        serving, but silently stop picking up rotations."""
        await self._pause()
        await check_forever(
            self.check_once,
            self._pause,
            log=logger,
            failure="serving certificate reload check failed",
        )

    async def _pause(self) -> None:
        await asyncio.sleep(self._interval)

    async def check_once(self) -> bool:
        """Look at the files once; True when a new pair was applied."""
        try:
            # File reads go to a thread: the event loop is shared with the scheduler.
            pair = await asyncio.to_thread(load_pair, self._dir)
        except OSError as err:
            self._reject(f"unreadable:{err}", f"cannot read the serving certificate files: {err}")
            return False
        digest = pair.sha256
        if digest == self._served:
            self._recovered()
            return False
        problems = validate_serving_pair(
            pair.cert_pem, pair.key_pem, required_sans=self._required_sans, now=self._now()
        )
        if problems:
            self._reject(digest, "; ".join(problems))
            return False
        try:
            self._listener.set_serving_pair(pair)
        except (ValueError, OSError) as err:  # ssl.SSLError is an OSError
            self._reject(digest, f"the TLS library refused the pair: {err}")
            return False
        self._served = digest
        self._recovered()
        self.applied += 1
        logger.info(
            "serving certificate reloaded from %s (expires %s)",
            self._dir,
            _not_after_text(pair),
        )
        return True

    def _reject(self, key: str, reason: str) -> None:
        self.last_error = reason
        if key == self._reported:
            return
        self._reported = key
        self.rejected += 1
        logger.error(
            "rejected the serving certificate in %s, still serving the previous one: %s",
            self._dir,
            reason,
        )

    def _recovered(self) -> None:
        self._reported = None
        self.last_error = None


def _not_after_text(pair: PemPair) -> str:
    cert = x509.load_pem_x509_certificates(pair.cert_pem)[0]
    return cert.not_valid_after_utc.strftime("%Y-%m-%dT%H:%M:%SZ")


def _utcnow() -> datetime:
    return datetime.now(UTC)


__all__ = ["DEFAULT_RELOAD_INTERVAL", "CertificateReloader"]
