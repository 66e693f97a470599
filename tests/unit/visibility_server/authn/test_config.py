"""Parsing `kube-system/extension-apiserver-authentication`
(docs/cluster.md#the-authentication-configmap)."""

from __future__ import annotations

import json

import pytest

from tests.unit.visibility_server.authn.support import ca
from visibility_server.authn.config import (
    ALLOWED_NAMES_KEY,
    CLIENT_CA_KEY,
    EXTRA_PREFIXES_KEY,
    GROUP_HEADERS_KEY,
    REQUESTHEADER_CA_KEY,
    UID_HEADERS_KEY,
    USERNAME_HEADERS_KEY,
    AuthenticationConfig,
    AuthenticationConfigError,
)

CLIENT_CA = ca("kubernetes")
FRONT_PROXY_CA = ca("front-proxy-ca")
OLD_FRONT_PROXY_CA = ca("front-proxy-ca-old")

LIST_KEYS = {
    ALLOWED_NAMES_KEY: "allowed_names",
    USERNAME_HEADERS_KEY: "username_headers",
    GROUP_HEADERS_KEY: "group_headers",
    EXTRA_PREFIXES_KEY: "extra_headers_prefixes",
    UID_HEADERS_KEY: "uid_headers",
}


def kubeadm_data() -> dict[str, str]:
    return {
        CLIENT_CA_KEY: CLIENT_CA.cert_pem.decode(),
        REQUESTHEADER_CA_KEY: (FRONT_PROXY_CA.cert_pem + OLD_FRONT_PROXY_CA.cert_pem).decode(),
        ALLOWED_NAMES_KEY: '["front-proxy-client"]',
        USERNAME_HEADERS_KEY: '["X-Remote-User"]',
        GROUP_HEADERS_KEY: '["X-Remote-Group"]',
        EXTRA_PREFIXES_KEY: '["X-Remote-Extra-"]',
        UID_HEADERS_KEY: "[]",
    }


def test_a_kubeadm_configmap() -> None:
    config = AuthenticationConfig.from_configmap(kubeadm_data())
    assert config.client_cas == (CLIENT_CA.cert,)
    # Several kube-apiservers (or the merge keeping old values) give several CAs.
    assert config.requestheader_cas == (FRONT_PROXY_CA.cert, OLD_FRONT_PROXY_CA.cert)
    assert config.allowed_names == ("front-proxy-client",)
    assert config.username_headers == ("X-Remote-User",)
    assert config.group_headers == ("X-Remote-Group",)
    assert config.extra_headers_prefixes == ("X-Remote-Extra-",)
    assert config.uid_headers == ()
    assert config.anonymous_auth is True


def test_several_names_keep_their_order() -> None:
    data = kubeadm_data() | {
        ALLOWED_NAMES_KEY: '["front-proxy-client", "aggregator"]',
        USERNAME_HEADERS_KEY: '["X-Remote-User", "X-Forwarded-User"]',
    }
    config = AuthenticationConfig.from_configmap(data)
    assert config.allowed_names == ("front-proxy-client", "aggregator")
    assert config.username_headers == ("X-Remote-User", "X-Forwarded-User")


@pytest.mark.parametrize("key", sorted(LIST_KEYS))
@pytest.mark.parametrize("value", [None, "", "null", "[]", "  "])
def test_missing_empty_null_and_empty_array_are_all_empty(key: str, value: str | None) -> None:
    data = kubeadm_data()
    if value is None:
        del data[key]
    else:
        data[key] = value
    config = AuthenticationConfig.from_configmap(data)
    assert getattr(config, LIST_KEYS[key]) == ()


@pytest.mark.parametrize("key", [CLIENT_CA_KEY, REQUESTHEADER_CA_KEY])
@pytest.mark.parametrize("value", [None, "", "\n"])
def test_a_missing_or_empty_ca_bundle_is_no_ca(key: str, value: str | None) -> None:
    data = kubeadm_data()
    if value is None:
        del data[key]
    else:
        data[key] = value
    config = AuthenticationConfig.from_configmap(data)
    cas = config.client_cas if key == CLIENT_CA_KEY else config.requestheader_cas
    assert cas == ()


def test_without_a_requestheader_ca_only_the_client_ca_is_set() -> None:
    config = AuthenticationConfig.from_configmap({CLIENT_CA_KEY: CLIENT_CA.cert_pem.decode()})
    assert config == AuthenticationConfig(client_ca_pem=CLIENT_CA.cert_pem)
    assert config.requestheader_cas == ()
    assert config.username_headers == ()


def test_an_empty_configmap() -> None:
    assert AuthenticationConfig.from_configmap({}) == AuthenticationConfig()


@pytest.mark.parametrize(
    "value",
    ["X-Remote-User", '"X-Remote-User"', "[1]", '{"a": "b"}', '["a", null]', "[", "true"],
)
def test_anything_but_a_json_string_array_is_refused(value: str) -> None:
    with pytest.raises(AuthenticationConfigError, match=USERNAME_HEADERS_KEY):
        AuthenticationConfig.from_configmap(kubeadm_data() | {USERNAME_HEADERS_KEY: value})


def test_a_bundle_that_is_not_pem_is_refused() -> None:
    with pytest.raises(AuthenticationConfigError, match=REQUESTHEADER_CA_KEY):
        AuthenticationConfig.from_configmap(kubeadm_data() | {REQUESTHEADER_CA_KEY: "garbage"})


def test_the_anonymous_switch_is_not_in_the_configmap() -> None:
    config = AuthenticationConfig.from_configmap(kubeadm_data(), anonymous_auth=False)
    assert config.anonymous_auth is False


def test_equal_content_is_an_equal_hashable_config() -> None:
    # The ConfigMap is re-synced every minute; an unchanged one must compare equal so that
    # nothing is rebuilt.
    first = AuthenticationConfig.from_configmap(kubeadm_data())
    again = AuthenticationConfig.from_configmap(json.loads(json.dumps(kubeadm_data())))
    assert first == again
    assert hash(first) == hash(again)
    changed = AuthenticationConfig.from_configmap(kubeadm_data() | {ALLOWED_NAMES_KEY: "[]"})
    assert changed != first


def test_lists_passed_by_callers_become_tuples() -> None:
    config = AuthenticationConfig(username_headers=["X-Remote-User"])  # type: ignore[arg-type]
    assert config.username_headers == ("X-Remote-User",)
    assert hash(config)


def test_accepted_cas_are_both_bundles_without_duplicates() -> None:
    config = AuthenticationConfig(
        client_ca_pem=CLIENT_CA.cert_pem + FRONT_PROXY_CA.cert_pem,
        requestheader_ca_pem=FRONT_PROXY_CA.cert_pem,
    )
    assert config.accepted_cas == (FRONT_PROXY_CA.cert, CLIENT_CA.cert)
    assert config.accepted_cas_pem == FRONT_PROXY_CA.cert_pem + CLIENT_CA.cert_pem
