"""The hot-reload pair check (docs/cluster.md#tls-and-certificates) and the conformance check behind
verify."""

from __future__ import annotations

import ssl
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.unit.visibility_server.tls.support import NOW, SERVICE_SAN
from visibility_server.certs import (
    CertifiedKey,
    PemPair,
    apply_pair,
    check_serving_certificate,
    client_would_accept,
    create_ca,
    issue_client_cert,
    issue_serving_cert,
    load_pair,
    validate_serving_pair,
)

REQUIRED = [SERVICE_SAN]


@pytest.fixture(scope="module")
def ca() -> CertifiedKey:
    return create_ca(now=NOW)


@pytest.fixture(scope="module")
def serving(ca: CertifiedKey) -> CertifiedKey:
    return issue_serving_cert(
        ca, namespace="queuescope-system", service="queuescope-visibility", now=NOW
    )


def test_a_good_pair_passes(serving: CertifiedKey) -> None:
    assert (
        validate_serving_pair(
            serving.cert_pem, serving.key_pem, required_sans=[*REQUIRED, "127.0.0.1"], now=NOW
        )
        == []
    )


def test_a_mismatched_key_is_rejected(ca: CertifiedKey, serving: CertifiedKey) -> None:
    other = issue_serving_cert(
        ca, namespace="queuescope-system", service="queuescope-visibility", now=NOW
    )
    problems = validate_serving_pair(
        serving.cert_pem, other.key_pem, required_sans=REQUIRED, now=NOW
    )
    assert problems == ["the private key does not match the certificate"]


def test_an_expired_certificate_is_rejected(serving: CertifiedKey) -> None:
    later = serving.cert.not_valid_after_utc + timedelta(seconds=1)
    problems = validate_serving_pair(
        serving.cert_pem, serving.key_pem, required_sans=REQUIRED, now=later
    )
    assert len(problems) == 1
    assert problems[0].startswith("the certificate expired at ")


def test_a_not_yet_valid_certificate_is_rejected(serving: CertifiedKey) -> None:
    earlier = serving.cert.not_valid_before_utc - timedelta(seconds=1)
    problems = validate_serving_pair(
        serving.cert_pem, serving.key_pem, required_sans=REQUIRED, now=earlier
    )
    assert len(problems) == 1 and "not valid before" in problems[0]


def test_a_missing_san_is_named(ca: CertifiedKey) -> None:
    elsewhere = issue_serving_cert(ca, namespace="other", service="queuescope-visibility", now=NOW)
    problems = validate_serving_pair(
        elsewhere.cert_pem,
        elsewhere.key_pem,
        required_sans=[*REQUIRED, "10.0.0.1", "localhost"],
        now=NOW,
    )
    assert problems == [
        f"the certificate has no SAN DNS:{SERVICE_SAN}",
        "the certificate has no SAN IP:10.0.0.1",
    ]


def test_san_match_ignores_dns_case(serving: CertifiedKey) -> None:
    assert (
        validate_serving_pair(
            serving.cert_pem, serving.key_pem, required_sans=[SERVICE_SAN.upper()], now=NOW
        )
        == []
    )


def test_a_client_certificate_cannot_serve(ca: CertifiedKey) -> None:
    client = issue_client_cert(ca, user="alice", now=NOW)
    problems = validate_serving_pair(client.cert_pem, client.key_pem, required_sans=[], now=NOW)
    assert problems == ["the certificate's extendedKeyUsage does not include serverAuth"]


def test_garbage_is_reported_without_quoting_the_key(serving: CertifiedKey) -> None:
    assert len(validate_serving_pair(b"nope", serving.key_pem, required_sans=[], now=NOW)) == 1
    secretish = b"-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWJ5dGVz\n-----END PRIVATE KEY-----\n"
    problems = validate_serving_pair(serving.cert_pem, secretish, required_sans=[], now=NOW)
    assert problems == ["the key is not an unencrypted PEM ECDSA or RSA private key"]


def test_naive_now_is_refused(serving: CertifiedKey) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        validate_serving_pair(
            serving.cert_pem,
            serving.key_pem,
            required_sans=[],
            now=datetime(2026, 1, 1),  # naive on purpose
        )


def test_load_pair_reads_both_files_and_hashes_them(tmp_path: Path, ca: CertifiedKey) -> None:
    first = issue_serving_cert(ca, namespace="ns", service="svc", now=NOW)
    (tmp_path / "tls.crt").write_bytes(first.cert_pem)
    (tmp_path / "tls.key").write_bytes(first.key_pem)
    pair = load_pair(tmp_path)
    assert pair == PemPair(first.cert_pem, first.key_pem)
    assert load_pair(tmp_path).sha256 == pair.sha256
    second = issue_serving_cert(ca, namespace="ns", service="svc", now=NOW)
    (tmp_path / "tls.key").write_bytes(second.key_pem)
    assert load_pair(tmp_path).sha256 != pair.sha256
    # Moving bytes from one file to the other is a change too.
    assert PemPair(b"ab", b"c").sha256 != PemPair(b"a", b"bc").sha256
    (tmp_path / "tls.key").unlink()
    with pytest.raises(OSError, match=r"tls\.key"):
        load_pair(tmp_path)


def test_apply_pair_loads_into_a_context(serving: CertifiedKey, ca: CertifiedKey) -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    apply_pair(context, PemPair(serving.cert_pem, serving.key_pem))
    other = create_ca(now=NOW)
    with pytest.raises(ssl.SSLError):
        apply_pair(context, PemPair(serving.cert_pem, other.key_pem))


def test_conformance_of_our_serving_certificate(serving: CertifiedKey) -> None:
    found = check_serving_certificate(
        serving.cert, namespace="queuescope-system", service="queuescope-visibility", now=NOW
    )
    assert found.ok
    assert found.warnings == []


def test_conformance_failures_are_listed(ca: CertifiedKey) -> None:
    client = issue_client_cert(ca, user="alice", now=NOW)
    found = check_serving_certificate(
        client.cert, namespace="queuescope-system", service="queuescope-visibility", now=NOW
    )
    assert any(SERVICE_SAN in error for error in found.errors)
    assert any("serverAuth" in error for error in found.errors)
    assert any("DNS:localhost" in warning for warning in found.warnings)


def test_conformance_warns_before_expiry(serving: CertifiedKey) -> None:
    soon = serving.cert.not_valid_after_utc - timedelta(days=10)
    found = check_serving_certificate(
        serving.cert, namespace="queuescope-system", service="queuescope-visibility", now=soon
    )
    assert found.ok
    assert any("expires soon" in warning for warning in found.warnings)


def test_a_tls_client_accepts_only_the_right_name_and_ca(
    serving: CertifiedKey, ca: CertifiedKey
) -> None:
    assert client_would_accept(serving.cert, [ca.cert], server_name=SERVICE_SAN, now=NOW) is None
    assert client_would_accept(serving.cert, [ca.cert], server_name="127.0.0.1", now=NOW) is None
    assert client_would_accept(serving.cert, [ca.cert], server_name="evil.test", now=NOW)
    other = create_ca(now=NOW)
    assert client_would_accept(serving.cert, [other.cert], server_name=SERVICE_SAN, now=NOW)
