"""Real TLS on 127.0.0.1 with Python's ssl: the generated serving certificate is accepted
by a verifying client, a minted client certificate identifies its user, and a client
certificate from another CA is refused during the handshake (docs/cluster.md#tls-in-python)."""

from __future__ import annotations

import socket
import ssl
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.unit.visibility_server.tls.support import SERVICE_SAN
from visibility_server.certs import (
    StatePaths,
    apply_pair,
    create_ca,
    ensure_state_dir,
    issue_client_cert,
    load_pair,
    mint_client,
    write_certified_key,
)

TIMEOUT = 10.0


@dataclass
class OneShotServer:
    """Accepts one connection, completes the handshake, answers with the peer's CN."""

    context: ssl.SSLContext
    listener: socket.socket = field(init=False)
    peer_subject: dict[str, list[str]] | None = None
    error: BaseException | None = None
    thread: threading.Thread = field(init=False)

    def __post_init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(TIMEOUT)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        port: int = self.listener.getsockname()[1]
        return port

    def _serve(self) -> None:
        try:
            conn, _ = self.listener.accept()
            conn.settimeout(TIMEOUT)
            with self.context.wrap_socket(conn, server_side=True) as tls:
                subject = subject_of(tls.getpeercert() or {})
                self.peer_subject = subject
                tls.sendall(subject.get("commonName", ["?"])[0].encode())
        except (ssl.SSLError, OSError) as err:
            self.error = err
        finally:
            self.listener.close()

    def join(self) -> None:
        self.thread.join(TIMEOUT)
        assert not self.thread.is_alive()


def subject_of(peer: dict[str, Any]) -> dict[str, list[str]]:
    """`getpeercert()`'s subject (a tuple of RDNs of (name, value) pairs) as name -> values."""
    subject: dict[str, list[str]] = {}
    for rdn in peer.get("subject", ()):
        for name, value in rdn:
            subject.setdefault(name, []).append(value)
    return subject


def server_context(state: StatePaths) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    apply_pair(context, load_pair(state.root))
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cafile=state.ca_cert)
    return context


def client_context(ca_file: Path, cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(cafile=ca_file)
    # Python 3.13 turns this on in create_default_context; our certificates must pass it.
    context.verify_flags |= ssl.VERIFY_X509_STRICT
    context.load_cert_chain(cert, key)
    return context


def talk(port: int, context: ssl.SSLContext, server_hostname: str) -> bytes:
    with (
        socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as raw,
        context.wrap_socket(raw, server_hostname=server_hostname) as tls,
    ):
        return tls.recv(1024)


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> StatePaths:
    # Real handshakes check validity against the real clock.
    return ensure_state_dir(tmp_path_factory.mktemp("state"), now=datetime.now(UTC))


@pytest.mark.parametrize("server_hostname", [SERVICE_SAN, "127.0.0.1", "localhost"])
def test_a_minted_client_is_seen_by_cn_and_groups(state: StatePaths, server_hostname: str) -> None:
    mint_client(state.root, "alice", ["team-a-devs", "qa"], now=datetime.now(UTC))
    server = OneShotServer(server_context(state))
    client = client_context(state.ca_cert, state.user_cert("alice"), state.user_key("alice"))
    assert talk(server.port, client, server_hostname) == b"alice"
    server.join()
    assert server.error is None
    assert server.peer_subject == {
        "organizationName": ["team-a-devs", "qa"],
        "commonName": ["alice"],
    }


def test_the_admin_certificate_works_too(state: StatePaths) -> None:
    server = OneShotServer(server_context(state))
    client = client_context(state.ca_cert, state.admin_cert, state.admin_key)
    assert talk(server.port, client, SERVICE_SAN) == b"queuescope-admin"
    server.join()
    assert server.peer_subject is not None
    assert server.peer_subject["organizationName"] == ["system:masters"]


def test_a_client_certificate_from_another_ca_is_refused(state: StatePaths, tmp_path: Path) -> None:
    now = datetime.now(UTC)
    rogue_ca = create_ca(now=now, common_name="rogue-ca")
    rogue = issue_client_cert(rogue_ca, user="mallory", groups=["system:masters"], now=now)
    write_certified_key(rogue, tmp_path / "rogue.crt", tmp_path / "rogue.key")
    server = OneShotServer(server_context(state))
    client = client_context(state.ca_cert, tmp_path / "rogue.crt", tmp_path / "rogue.key")
    try:
        answer = talk(server.port, client, SERVICE_SAN)
    except (ssl.SSLError, ConnectionError):
        # TLS 1.3 finishes the client's side of the handshake first; the server's alert
        # then arrives on the first read.
        answer = b""
    server.join()
    assert answer == b""
    assert isinstance(server.error, ssl.SSLCertVerificationError)
    assert server.peer_subject is None


def test_a_client_trusting_another_ca_refuses_the_server(state: StatePaths, tmp_path: Path) -> None:
    other_ca = create_ca(now=datetime.now(UTC))
    (tmp_path / "other-ca.crt").write_bytes(other_ca.cert_pem)
    server = OneShotServer(server_context(state))
    client = client_context(tmp_path / "other-ca.crt", state.admin_cert, state.admin_key)
    with pytest.raises(ssl.SSLCertVerificationError):
        talk(server.port, client, SERVICE_SAN)
    server.join()
    assert server.peer_subject is None
