"""Runtime changes on a live listener (docs/cluster.md#tls-and-certificates hot reload,
docs/cluster.md#tls-in-python CA changes), seen through real handshakes against uvicorn: new
handshakes get the new CA set or serving certificate, connections already open keep working."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography import x509

from tests.tls.support import (
    SERVICE_SAN,
    TLSConnection,
    WhoAmI,
    call,
    client_context,
    in_thread,
    refused,
    running_server,
)
from visibility_server.authn.chain import AuthenticatorChain
from visibility_server.authn.config import AuthenticationConfig
from visibility_server.certs import (
    CertifiedKey,
    create_ca,
    issue_client_cert,
    issue_serving_cert,
    load_pair,
    write_certified_key,
)
from visibility_server.tls.listener import ListenerTLS
from visibility_server.tls.reload import CertificateReloader

NOW = datetime.now(UTC)
SERVING_CA = create_ca(now=NOW)
OLD_CA = create_ca(now=NOW, common_name="client-ca-old")
NEW_CA = create_ca(now=NOW, common_name="client-ca-new")
OLD_USER = issue_client_cert(OLD_CA, user="old-user", now=NOW)
NEW_USER = issue_client_cert(NEW_CA, user="new-user", now=NOW)
SERVER_NAMES = [SERVICE_SAN, "127.0.0.1"]


def serving() -> CertifiedKey:
    return issue_serving_cert(
        SERVING_CA, namespace="queuescope-system", service="queuescope-visibility", now=NOW
    )


@dataclass
class Live:
    port: int
    chain: AuthenticatorChain
    listener: ListenerTLS
    cert_dir: Path


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[Live]:
    write_certified_key(serving(), tmp_path / "tls.crt", tmp_path / "tls.key")
    config = AuthenticationConfig(client_ca_pem=OLD_CA.cert_pem)
    listener = ListenerTLS(load_pair(tmp_path), config.accepted_cas_pem)
    chain = AuthenticatorChain(config, None)
    async with running_server(WhoAmI(chain), listener) as port:
        yield Live(port, chain, listener, tmp_path)


async def user_of(live: Live, identity: CertifiedKey, server_hostname: str) -> str | None:
    """The user name the server saw, or None when the handshake was refused."""
    try:
        status, body = await call(
            live.port, client_context(SERVING_CA, identity), server_hostname=server_hostname
        )
    except Exception as error:
        assert refused(error), repr(error)
        return None
    assert status == 200
    user: str = body["user"]
    return user


def configure(live: Live, *cas: CertifiedKey) -> None:
    """What the ConfigMap watcher does on a change: the chain, then the TLS contexts."""
    config = AuthenticationConfig(client_ca_pem=b"".join(ca.cert_pem for ca in cas))
    live.chain.update(config)
    live.listener.set_client_cas(config.accepted_cas_pem)


@pytest.mark.parametrize("server_hostname", SERVER_NAMES)
async def test_client_ca_changes_reach_new_handshakes(live: Live, server_hostname: str) -> None:
    assert await user_of(live, OLD_USER, server_hostname) == "old-user"
    assert await user_of(live, NEW_USER, server_hostname) is None
    configure(live, OLD_CA, NEW_CA)
    assert await user_of(live, NEW_USER, server_hostname) == "new-user"
    configure(live, NEW_CA)
    assert await user_of(live, NEW_USER, server_hostname) == "new-user"
    # The per-handshake context no longer has the old CA. The callback runs with and
    # without SNI (OpenSSL 1.1.1+), so the removal reaches SNI-less clients too.
    assert await user_of(live, OLD_USER, server_hostname) is None


async def test_a_reloaded_serving_cert_is_presented_and_open_connections_survive(
    live: Live,
) -> None:
    reloader = CertificateReloader(live.cert_dir, live.listener, [SERVICE_SAN])
    kept = TLSConnection(live.port, client_context(SERVING_CA), SERVICE_SAN)
    try:
        status, _ = await in_thread(kept.call)
        assert status == 200
        first = _serial(kept.server_cert)

        new = serving()
        write_certified_key(new, live.cert_dir / "tls.crt", live.cert_dir / "tls.key")
        assert await reloader.check_once() is True

        for server_hostname in SERVER_NAMES:
            fresh = TLSConnection(live.port, client_context(SERVING_CA), server_hostname)
            try:
                status, _ = await in_thread(fresh.call)
            finally:
                fresh.close()
            assert status == 200
            assert _serial(fresh.server_cert) == new.cert.serial_number != first

        # The connection opened before the reload keeps its session.
        status, _ = await in_thread(kept.call)
        assert status == 200
    finally:
        kept.close()


async def test_a_rejected_serving_cert_is_never_presented(live: Live) -> None:
    reloader = CertificateReloader(live.cert_dir, live.listener, [SERVICE_SAN])
    before = live.listener.serving_pair.cert_pem
    other = issue_serving_cert(SERVING_CA, namespace="elsewhere", service="other", now=NOW)
    write_certified_key(other, live.cert_dir / "tls.crt", live.cert_dir / "tls.key")
    assert await reloader.check_once() is False
    connection = TLSConnection(live.port, client_context(SERVING_CA), "127.0.0.1")
    try:
        status, _ = await in_thread(connection.call)
    finally:
        connection.close()
    assert status == 200
    expected = x509.load_pem_x509_certificate(before).serial_number
    assert _serial(connection.server_cert) == expected


def _serial(der: bytes | None) -> int:
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number
