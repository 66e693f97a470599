"""The TLS contexts of docs/cluster.md#tls-in-python: how they are built and how they are
swapped."""

from __future__ import annotations

import ssl
from datetime import UTC, datetime

import pytest

from visibility_server.certs import CertifiedKey, PemPair, create_ca, issue_serving_cert
from visibility_server.tls.listener import ListenerTLS, build_server_context

NOW = datetime.now(UTC)  # OpenSSL checks a pair's validity against the real clock
SERVING_CA = create_ca(now=NOW)
FRONT_PROXY_CA = create_ca(now=NOW, common_name="front-proxy-ca")
CLIENT_CA = create_ca(now=NOW, common_name="kubernetes")


def serving_pair() -> PemPair:
    pair = issue_serving_cert(
        SERVING_CA, namespace="queuescope-system", service="queuescope-visibility", now=NOW
    )
    return PemPair(pair.cert_pem, pair.key_pem)


def ca_names(context: ssl.SSLContext) -> set[str]:
    names: set[str] = set()
    for cert in context.get_ca_certs():
        for rdn in cert["subject"]:
            names.update(str(pair[1]) for pair in rdn if pair[0] == "commonName")
    return names


def bundle(*cas: CertifiedKey) -> bytes:
    return b"".join(ca.cert_pem for ca in cas)


def test_the_server_context_is_built_as_the_spec_says() -> None:
    pair = serving_pair()
    context = build_server_context(pair.cert_pem, pair.key_pem, bundle(FRONT_PROXY_CA, CLIENT_CA))
    assert context.protocol == ssl.PROTOCOL_TLS_SERVER
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert context.verify_mode == ssl.CERT_OPTIONAL
    assert context.verify_flags & ssl.VERIFY_X509_PARTIAL_CHAIN
    assert not context.verify_flags & ssl.VERIFY_X509_STRICT
    # Every accepted CA is in the store: an unknown one would abort the handshake.
    assert context.cert_store_stats()["x509_ca"] == 2
    assert ca_names(context) == {"front-proxy-ca", "kubernetes"}


def test_no_ca_at_all_is_an_empty_store() -> None:
    pair = serving_pair()
    context = build_server_context(pair.cert_pem, pair.key_pem, b"")
    assert context.cert_store_stats()["x509_ca"] == 0


def test_a_bad_bundle_is_refused() -> None:
    pair = serving_pair()
    with pytest.raises(ValueError):
        build_server_context(pair.cert_pem, pair.key_pem, b"-----BEGIN CERTIFICATE-----\nxx\n")


def test_a_mismatched_pair_is_refused() -> None:
    with pytest.raises(ssl.SSLError):
        build_server_context(serving_pair().cert_pem, serving_pair().key_pem, b"")


def test_the_listener_context_switches_handshakes_to_the_current_one() -> None:
    listener = ListenerTLS(serving_pair(), bundle(FRONT_PROXY_CA))
    assert listener.context.sni_callback is not None
    assert listener.current is not listener.context
    config_stub = object()
    assert listener.ssl_context_factory(config_stub, ssl.SSLContext) is listener.context


def test_set_client_cas_builds_a_fresh_context_and_only_adds_to_the_listener() -> None:
    listener = ListenerTLS(serving_pair(), bundle(FRONT_PROXY_CA))
    listening, before = listener.context, listener.current
    listener.set_client_cas(bundle(CLIENT_CA))
    assert listener.context is listening
    assert listener.current is not before
    assert ca_names(listener.current) == {"kubernetes"}
    # Python cannot remove CAs from a store: the listener context keeps the old one.
    assert ca_names(listener.context) == {"front-proxy-ca", "kubernetes"}
    assert listener.client_cas_pem == bundle(CLIENT_CA)
    listener.set_client_cas(bundle(CLIENT_CA))
    assert listener.context.cert_store_stats()["x509_ca"] == 2


def test_set_serving_pair_builds_a_fresh_context() -> None:
    listener = ListenerTLS(serving_pair(), bundle(FRONT_PROXY_CA))
    before = listener.current
    new = serving_pair()
    listener.set_serving_pair(new)
    assert listener.serving_pair == new
    assert listener.current is not before
    assert ca_names(listener.current) == {"front-proxy-ca"}


def test_a_pair_openssl_refuses_changes_nothing() -> None:
    listener = ListenerTLS(serving_pair(), b"")
    before, pair = listener.current, listener.serving_pair
    with pytest.raises(ssl.SSLError):
        listener.set_serving_pair(PemPair(serving_pair().cert_pem, serving_pair().key_pem))
    assert listener.current is before
    assert listener.serving_pair == pair
