"""Certificates and credentials for the authentication tests.

Certificates come from the project's own issuing code where it fits (CAs, ordinary client
certificates); `leaf` builds the odd ones (no EKU, a wrong EKU, an empty CN, chosen
validity) that the tooling deliberately cannot make.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from visibility_server.authn.config import AuthenticationConfig
from visibility_server.authn.credentials import credentials_from_headers
from visibility_server.authn.interface import RequestCredentials
from visibility_server.certs import CertifiedKey, create_ca, generate_key

# A fixed instant: validity is always judged against it, never against the wall clock.
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
FRONT_PROXY_CN = "front-proxy-client"

CLIENT_AUTH = ExtendedKeyUsageOID.CLIENT_AUTH
SERVER_AUTH = ExtendedKeyUsageOID.SERVER_AUTH
ANY_EKU = ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE


def ca(name: str) -> CertifiedKey:
    return create_ca(now=NOW, common_name=name)


def leaf(
    issuer: CertifiedKey,
    common_name: str | None,
    *,
    organizations: Sequence[str] = (),
    eku: Sequence[x509.ObjectIdentifier] | None = (CLIENT_AUTH,),
    not_before: datetime = NOW - timedelta(hours=1),
    not_after: datetime = NOW + timedelta(days=30),
) -> CertifiedKey:
    """A client certificate signed by `issuer`; `eku=None` leaves the extension out and
    `common_name=None` leaves the CN out."""
    key = generate_key()
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    if common_name is not None:
        attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    builder = (
        x509.CertificateBuilder()
        .serial_number(x509.random_serial_number())
        .subject_name(x509.Name(attributes))
        .issuer_name(issuer.cert.subject)
        .public_key(key.public_key())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
    )
    if eku is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(eku)), critical=False)
    return CertifiedKey(builder.sign(issuer.key, hashes.SHA256()), key)


def der(pair: CertifiedKey) -> bytes:
    return pair.cert.public_bytes(serialization.Encoding.DER)


def creds(
    cert: CertifiedKey | bytes | None = None,
    headers: Sequence[tuple[str, str]] = (),
) -> RequestCredentials:
    """Credentials as the server would build them from a connection and header lines."""
    peer = der(cert) if isinstance(cert, CertifiedKey) else cert
    raw = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers]
    return credentials_from_headers(peer, raw)


def kubeadm_config(
    front_proxy_ca: CertifiedKey,
    client_ca: CertifiedKey,
    *,
    allowed_names: Sequence[str] = (FRONT_PROXY_CN,),
    uid_headers: Sequence[str] = ("X-Remote-Uid",),
    anonymous_auth: bool = True,
) -> AuthenticationConfig:
    """What a kubeadm cluster's ConfigMap says (with the 1.33+ uid header)."""
    return AuthenticationConfig(
        client_ca_pem=client_ca.cert_pem,
        requestheader_ca_pem=front_proxy_ca.cert_pem,
        allowed_names=tuple(allowed_names),
        username_headers=("X-Remote-User",),
        group_headers=("X-Remote-Group",),
        extra_headers_prefixes=("X-Remote-Extra-",),
        uid_headers=tuple(uid_headers),
        anonymous_auth=anonymous_auth,
    )
