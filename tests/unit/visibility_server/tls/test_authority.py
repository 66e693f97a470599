"""The certificates themselves, parsed back with cryptography.x509
(docs/cluster.md#tls-and-certificates, #embedded-mode)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.unit.visibility_server.tls.support import (
    NOW,
    SERVICE_SAN,
    common_names,
    dns_sans,
    ext,
    ip_sans,
    organizations,
)
from visibility_server.certs import (
    CertifiedKey,
    create_ca,
    issue_client_cert,
    issue_serving_cert,
    issued_by,
    serving_sans,
)

SERVICE_NAMES = {
    SERVICE_SAN,
    "queuescope-visibility",
    "queuescope-visibility.queuescope-system",
    "queuescope-visibility.queuescope-system.svc.cluster.local",
}


@pytest.fixture(scope="module")
def ca() -> CertifiedKey:
    return create_ca(now=NOW)


def assert_signed_by(cert: x509.Certificate, ca_cert: x509.Certificate) -> None:
    """Check the signature with the CA's public key directly, not through a helper."""
    public = ca_cert.public_key()
    algorithm = cert.signature_hash_algorithm
    assert algorithm is not None
    if isinstance(public, ec.EllipticCurvePublicKey):
        public.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(algorithm))
    else:
        assert isinstance(public, rsa.RSAPublicKey)
        public.verify(cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(), algorithm)
    assert cert.issuer == ca_cert.subject


def assert_linked(cert: x509.Certificate, ca_cert: x509.Certificate) -> None:
    ski = ext(cert, x509.SubjectKeyIdentifier)
    assert ski.value == x509.SubjectKeyIdentifier.from_public_key(cert.public_key())
    aki = ext(cert, x509.AuthorityKeyIdentifier).value
    assert aki.key_identifier == ext(ca_cert, x509.SubjectKeyIdentifier).value.digest


def test_ca_is_a_self_signed_ten_year_leaf_only_ca(ca: CertifiedKey) -> None:
    cert = ca.cert
    assert common_names(cert) == ["queuescope-visibility-ca"]
    assert cert.issuer == cert.subject
    assert_signed_by(cert, cert)
    constraints = ext(cert, x509.BasicConstraints)
    assert constraints.critical
    assert constraints.value.ca is True
    assert constraints.value.path_length == 0
    usage = ext(cert, x509.KeyUsage)
    assert usage.critical
    assert usage.value.key_cert_sign and usage.value.crl_sign
    assert not usage.value.digital_signature and not usage.value.key_encipherment
    assert ext(cert, x509.SubjectKeyIdentifier).value == (
        x509.SubjectKeyIdentifier.from_public_key(cert.public_key())
    )
    assert cert.not_valid_after_utc == NOW + timedelta(days=3650)
    assert cert.not_valid_before_utc <= NOW
    key = cert.public_key()
    assert isinstance(key, ec.EllipticCurvePublicKey)
    assert isinstance(key.curve, ec.SECP256R1)


def test_serving_certificate_ecdsa(ca: CertifiedKey) -> None:
    serving = issue_serving_cert(
        ca, namespace="queuescope-system", service="queuescope-visibility", now=NOW
    )
    cert = serving.cert
    assert set(dns_sans(cert)) == SERVICE_NAMES | {"localhost"}
    assert len(dns_sans(cert)) == 5
    assert ip_sans(cert) == ["127.0.0.1"]
    assert list(ext(cert, x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.SERVER_AUTH]
    usage = ext(cert, x509.KeyUsage)
    assert usage.critical
    assert usage.value.digital_signature
    assert not usage.value.key_encipherment, "an EC key cannot encipher"
    assert not usage.value.key_cert_sign
    constraints = ext(cert, x509.BasicConstraints)
    assert constraints.critical and constraints.value.ca is False
    assert_linked(cert, ca.cert)
    assert_signed_by(cert, ca.cert)
    assert cert.not_valid_before_utc <= NOW
    assert cert.not_valid_after_utc == NOW + timedelta(days=365)
    key = cert.public_key()
    assert isinstance(key, ec.EllipticCurvePublicKey) and isinstance(key.curve, ec.SECP256R1)
    assert serving.key_type == "ecdsa-p256"


def test_serving_certificate_rsa_under_an_rsa_ca() -> None:
    rsa_ca = create_ca(now=NOW, key_type="rsa-2048")
    serving = issue_serving_cert(
        rsa_ca, namespace="batch", service="vis", now=NOW, key_type="rsa-2048"
    )
    cert = serving.cert
    key = cert.public_key()
    assert isinstance(key, rsa.RSAPublicKey) and key.key_size == 2048
    usage = ext(cert, x509.KeyUsage).value
    assert usage.digital_signature and usage.key_encipherment
    assert set(dns_sans(cert)) == {
        "vis.batch.svc",
        "vis",
        "vis.batch",
        "vis.batch.svc.cluster.local",
        "localhost",
    }
    assert_linked(cert, rsa_ca.cert)
    assert_signed_by(cert, rsa_ca.cert)


def test_client_certificate_user_is_cn_and_groups_are_o(ca: CertifiedKey) -> None:
    client = issue_client_cert(ca, user="alice", groups=["team-a-devs", "qa"], now=NOW)
    cert = client.cert
    assert common_names(cert) == ["alice"]
    assert organizations(cert) == ["team-a-devs", "qa"]
    assert list(ext(cert, x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert ext(cert, x509.BasicConstraints).value.ca is False
    assert ext(cert, x509.KeyUsage).value.digital_signature
    with pytest.raises(x509.ExtensionNotFound):
        ext(cert, x509.SubjectAlternativeName)
    assert_linked(cert, ca.cert)
    assert_signed_by(cert, ca.cert)


def test_leaf_never_outlives_its_ca() -> None:
    short_ca = create_ca(now=NOW, validity=timedelta(days=30))
    serving = issue_serving_cert(short_ca, namespace="ns", service="svc", now=NOW)
    assert serving.cert.not_valid_after_utc == short_ca.cert.not_valid_after_utc


def test_extra_sans_are_added_once() -> None:
    names = serving_sans("ns", "svc", ["localhost", "IP:127.0.0.1", "::1", "Example.test"])
    assert names[-2:] == ("::1", "Example.test")
    assert len(names) == 8


def test_issued_by_tells_apart_another_ca(ca: CertifiedKey) -> None:
    other = create_ca(now=NOW)
    serving = issue_serving_cert(ca, namespace="ns", service="svc", now=NOW)
    assert issued_by(serving.cert, ca.cert)
    assert not issued_by(serving.cert, other.cert)


def test_only_a_ca_may_issue(ca: CertifiedKey) -> None:
    leaf = issue_client_cert(ca, user="bob", now=NOW)
    with pytest.raises(ValueError, match="not a CA"):
        issue_client_cert(leaf, user="eve", now=NOW)


def test_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        create_ca(now=datetime(2026, 1, 1))  # naive on purpose


def test_aware_non_utc_now_is_the_same_instant(ca: CertifiedKey) -> None:
    elsewhere = NOW.astimezone(timezone(timedelta(hours=2)))
    client = issue_client_cert(ca, user="carol", now=elsewhere)
    assert client.cert.not_valid_after_utc == NOW + timedelta(days=365)


@pytest.mark.parametrize(
    ("namespace", "service", "match"),
    [
        ("Bad_NS", "svc", "namespace"),
        ("ns", "1svc", "Service"),
        ("ns", "x" * 64, "Service"),
    ],
)
def test_invalid_service_names(ca: CertifiedKey, namespace: str, service: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        issue_serving_cert(ca, namespace=namespace, service=service, now=NOW)


@pytest.mark.parametrize("user", ["", "a/b", " alice", "x" * 65, ".."])
def test_invalid_user_names(ca: CertifiedKey, user: str) -> None:
    with pytest.raises(ValueError, match="user name"):
        issue_client_cert(ca, user=user, now=NOW)
