"""Shared helpers for the certificate tests: a fixed clock and certificate readers."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.x509.oid import NameOID

# A fixed instant: every validity assertion is relative to it, never to the wall clock.
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SERVICE_SAN = "queuescope-visibility.queuescope-system.svc"

_Ext = TypeVar("_Ext", bound=x509.ExtensionType)


def load_cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def fingerprint(cert: x509.Certificate) -> bytes:
    return cert.fingerprint(hashes.SHA256())


def ext(cert: x509.Certificate, kind: type[_Ext]) -> x509.Extension[_Ext]:
    return cert.extensions.get_extension_for_class(kind)


def common_names(cert: x509.Certificate) -> list[str]:
    return [str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]


def organizations(cert: x509.Certificate) -> list[str]:
    return [str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]


def dns_sans(cert: x509.Certificate) -> list[str]:
    return ext(cert, x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)


def ip_sans(cert: x509.Certificate) -> list[str]:
    values = ext(cert, x509.SubjectAlternativeName).value.get_values_for_type(x509.IPAddress)
    return [str(v) for v in values]
