"""`queuescope certs browser`: a client certificate as PKCS#12 for the dashboard."""

from __future__ import annotations

import argparse
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import pkcs12

from queuescope.certs_cli import add_certs_parser, run_certs
from visibility_server.tls.state import StatePaths, ensure_state_dir, mint_client

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    add_certs_parser(parser.add_subparsers(dest="command"))
    return run_certs(parser.parse_args(["certs", *argv]), now=NOW)


def test_admin_p12_holds_the_admin_certificate_key_and_ca(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    ensure_state_dir(state, now=NOW)
    assert run("browser", "--state-dir", str(state)) == 0
    out = Path(capsys.readouterr().out.strip())
    assert out == state / "admin.p12"
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    key, cert, cas = pkcs12.load_key_and_certificates(out.read_bytes(), b"queuescope")
    paths = StatePaths(state)
    assert key is not None and cert is not None
    assert cert == x509.load_pem_x509_certificate(paths.admin_cert.read_bytes())
    assert cas == [x509.load_pem_x509_certificate(paths.ca_cert.read_bytes())]
    with pytest.raises(ValueError):
        pkcs12.load_key_and_certificates(out.read_bytes(), b"wrong")


def test_user_p12_needs_a_minted_user(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    ensure_state_dir(state, now=NOW)
    assert run("browser", "--state-dir", str(state), "--user", "alice") == 2
    assert "certs client" in capsys.readouterr().err
    mint_client(state, "alice", ["devs"], now=NOW)
    assert run("browser", "--state-dir", str(state), "--user", "alice", "--password", "s3") == 0
    out = Path(capsys.readouterr().out.strip())
    assert out == state / "users" / "alice.p12"
    _, cert, _ = pkcs12.load_key_and_certificates(out.read_bytes(), b"s3")
    assert cert is not None
    assert cert.subject.rfc4514_string() == "CN=alice,O=devs"
    assert run("browser", "--state-dir", str(state), "--user", "alice", "--password", "") == 2
