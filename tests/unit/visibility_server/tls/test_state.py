"""The embedded state folder and minted client certificates (docs/product.md;
docs/cluster.md#embedded-mode)."""

from __future__ import annotations

import base64
import stat
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.unit.visibility_server.tls.support import (
    NOW,
    SERVICE_SAN,
    common_names,
    dns_sans,
    ext,
    fingerprint,
    ip_sans,
    load_cert,
    organizations,
)
from visibility_server.certs import (
    CertsError,
    CertsInputError,
    StatePaths,
    create_ca,
    ensure_state_dir,
    issue_serving_cert,
    issued_by,
    load_certified_key,
    mint_client,
    validate_serving_pair,
    write_certified_key,
)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def kubeconfig_parts(path: Path) -> dict[str, Any]:
    """The current context's server and decoded credentials, resolved by name as kubectl
    does."""
    doc = yaml.safe_load(path.read_text())
    assert doc["apiVersion"] == "v1" and doc["kind"] == "Config"
    context = next(c for c in doc["contexts"] if c["name"] == doc["current-context"])["context"]
    cluster = next(c for c in doc["clusters"] if c["name"] == context["cluster"])["cluster"]
    user = next(u for u in doc["users"] if u["name"] == context["user"])["user"]
    return {
        "server": cluster["server"],
        "ca": base64.b64decode(cluster["certificate-authority-data"]),
        "cert": base64.b64decode(user["client-certificate-data"]),
        "key": base64.b64decode(user["client-key-data"]),
        "user": context["user"],
    }


@pytest.fixture
def state(tmp_path: Path) -> StatePaths:
    return ensure_state_dir(tmp_path / "state", now=NOW)


def test_first_start_creates_everything_with_private_modes(state: StatePaths) -> None:
    assert mode(state.root) == 0o700
    for key in (state.ca_key, state.tls_key, state.admin_key, state.kubeconfig):
        assert mode(key) == 0o600, key
    for cert in (state.ca_cert, state.tls_cert, state.admin_cert):
        assert mode(cert) == 0o644, cert
    leftovers = [p.name for p in state.root.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_serving_certificate_covers_localhost_and_the_service(state: StatePaths) -> None:
    ca, tls = load_cert(state.ca_cert), load_cert(state.tls_cert)
    assert common_names(ca) == ["queuescope-visibility-ca"]
    assert issued_by(tls, ca)
    assert "localhost" in dns_sans(tls) and SERVICE_SAN in dns_sans(tls)
    assert ip_sans(tls) == ["127.0.0.1"]
    problems = validate_serving_pair(
        state.tls_cert.read_bytes(),
        state.tls_key.read_bytes(),
        required_sans=["127.0.0.1", "localhost", SERVICE_SAN],
        now=NOW,
    )
    assert problems == []


def test_admin_is_system_masters(state: StatePaths) -> None:
    admin = load_cert(state.admin_cert)
    assert common_names(admin) == ["queuescope-admin"]
    assert organizations(admin) == ["system:masters"]
    assert list(ext(admin, x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert issued_by(admin, load_cert(state.ca_cert))


def test_kubeconfig_embeds_the_ca_and_the_admin(state: StatePaths) -> None:
    parts = kubeconfig_parts(state.kubeconfig)
    assert parts["server"] == "https://127.0.0.1:8443"
    assert parts["user"] == "queuescope-admin"
    assert parts["ca"] == state.ca_cert.read_bytes()
    assert parts["cert"] == state.admin_cert.read_bytes()
    pair = load_certified_key(parts["cert"], parts["key"])  # raises if they do not match
    assert issued_by(pair.cert, x509.load_pem_x509_certificate(parts["ca"]))


def test_second_start_reuses_everything(state: StatePaths) -> None:
    before = {p: p.read_bytes() for p in state.root.iterdir() if p.is_file()}
    again = ensure_state_dir(state.root, now=NOW + timedelta(days=1))
    assert again == state
    assert fingerprint(load_cert(state.ca_cert)) == fingerprint(
        x509.load_pem_x509_certificate(before[state.ca_cert])
    )
    after = {p: p.read_bytes() for p in state.root.iterdir() if p.is_file()}
    assert after == before


def test_an_expired_serving_certificate_is_reissued_from_the_same_ca(state: StatePaths) -> None:
    ca_before = fingerprint(load_cert(state.ca_cert))
    tls_before = fingerprint(load_cert(state.tls_cert))
    later = NOW + timedelta(days=400)
    ensure_state_dir(state.root, now=later)
    assert fingerprint(load_cert(state.ca_cert)) == ca_before
    assert fingerprint(load_cert(state.tls_cert)) != tls_before
    assert issued_by(load_cert(state.tls_cert), load_cert(state.ca_cert))
    assert load_cert(state.tls_cert).not_valid_after_utc > later
    # The admin certificate expired too; the kubeconfig follows it.
    assert load_cert(state.admin_cert).not_valid_after_utc > later
    assert kubeconfig_parts(state.kubeconfig)["cert"] == state.admin_cert.read_bytes()


def test_a_serving_certificate_near_its_end_is_renewed(state: StatePaths) -> None:
    tls_before = fingerprint(load_cert(state.tls_cert))
    ensure_state_dir(state.root, now=NOW + timedelta(days=200))
    assert fingerprint(load_cert(state.tls_cert)) == tls_before
    ensure_state_dir(state.root, now=NOW + timedelta(days=250))
    assert fingerprint(load_cert(state.tls_cert)) != tls_before


def test_a_serving_certificate_from_another_ca_is_replaced(state: StatePaths) -> None:
    foreign_ca = create_ca(now=NOW)
    foreign = issue_serving_cert(
        foreign_ca, namespace="queuescope-system", service="queuescope-visibility", now=NOW
    )
    write_certified_key(foreign, state.tls_cert, state.tls_key)
    ensure_state_dir(state.root, now=NOW)
    assert issued_by(load_cert(state.tls_cert), load_cert(state.ca_cert))


def test_a_new_server_url_updates_the_kubeconfig_and_the_sans(state: StatePaths) -> None:
    ca_before = fingerprint(load_cert(state.ca_cert))
    ensure_state_dir(state.root, now=NOW, server="https://10.1.2.3:9443")
    assert kubeconfig_parts(state.kubeconfig)["server"] == "https://10.1.2.3:9443"
    assert "10.1.2.3" in ip_sans(load_cert(state.tls_cert))
    assert fingerprint(load_cert(state.ca_cert)) == ca_before


def test_a_broken_ca_is_an_error_not_a_silent_new_ca(state: StatePaths) -> None:
    state.ca_key.unlink()
    with pytest.raises(CertsError, match=r"ca\.key is missing"):
        ensure_state_dir(state.root, now=NOW)


def test_an_invalid_server_url_is_input_error(tmp_path: Path) -> None:
    with pytest.raises(CertsInputError, match="server URL"):
        ensure_state_dir(tmp_path, now=NOW, server="http://127.0.0.1:8443")


def test_mint_client_writes_cert_key_and_kubeconfig(tmp_path: Path) -> None:
    state = ensure_state_dir(tmp_path / "s", now=NOW, server="https://localhost:9443")
    path = mint_client(state.root, "alice", ["team-a-devs", "qa"], now=NOW)
    assert path == state.root / "users" / "alice.kubeconfig"
    cert = load_cert(state.user_cert("alice"))
    assert common_names(cert) == ["alice"]
    assert organizations(cert) == ["team-a-devs", "qa"]
    assert issued_by(cert, load_cert(state.ca_cert))
    assert mode(state.user_key("alice")) == 0o600 and mode(path) == 0o600
    assert mode(state.users_dir) == 0o700
    parts = kubeconfig_parts(path)
    assert parts["server"] == "https://localhost:9443", "follows the admin kubeconfig"
    assert parts["user"] == "alice"
    assert parts["cert"] == state.user_cert("alice").read_bytes()
    assert parts["key"] == state.user_key("alice").read_bytes()
    assert parts["ca"] == state.ca_cert.read_bytes()


def test_mint_client_needs_a_state_folder(tmp_path: Path) -> None:
    with pytest.raises(CertsInputError, match="not a state folder"):
        mint_client(tmp_path, "alice", [], now=NOW)


@pytest.mark.parametrize(("user", "groups"), [("a/b", []), ("alice", [""])])
def test_mint_client_refuses_bad_names(state: StatePaths, user: str, groups: list[str]) -> None:
    with pytest.raises(CertsInputError):
        mint_client(state.root, user, groups, now=NOW)
