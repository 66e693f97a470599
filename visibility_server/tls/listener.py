"""The listener's TLS contexts (docs/cluster.md#tls-in-python) and how they change at runtime
(docs/cluster.md#tls-and-certificates, #the-authentication-configmap).

Python cannot ask for "any client certificate, verify later" as Go does: under
`CERT_OPTIONAL` a certificate from a CA outside the verify store aborts the handshake. So
every CA we accept (requestheader and client-ca bundles) is in the store, and the app then
checks which bundle issued the certificate. OpenSSL's store only grows
(`load_verify_locations` adds), so a CA change builds a fresh context which the listener
context's `sni_callback` installs on every new handshake; the serving pair is swapped the
same way. Handshakes already under way and open connections keep what they started with.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from scheduler.lang.readonly import ReadOnly
from visibility_server.tls.verify import PemPair, apply_pair

logger = logging.getLogger(__name__)

MINIMUM_TLS_VERSION = ssl.TLSVersion.TLSv1_2
# uvicorn speaks HTTP/1.1 only; advertising it lets client-go settle ALPN at once
# instead of offering h2 and falling back.
ALPN_PROTOCOLS = ("http/1.1",)


def build_server_context(
    cert_pem: bytes,
    key_pem: bytes,
    client_cas_pem: bytes,
    *,
    minimum_version: ssl.TLSVersion = MINIMUM_TLS_VERSION,
) -> ssl.SSLContext:
    """A server context presenting the pair and accepting client certificates from every
    CA of `client_cas_pem` (possibly empty: then any client certificate fails the
    handshake, and certificate-less clients are fine).

    Built directly rather than with `create_default_context`, whose 3.13 form turns on
    `VERIFY_X509_STRICT`, which kube-generated certificates are not guaranteed to pass.
    `VERIFY_X509_PARTIAL_CHAIN` makes intermediates of a bundle anchors, as Go's pools do.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = minimum_version
    context.verify_mode = ssl.CERT_OPTIONAL
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    context.set_alpn_protocols(list(ALPN_PROTOCOLS))
    apply_pair(context, PemPair(cert_pem, key_pem))
    cas = _load_cas(client_cas_pem)
    if cas:
        context.load_verify_locations(cadata=_pem_text(cas))
    return context


class ListenerTLS:
    """Owns the context uvicorn listens with and the per-handshake context it installs.

    The listener context is what `ssl_context_factory` hands to uvicorn; it is never
    replaced (the server holds it). Its `sni_callback` runs for every ClientHello, with or
    without SNI on OpenSSL 1.1.1+, and switches the handshake to the current context, whose
    verify store and certificate then apply. Verify mode and flags stay the listener
    context's, which is why both are built by `build_server_context`.
    """

    # What new handshakes get: the context they switch to, and the pair and client CAs it
    # was built from; `set_serving_pair` and `set_client_cas` change them.
    current = ReadOnly[ssl.SSLContext]()
    serving_pair = ReadOnly[PemPair]()
    client_cas_pem = ReadOnly[bytes]()

    def __init__(
        self,
        pair: PemPair,
        client_cas_pem: bytes,
        *,
        minimum_version: ssl.TLSVersion = MINIMUM_TLS_VERSION,
    ) -> None:
        self._minimum_version = minimum_version
        self._serving_pair = pair
        self._client_cas_pem = client_cas_pem
        self._current = self._build(pair, client_cas_pem)
        # The listener context: pass it to uvicorn (or any server) once.
        self.context: Final = self._build(pair, client_cas_pem)
        self._listener_cas = {_der(cert) for cert in _load_cas(client_cas_pem)}
        self.context.sni_callback = self._select_context

    def ssl_context_factory(
        self, config: object, default_factory: Callable[[], ssl.SSLContext]
    ) -> ssl.SSLContext:
        """`uvicorn.Config(ssl_context_factory=...)`: ignore uvicorn's file-based default."""
        return self.context

    def set_serving_pair(self, pair: PemPair) -> None:
        """Present `pair` on new handshakes. The pair must already be validated
        (`validate_serving_pair`); a pair OpenSSL refuses raises and changes nothing."""
        fresh = self._build(pair, self._client_cas_pem)
        # Also on the listener context: should a handshake ever skip the callback, it still
        # gets the new certificate.
        apply_pair(self.context, pair)
        self._current = fresh
        self._serving_pair = pair

    def set_client_cas(self, client_cas_pem: bytes) -> None:
        """Accept client certificates from exactly these CAs on new handshakes."""
        cas = _load_cas(client_cas_pem)
        fresh = self._build(self._serving_pair, client_cas_pem)
        # The listener's store can only grow: added CAs go there too (a handshake that
        # skipped the callback would otherwise refuse them); removed CAs leave it only
        # with a restart, and matter only if the callback is skipped.
        added = [cert for cert in cas if _der(cert) not in self._listener_cas]
        if added:
            self.context.load_verify_locations(cadata=_pem_text(added))
            self._listener_cas.update(_der(cert) for cert in added)
        self._current = fresh
        self._client_cas_pem = client_cas_pem

    def _build(self, pair: PemPair, client_cas_pem: bytes) -> ssl.SSLContext:
        return build_server_context(
            pair.cert_pem,
            pair.key_pem,
            client_cas_pem,
            minimum_version=self._minimum_version,
        )

    def _select_context(
        self, connection: ssl.SSLObject | ssl.SSLSocket, server_name: str | None, _: ssl.SSLContext
    ) -> None:
        # Must not raise: an exception here aborts the handshake with an internal error.
        try:
            connection.context = self._current
        except Exception:  # pragma: no cover - defensive
            logger.exception("could not install the current TLS context on a handshake")


def _load_cas(pem: bytes) -> list[x509.Certificate]:
    # Parsed and re-encoded, not passed through: text around PEM blocks and bad blocks are
    # caught here with a clear error rather than by OpenSSL halfway through the bundle.
    if not pem.strip():
        return []
    return x509.load_pem_x509_certificates(pem)


def _pem_text(certs: list[x509.Certificate]) -> str:
    # `cadata` as str means PEM (bytes would mean DER).
    return "".join(cert.public_bytes(serialization.Encoding.PEM).decode("ascii") for cert in certs)


def _der(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.DER)


__all__ = ["ALPN_PROTOCOLS", "MINIMUM_TLS_VERSION", "ListenerTLS", "build_server_context"]
