"""Hot reload of the serving certificate (docs/cluster.md#tls-and-certificates): good pairs are
applied, bad ones are rejected, logged and counted while the old pair keeps being served."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from visibility_server.certs import (
    CertifiedKey,
    create_ca,
    issue_serving_cert,
    load_pair,
    required_service_san,
    write_certified_key,
)
from visibility_server.tls.listener import ListenerTLS
from visibility_server.tls.reload import CertificateReloader

NOW = datetime.now(UTC)
CA = create_ca(now=NOW)
SAN = required_service_san("queuescope-system", "queuescope-visibility")


def serving(service: str = "queuescope-visibility", now: datetime = NOW) -> CertifiedKey:
    return issue_serving_cert(CA, namespace="queuescope-system", service=service, now=now)


def put(folder: Path, pair: CertifiedKey) -> None:
    write_certified_key(pair, folder / "tls.crt", folder / "tls.key")


def served(listener: ListenerTLS) -> bytes:
    return listener.serving_pair.cert_pem


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, ListenerTLS, CertificateReloader]:
    put(tmp_path, serving())
    listener = ListenerTLS(load_pair(tmp_path), b"")
    return tmp_path, listener, CertificateReloader(tmp_path, listener, [SAN], interval=0.01)


async def test_unchanged_files_are_not_reapplied(
    setup: tuple[Path, ListenerTLS, CertificateReloader],
) -> None:
    _, listener, reloader = setup
    context = listener.current
    assert await reloader.check_once() is False
    assert await reloader.check_once() is False
    assert listener.current is context
    assert (reloader.applied, reloader.rejected) == (0, 0)


async def test_a_good_new_pair_is_applied_once(
    setup: tuple[Path, ListenerTLS, CertificateReloader],
) -> None:
    folder, listener, reloader = setup
    new = serving()
    put(folder, new)
    assert await reloader.check_once() is True
    assert served(listener) == new.cert_pem
    assert reloader.not_after == new.cert.not_valid_after_utc
    assert await reloader.check_once() is False
    assert (reloader.applied, reloader.rejected) == (1, 0)


@pytest.mark.parametrize("problem", ["no-service-san", "key-mismatch", "expired", "garbage"])
async def test_a_bad_pair_is_rejected_once_and_the_old_one_stays(
    setup: tuple[Path, ListenerTLS, CertificateReloader],
    problem: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    folder, listener, reloader = setup
    old = served(listener)
    if problem == "no-service-san":
        put(folder, serving(service="someone-else"))
    elif problem == "key-mismatch":
        (folder / "tls.key").write_bytes(serving().key_pem)
    elif problem == "expired":
        put(folder, serving(now=NOW - timedelta(days=400)))
    else:
        (folder / "tls.crt").write_bytes(b"garbage")
    with caplog.at_level(logging.ERROR, logger="visibility_server.tls.reload"):
        assert await reloader.check_once() is False
        assert await reloader.check_once() is False
    assert served(listener) == old
    assert (reloader.applied, reloader.rejected) == (0, 1)
    assert reloader.last_error
    rejections = [r for r in caplog.records if "rejected the serving certificate" in r.message]
    assert len(rejections) == 1
    # A good pair afterwards is picked up as usual.
    good = serving()
    put(folder, good)
    assert await reloader.check_once() is True
    assert served(listener) == good.cert_pem
    assert reloader.last_error is None


async def test_missing_files_keep_the_old_pair(
    setup: tuple[Path, ListenerTLS, CertificateReloader],
) -> None:
    folder, listener, reloader = setup
    old = served(listener)
    (folder / "tls.key").unlink()
    assert await reloader.check_once() is False
    assert served(listener) == old
    assert reloader.rejected == 1


async def test_a_rejected_pair_that_becomes_valid_is_applied_without_changing(
    tmp_path: Path,
) -> None:
    put(tmp_path, serving())
    listener = ListenerTLS(load_pair(tmp_path), b"")
    clock = [NOW - timedelta(days=1)]
    reloader = CertificateReloader(tmp_path, listener, [SAN], now=lambda: clock[0])
    future = serving()  # notBefore is NOW minus a few minutes: "not yet valid" a day ago
    put(tmp_path, future)
    assert await reloader.check_once() is False
    clock[0] = NOW
    assert await reloader.check_once() is True
    assert served(listener) == future.cert_pem


async def test_run_polls_until_cancelled(
    setup: tuple[Path, ListenerTLS, CertificateReloader],
) -> None:
    folder, listener, reloader = setup
    task = asyncio.create_task(reloader.run())
    try:
        new = serving()
        put(folder, new)
        async with asyncio.timeout(10):
            while reloader.applied == 0:
                await asyncio.sleep(0.01)
        assert served(listener) == new.cert_pem
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
