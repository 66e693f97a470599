"""What the authenticator chain trusts: the `extension-apiserver-authentication` ConfigMap
(docs/cluster.md#the-authentication-configmap), or the same values from flags
(docs/cluster.md#authentication-and-authorization-flags).

The object is immutable and compared by value, so the ConfigMap watcher can tell a real
change (rebuild the chain and the TLS contexts) from kube-apiserver's minutely re-sync
(nothing to do).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import serialization

CONFIGMAP_NAMESPACE: Final = "kube-system"
CONFIGMAP_NAME: Final = "extension-apiserver-authentication"

CLIENT_CA_KEY: Final = "client-ca-file"
REQUESTHEADER_CA_KEY: Final = "requestheader-client-ca-file"
ALLOWED_NAMES_KEY: Final = "requestheader-allowed-names"
USERNAME_HEADERS_KEY: Final = "requestheader-username-headers"
GROUP_HEADERS_KEY: Final = "requestheader-group-headers"
EXTRA_PREFIXES_KEY: Final = "requestheader-extra-headers-prefix"
UID_HEADERS_KEY: Final = "requestheader-uid-headers"

# k8s.io/apiserver's defaults for `--requestheader-*-headers` on a delegating server; used
# when the requestheader CA comes from a flag (embedded mode) rather than the ConfigMap.
DEFAULT_USERNAME_HEADERS: Final = ("X-Remote-User",)
DEFAULT_GROUP_HEADERS: Final = ("X-Remote-Group",)
DEFAULT_EXTRA_HEADERS_PREFIXES: Final = ("X-Remote-Extra-",)
DEFAULT_UID_HEADERS: Final[tuple[str, ...]] = ()


_LIST_FIELDS: Final = (
    "allowed_names",
    "username_headers",
    "group_headers",
    "extra_headers_prefixes",
    "uid_headers",
)


class AuthenticationConfigError(ValueError):
    """A value of the ConfigMap (or a flag) cannot be used; the caller keeps the previous
    configuration rather than dropping certificate authentication."""


@dataclass(frozen=True, slots=True)
class AuthenticationConfig:
    """CA bundles (PEM, possibly several certificates each), front-proxy header names and
    the anonymous switch. An empty CA bundle turns that authenticator off."""

    client_ca_pem: bytes = b""
    requestheader_ca_pem: bytes = b""
    allowed_names: tuple[str, ...] = ()
    username_headers: tuple[str, ...] = ()
    group_headers: tuple[str, ...] = ()
    extra_headers_prefixes: tuple[str, ...] = ()
    uid_headers: tuple[str, ...] = ()
    anonymous_auth: bool = True
    # Parsed once here, so a bad bundle is refused when the configuration is built and not
    # on the first request that needs it.
    client_cas: tuple[x509.Certificate, ...] = field(init=False, repr=False, compare=False)
    requestheader_cas: tuple[x509.Certificate, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Lists passed by callers become tuples, so the object stays hashable and immutable.
        for name in _LIST_FIELDS:
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "client_cas", parse_ca_bundle(self.client_ca_pem, CLIENT_CA_KEY))
        object.__setattr__(
            self,
            "requestheader_cas",
            parse_ca_bundle(self.requestheader_ca_pem, REQUESTHEADER_CA_KEY),
        )

    @classmethod
    def from_configmap(
        cls, data: Mapping[str, str], *, anonymous_auth: bool = True
    ) -> AuthenticationConfig:
        """The ConfigMap's `data`, as docs/cluster.md#the-authentication-configmap reads it: a
        missing key, "", `null` and `[]` are all empty; list keys are JSON string arrays.
        AuthenticationConfigError otherwise."""
        return cls(
            client_ca_pem=_text(data, CLIENT_CA_KEY).encode("utf-8"),
            requestheader_ca_pem=_text(data, REQUESTHEADER_CA_KEY).encode("utf-8"),
            allowed_names=_string_list(data, ALLOWED_NAMES_KEY),
            username_headers=_string_list(data, USERNAME_HEADERS_KEY),
            group_headers=_string_list(data, GROUP_HEADERS_KEY),
            extra_headers_prefixes=_string_list(data, EXTRA_PREFIXES_KEY),
            uid_headers=_string_list(data, UID_HEADERS_KEY),
            anonymous_auth=anonymous_auth,
        )

    @property
    def accepted_cas(self) -> tuple[x509.Certificate, ...]:
        """Every CA whose client certificates the TLS layer must let through
        (docs/cluster.md#tls-in-python): the requestheader bundle, then the client-ca bundle,
        without duplicates."""
        seen: set[bytes] = set()
        unique: list[x509.Certificate] = []
        for cert in (*self.requestheader_cas, *self.client_cas):
            der = cert.public_bytes(serialization.Encoding.DER)
            if der not in seen:
                seen.add(der)
                unique.append(cert)
        return tuple(unique)

    @property
    def accepted_cas_pem(self) -> bytes:
        """`accepted_cas` as one PEM bundle, the input of the listener's verify store."""
        return pem_bundle(self.accepted_cas)


def parse_ca_bundle(pem: bytes, what: str = "CA bundle") -> tuple[x509.Certificate, ...]:
    """Every certificate of a PEM bundle; an empty or blank bundle is no CA at all."""
    if not pem.strip():
        return ()
    try:
        return tuple(x509.load_pem_x509_certificates(pem))
    except ValueError as err:
        raise AuthenticationConfigError(f"{what}: not a PEM certificate bundle ({err})") from None


def pem_bundle(certs: Iterable[x509.Certificate]) -> bytes:
    return b"".join(cert.public_bytes(serialization.Encoding.PEM) for cert in certs)


def _text(data: Mapping[str, str], key: str) -> str:
    value = data.get(key)
    return value if isinstance(value, str) else ""


def _string_list(data: Mapping[str, str], key: str) -> tuple[str, ...]:
    raw = _text(data, key)
    if not raw.strip():
        return ()
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as err:
        raise AuthenticationConfigError(f"{key}: not a JSON array of strings ({err})") from None
    if value is None:
        return ()
    # Go unmarshals into []string: anything else (a bare string, numbers) is an error there
    # too, so we refuse rather than guess what kube-apiserver meant.
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise AuthenticationConfigError(f"{key}: not a JSON array of strings: {raw!r}")
    return tuple(value)


__all__ = [
    "ALLOWED_NAMES_KEY",
    "CLIENT_CA_KEY",
    "CONFIGMAP_NAME",
    "CONFIGMAP_NAMESPACE",
    "DEFAULT_EXTRA_HEADERS_PREFIXES",
    "DEFAULT_GROUP_HEADERS",
    "DEFAULT_UID_HEADERS",
    "DEFAULT_USERNAME_HEADERS",
    "EXTRA_PREFIXES_KEY",
    "GROUP_HEADERS_KEY",
    "REQUESTHEADER_CA_KEY",
    "UID_HEADERS_KEY",
    "USERNAME_HEADERS_KEY",
    "AuthenticationConfig",
    "AuthenticationConfigError",
    "parse_ca_bundle",
    "pem_bundle",
]
