"""Keys and X.509 certificates: the visibility CA, serving certificates and client
certificates, with the properties of docs/cluster.md#tls-and-certificates, #embedded-mode.

Every issuing function takes `now` so that tests (and the harness) control validity; none
of them reads the clock.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, get_args

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import PublicKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

KeyType = Literal["ecdsa-p256", "rsa-2048"]
KEY_TYPES: tuple[KeyType, ...] = get_args(KeyType)
DEFAULT_KEY_TYPE: KeyType = "ecdsa-p256"

# The key types we issue. Ed25519 would need a hash-less signing call and is not accepted
# by every Kubernetes client, so it is left out on purpose.
PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey

CA_COMMON_NAME = "queuescope-visibility-ca"
DEFAULT_NAMESPACE = "queuescope-system"
DEFAULT_SERVICE = "queuescope-visibility"
LOCAL_SANS: tuple[str, ...] = ("localhost", "127.0.0.1")

CA_VALIDITY = timedelta(days=3650)
SERVING_VALIDITY = timedelta(days=365)
CLIENT_VALIDITY = timedelta(days=365)
# notBefore is set slightly in the past: a certificate minted on one machine and used at
# once on another whose clock is a little behind would otherwise be "not yet valid".
BACKDATE = timedelta(minutes=5)

# X.509's upper bound for a CommonName (RFC 5280 ub-common-name); `cryptography`
# refuses longer values, so we say so before it does, in our own words.
MAX_COMMON_NAME = 64

_DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class CertifiedKey:
    """A certificate and its private key."""

    cert: x509.Certificate
    key: PrivateKey

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        # PKCS#8 is read by Go (kube-apiserver, kubectl), OpenSSL and Python's ssl alike.
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    @property
    def key_type(self) -> KeyType:
        return key_type_of(self.key)


def generate_key(key_type: KeyType = DEFAULT_KEY_TYPE) -> PrivateKey:
    if key_type == "ecdsa-p256":
        return ec.generate_private_key(ec.SECP256R1())
    if key_type == "rsa-2048":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    raise ValueError(f"unknown key type {key_type!r}; expected one of {', '.join(KEY_TYPES)}")


def key_type_of(key: PrivateKey) -> KeyType:
    if isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1):
        return "ecdsa-p256"
    if isinstance(key, rsa.RSAPrivateKey) and key.key_size == 2048:
        return "rsa-2048"
    raise ValueError("the key is neither ECDSA P-256 nor RSA-2048")


def load_private_key(pem: bytes) -> PrivateKey:
    """An unencrypted PEM private key of a type we can sign with."""
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise ValueError(f"unsupported private key type {type(key).__name__}")
    return key


def load_certified_key(cert_pem: bytes, key_pem: bytes) -> CertifiedKey:
    """The first certificate of `cert_pem` with its key; ValueError if they do not match."""
    cert = x509.load_pem_x509_certificates(cert_pem)[0]
    key = load_private_key(key_pem)
    if not public_keys_equal(cert.public_key(), key.public_key()):
        raise ValueError("the private key does not match the certificate")
    return CertifiedKey(cert, key)


def public_keys_equal(a: PublicKeyTypes, b: PublicKeyTypes) -> bool:
    """Compare by encoded SubjectPublicKeyInfo, which works for every key type."""
    encoding, fmt = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    return a.public_bytes(encoding, fmt) == b.public_bytes(encoding, fmt)


def issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    """Whether `ca` signed `cert` (issuer name and signature), without any policy check."""
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def required_service_san(namespace: str, service: str) -> str:
    """The name kube-apiserver always verifies against (docs/cluster.md#the-aggregation-layer, "TLS
    server name")."""
    return f"{service}.{namespace}.svc"


def service_dns_names(namespace: str, service: str) -> tuple[str, ...]:
    """The Service's DNS names of docs/cluster.md#tls-and-certificates, the required one first."""
    return (
        required_service_san(namespace, service),
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc.cluster.local",
    )


def serving_sans(namespace: str, service: str, extra: Iterable[str] = ()) -> tuple[str, ...]:
    """Every SAN of a serving certificate: the Service names, localhost, 127.0.0.1, then
    `extra`, without duplicates (compared as SANs, so `::1` and `0:0::1` are one)."""
    names: list[str] = []
    seen: set[tuple[str, str]] = set()
    for name in (*service_dns_names(namespace, service), *LOCAL_SANS, *extra):
        key = _san_key(parse_san(name))
        if key not in seen:
            seen.add(key)
            names.append(name)
    return tuple(names)


def parse_san(value: str) -> x509.DNSName | x509.IPAddress:
    """`127.0.0.1`, `::1` or `IP:…` become an IP SAN; anything else (or `DNS:…`) a DNS SAN."""
    if value.startswith("DNS:"):
        return x509.DNSName(value[4:])
    text = value[3:] if value.startswith("IP:") else value
    try:
        return x509.IPAddress(ipaddress.ip_address(text.strip("[]")))
    except ValueError:
        if value.startswith("IP:"):
            raise ValueError(f"not an IP address: {value!r}") from None
        return x509.DNSName(value)


def san_label(name: x509.DNSName | x509.IPAddress) -> str:
    """`DNS:name` or `IP:address`, as openssl and the spec write them."""
    if isinstance(name, x509.IPAddress):
        return f"IP:{name.value}"
    return f"DNS:{name.value}"


def certificate_sans(cert: x509.Certificate) -> list[x509.DNSName | x509.IPAddress]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [n for n in ext if isinstance(n, x509.DNSName | x509.IPAddress)]


def has_san(cert_sans: Sequence[x509.DNSName | x509.IPAddress], wanted: str) -> bool:
    key = _san_key(parse_san(wanted))
    return any(_san_key(name) == key for name in cert_sans)


def _san_key(name: x509.DNSName | x509.IPAddress) -> tuple[str, str]:
    # DNS names compare case-insensitively (RFC 4343); IPs by value, not by spelling.
    if isinstance(name, x509.IPAddress):
        return ("IP", str(name.value))
    return ("DNS", name.value.lower())


def check_namespace(namespace: str) -> None:
    if len(namespace) > 63 or not _DNS_1123_LABEL.match(namespace):
        raise ValueError(
            f"invalid namespace {namespace!r}: a DNS-1123 label (lower-case letters, digits, "
            "'-', at most 63 characters) is required"
        )


def check_service(service: str) -> None:
    if len(service) > 63 or not _DNS_1035_LABEL.match(service):
        raise ValueError(
            f"invalid Service name {service!r}: a DNS-1035 label (lower-case letters, "
            "digits, '-', starting with a letter, at most 63 characters) is required"
        )


def check_user_name(user: str) -> None:
    """A user name usable as a CN and as a file name under `users/`."""
    if not user or user.strip() != user:
        raise ValueError(f"invalid user name {user!r}: empty or surrounded by spaces")
    if "/" in user or "\0" in user or user in {".", ".."}:
        raise ValueError(f"invalid user name {user!r}: it becomes a file name")
    if len(user) > MAX_COMMON_NAME:
        raise ValueError(
            f"user name {user!r} is longer than {MAX_COMMON_NAME} characters, the limit of "
            "a certificate CommonName"
        )


def check_group_name(group: str) -> None:
    if not group or len(group) > MAX_COMMON_NAME:
        raise ValueError(
            f"invalid group {group!r}: 1 to {MAX_COMMON_NAME} characters (an X.509 O value)"
        )


def create_ca(
    *,
    now: datetime,
    common_name: str = CA_COMMON_NAME,
    key_type: KeyType = DEFAULT_KEY_TYPE,
    validity: timedelta = CA_VALIDITY,
) -> CertifiedKey:
    """A self-signed CA that may sign leaves only (pathlen 0)."""
    require_aware(now)
    key = generate_key(key_type)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    builder = (
        _base_builder(now, validity)
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            _key_usage(digital_signature=False, key_cert_sign=True, crl_sign=True),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
    )
    return CertifiedKey(builder.sign(key, hashes.SHA256()), key)


def issue_serving_cert(  # noqa: PLR0913 - the certificate's fields, keyword-only
    ca: CertifiedKey,
    *,
    namespace: str,
    service: str,
    now: datetime,
    key_type: KeyType = DEFAULT_KEY_TYPE,
    extra_sans: Iterable[str] = (),
    validity: timedelta = SERVING_VALIDITY,
) -> CertifiedKey:
    """A serverAuth certificate for the Service (docs/cluster.md#tls-and-certificates), plus
    `extra_sans`."""
    require_aware(now)
    check_namespace(namespace)
    check_service(service)
    sans = [parse_san(name) for name in serving_sans(namespace, service, extra_sans)]
    key = generate_key(key_type)
    subject = x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, required_service_san(namespace, service))]
    )
    builder = (
        _leaf_builder(ca, key, subject, now, validity)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    )
    return CertifiedKey(builder.sign(ca.key, hashes.SHA256()), key)


def issue_client_cert(  # noqa: PLR0913 - the certificate's fields, keyword-only
    ca: CertifiedKey,
    *,
    user: str,
    groups: Sequence[str] = (),
    now: datetime,
    key_type: KeyType = DEFAULT_KEY_TYPE,
    validity: timedelta = CLIENT_VALIDITY,
) -> CertifiedKey:
    """A clientAuth certificate read by Kubernetes as user = CN, groups = O values."""
    require_aware(now)
    check_user_name(user)
    for group in groups:
        check_group_name(group)
    key = generate_key(key_type)
    # O before CN is the order Go's pkix.Name writes, which is what kubeadm's admin.conf has.
    subject = x509.Name(
        [
            *(x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups),
            x509.NameAttribute(NameOID.COMMON_NAME, user),
        ]
    )
    builder = _leaf_builder(ca, key, subject, now, validity).add_extension(
        x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
    )
    return CertifiedKey(builder.sign(ca.key, hashes.SHA256()), key)


def due_for_renewal(cert: x509.Certificate, now: datetime) -> bool:
    """Past two thirds of its lifetime: the renewal point of docs/cluster.md#tls-and-certificates
    (self-managed-certs), also used for the embedded state folder."""
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return now >= start + (end - start) * 2 / 3


def _leaf_builder(
    ca: CertifiedKey,
    key: PrivateKey,
    subject: x509.Name,
    now: datetime,
    validity: timedelta,
) -> x509.CertificateBuilder:
    _require_ca(ca.cert)
    # A leaf that outlives its CA would be unusable for that remainder anyway; capping it
    # keeps "notAfter" an honest statement of when the pair stops working.
    builder = _base_builder(now, validity, cap=ca.cert.not_valid_after_utc)
    return (
        builder.subject_name(subject)
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            # keyEncipherment only matters for RSA key exchange (TLS 1.2 RSA suites);
            # an EC key cannot encipher, so it is not claimed there.
            _key_usage(
                digital_signature=True,
                key_encipherment=isinstance(key, rsa.RSAPrivateKey),
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .add_extension(_authority_key_id(ca), critical=False)
    )


def _authority_key_id(ca: CertifiedKey) -> x509.AuthorityKeyIdentifier:
    # AKI must equal the CA's SKI for chain building to link them; a CA made elsewhere
    # without an SKI gets the RFC 5280 method-1 hash of its key, which is what ours uses.
    try:
        ski = ca.cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    except x509.ExtensionNotFound:
        return x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key())
    return x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski)


def _base_builder(
    now: datetime, validity: timedelta, *, cap: datetime | None = None
) -> x509.CertificateBuilder:
    not_after = now + validity
    if cap is not None:
        not_after = min(not_after, cap)
    return (
        x509.CertificateBuilder()
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(not_after)
    )


def _key_usage(
    *,
    digital_signature: bool,
    key_encipherment: bool = False,
    key_cert_sign: bool = False,
    crl_sign: bool = False,
) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=digital_signature,
        content_commitment=False,
        key_encipherment=key_encipherment,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=key_cert_sign,
        crl_sign=crl_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _require_ca(cert: x509.Certificate) -> None:
    try:
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        constraints = None
    if constraints is None or not constraints.ca:
        raise ValueError(f"{cert.subject.rfc4514_string()} is not a CA certificate")


def require_aware(now: datetime) -> None:
    # A naive datetime is local time for datetime.now() and UTC for utcnow(); guessing
    # would silently shift validity by the UTC offset.
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("now must be a timezone-aware datetime")
