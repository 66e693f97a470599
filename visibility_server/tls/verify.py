"""Checks on serving certificates: the quick pair check the hot reloader runs before
swapping certificates (docs/cluster.md#tls-and-certificates, "Hot reload"), and the fuller
conformance check behind `queuescope certs verify` and the startup check."""

from __future__ import annotations

import hashlib
import ssl
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypeVar

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509 import verification
from cryptography.x509.oid import ExtendedKeyUsageOID

from visibility_server.tls.authority import (
    LOCAL_SANS,
    certificate_sans,
    has_san,
    load_private_key,
    parse_san,
    public_keys_equal,
    require_aware,
    san_label,
    service_dns_names,
)
from visibility_server.tls.files import SECRET_MODE, write_atomic

SERVING_CERT_FILE = "tls.crt"
SERVING_KEY_FILE = "tls.key"
# Below this remaining lifetime `certs verify` warns: about the time an operator needs to
# notice and roll a new Secret through a change process.
EXPIRY_WARNING = timedelta(days=30)

_Ext = TypeVar("_Ext", bound=x509.ExtensionType)


@dataclass(frozen=True)
class PemPair:
    """The raw bytes of a serving certificate file and its key file, as read together."""

    cert_pem: bytes
    key_pem: bytes

    @property
    def sha256(self) -> str:
        """Identity of the pair for change detection: the reloader compares it between
        polls instead of file times, which symlink swaps of Secret volumes do not keep."""
        digest = hashlib.sha256()
        # Length-prefixed so that bytes moving from one file to the other change the digest.
        digest.update(len(self.cert_pem).to_bytes(8, "big"))
        digest.update(self.cert_pem)
        digest.update(self.key_pem)
        return digest.hexdigest()


def load_pair(
    cert_dir: Path,
    *,
    cert_name: str = SERVING_CERT_FILE,
    key_name: str = SERVING_KEY_FILE,
) -> PemPair:
    """Read `tls.crt` and `tls.key` of a certificate folder; OSError if either is missing.

    Nothing is parsed here: the reloader hashes first and validates only what changed.
    """
    return PemPair((cert_dir / cert_name).read_bytes(), (cert_dir / key_name).read_bytes())


def validate_serving_pair(
    cert_pem: bytes,
    key_pem: bytes,
    *,
    required_sans: Sequence[str],
    now: datetime,
) -> list[str]:
    """Why this pair must not be served, or [] if it may.

    The rules of a hot reload: the key matches the (first) certificate, `now` is within its
    validity, every name of `required_sans` (`host`, `1.2.3.4`, `DNS:…` or `IP:…`) is a SAN,
    and an extendedKeyUsage, when present, allows serverAuth (clients reject it otherwise).
    """
    require_aware(now)
    try:
        cert = x509.load_pem_x509_certificates(cert_pem)[0]
    except ValueError as err:
        return [f"the certificate is not PEM X.509 ({err})"]
    problems: list[str] = []
    try:
        key = load_private_key(key_pem)
    except (ValueError, TypeError):
        # The parser's message is not repeated: it could quote part of the key.
        problems.append("the key is not an unencrypted PEM ECDSA or RSA private key")
    else:
        if not public_keys_equal(cert.public_key(), key.public_key()):
            problems.append("the private key does not match the certificate")
    problems.extend(_validity_problems(cert, now))
    sans = certificate_sans(cert)
    problems.extend(
        f"the certificate has no SAN {san_label(parse_san(name))}"
        for name in required_sans
        if not has_san(sans, name)
    )
    eku = _extension(cert, x509.ExtendedKeyUsage)
    if eku is not None and not _allows(eku, ExtendedKeyUsageOID.SERVER_AUTH):
        problems.append("the certificate's extendedKeyUsage does not include serverAuth")
    return problems


def apply_pair(context: ssl.SSLContext, pair: PemPair) -> None:
    """Install an already validated pair on a live context, for new handshakes.

    `load_cert_chain` only reads files; loading from the bytes that were validated (through
    a private temporary copy) rather than from the watched paths means a file replaced in
    between cannot slip in unchecked.
    """
    with tempfile.TemporaryDirectory(prefix="queuescope-tls-") as tmp:
        cert_file, key_file = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        write_atomic(cert_file, pair.cert_pem, mode=SECRET_MODE)
        write_atomic(key_file, pair.key_pem, mode=SECRET_MODE)
        context.load_cert_chain(cert_file, key_file)


@dataclass
class Findings:
    """What a check found: errors make it fail, warnings do not."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def extend(self, other: Findings) -> None:
        self.errors.extend(other.errors)
        self.warnings.extend(other.warnings)


def check_serving_certificate(
    cert: x509.Certificate,
    *,
    namespace: str,
    service: str,
    now: datetime,
) -> Findings:
    """The serving-certificate properties of docs/cluster.md#tls-and-certificates, for a certificate
    alone.

    Errors are what breaks kube-apiserver's connection (the Service SAN, serverAuth,
    digitalSignature, validity, a leaf that is a CA); warnings are departures from our
    tooling's output that Go clients tolerate (the other SANs, SKI/AKI, the key type).
    """
    require_aware(now)
    found = Findings(errors=_validity_problems(cert, now))
    if found.ok and cert.not_valid_after_utc - now < EXPIRY_WARNING:
        found.warnings.append(f"the certificate expires soon, at {_when(cert.not_valid_after_utc)}")
    sans = certificate_sans(cert)
    required, *others = service_dns_names(namespace, service)
    if not has_san(sans, required):
        found.errors.append(
            f"the certificate has no SAN DNS:{required}, the name kube-apiserver verifies"
        )
    found.warnings.extend(
        f"the certificate has no SAN {san_label(parse_san(name))}"
        for name in (*others, *LOCAL_SANS)
        if not has_san(sans, name)
    )
    eku = _extension(cert, x509.ExtendedKeyUsage)
    if eku is None or not _allows(eku, ExtendedKeyUsageOID.SERVER_AUTH):
        found.errors.append("the certificate's extendedKeyUsage does not include serverAuth")
    usage = _extension(cert, x509.KeyUsage)
    if usage is None or not usage.digital_signature:
        found.errors.append("the certificate's keyUsage does not include digitalSignature")
    constraints = _extension(cert, x509.BasicConstraints)
    if constraints is not None and constraints.ca:
        found.errors.append("the serving certificate is a CA certificate (basicConstraints)")
    if _extension(cert, x509.SubjectKeyIdentifier) is None:
        found.warnings.append("the certificate has no subjectKeyIdentifier")
    if _extension(cert, x509.AuthorityKeyIdentifier) is None:
        found.warnings.append("the certificate has no authorityKeyIdentifier")
    key = cert.public_key()
    if not (
        (isinstance(key, ec.EllipticCurvePublicKey) and isinstance(key.curve, ec.SECP256R1))
        or (isinstance(key, rsa.RSAPublicKey) and key.key_size >= 2048)
    ):
        found.warnings.append("the certificate's key is neither ECDSA P-256 nor RSA >= 2048")
    return found


def check_ca_certificate(cert: x509.Certificate, *, now: datetime) -> Findings:
    """The CA properties that make it able to sign serving certificates at all."""
    require_aware(now)
    found = Findings(
        errors=[
            problem.replace("the certificate", "the CA certificate", 1)
            for problem in _validity_problems(cert, now)
        ]
    )
    constraints = _extension(cert, x509.BasicConstraints)
    if constraints is None or not constraints.ca:
        found.errors.append("the CA certificate is not a CA (basicConstraints CA:FALSE or absent)")
    usage = _extension(cert, x509.KeyUsage)
    if usage is not None and not usage.key_cert_sign:
        found.errors.append("the CA certificate's keyUsage does not include keyCertSign")
    return found


def client_would_accept(
    cert: x509.Certificate,
    cas: Sequence[x509.Certificate],
    *,
    server_name: str,
    now: datetime,
) -> str | None:
    """None if a standards-following TLS client trusting `cas` accepts `cert` for
    `server_name` at `now` (the check kube-apiserver makes with `caBundle`); else why not.

    This is `cryptography`'s web-PKI verifier: stricter than Go on a few points, so it is a
    last safety net after the specific checks, which give the clearer messages.
    """
    if not cas:
        return "no CA to verify against"
    verifier = (
        verification.PolicyBuilder()
        .store(verification.Store(list(cas)))
        .time(now)
        .build_server_verifier(parse_san(server_name))
    )
    try:
        verifier.verify(cert, [])
    except verification.VerificationError as err:
        return str(err)
    return None


def _validity_problems(cert: x509.Certificate, now: datetime) -> list[str]:
    if now < cert.not_valid_before_utc:
        return [f"the certificate is not valid before {_when(cert.not_valid_before_utc)}"]
    if now > cert.not_valid_after_utc:
        return [f"the certificate expired at {_when(cert.not_valid_after_utc)}"]
    return []


def _allows(eku: x509.ExtendedKeyUsage, purpose: x509.ObjectIdentifier) -> bool:
    return purpose in eku or ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE in eku


def _extension(cert: x509.Certificate, kind: type[_Ext]) -> _Ext | None:
    try:
        return cert.extensions.get_extension_for_class(kind).value
    except x509.ExtensionNotFound:
        return None


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
