"""`DelegatedAuth`, the wiring's one object: the startup read feeds the chain, changes
reach the chain and the listeners, and every part shares one gauge."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from tests.unit.visibility_server.authn.support import ca
from tests.unit.visibility_server.kube.support import (
    CONFIGMAP_PATH,
    CONFIGMAPS_PATH,
    FORBIDDEN,
    SAR_PATH,
    SELF_SAR_PATH,
    TOKEN_REVIEW_PATH,
    FakeTransport,
    Refresher,
    StopWatching,
    created,
    response,
    status_error,
)
from visibility_server.authn.config import AuthenticationConfig
from visibility_server.authz.attributes import request_attributes
from visibility_server.authz.identity import authenticated_user
from visibility_server.kube.configmap import AuthenticationLookupError
from visibility_server.kube.delegated import DelegatedAuth, DelegationSettings, KubeIdentity
from visibility_server.kube.errors import DelegationForbiddenError
from visibility_server.kube.metrics import PERMITTED_METRIC

FRONT_PROXY_CA = ca("front-proxy-ca")
NEW_FRONT_PROXY_CA = ca("front-proxy-ca-new")
LQ = "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/a/localqueues/q/pendingworkloads"


def configmap(version: str, pem: bytes) -> dict[str, object]:
    return {
        "metadata": {"name": "extension-apiserver-authentication", "resourceVersion": version},
        "data": {
            "requestheader-client-ca-file": pem.decode(),
            "requestheader-allowed-names": '["front-proxy-client"]',
            "requestheader-username-headers": '["X-Remote-User"]',
        },
    }


def delegated(
    transport: FakeTransport,
    *,
    refresh_credentials: Refresher | None = None,
    authentication: KubeIdentity | None = None,
    authorization: KubeIdentity | None = None,
    **settings: Any,
) -> tuple[DelegatedAuth, CollectorRegistry]:
    registry = CollectorRegistry()
    auth = DelegatedAuth(
        KubeIdentity(transport, refresh_credentials),
        registry=registry,
        authentication=authentication,
        authorization=authorization,
        settings=DelegationSettings(retry=transport.clock.policy(), **settings),
    )
    return auth, registry


async def test_load_configures_the_chain_and_changes_reach_the_listeners() -> None:
    transport = FakeTransport()
    transport.script("GET", CONFIGMAP_PATH, response(200, configmap("1", FRONT_PROXY_CA.cert_pem)))
    rotated = configmap("2", FRONT_PROXY_CA.cert_pem + NEW_FRONT_PROXY_CA.cert_pem)
    transport.script(
        "GET",
        CONFIGMAPS_PATH,
        response(200, {"metadata": {"resourceVersion": "2"}, "items": [rotated]}),
    )
    transport.script("POST", SELF_SAR_PATH, created({"allowed": True}))
    auth, registry = delegated(transport, anonymous_auth=False)
    assert not auth.config_loaded
    config = await auth.load()
    assert auth.config_loaded
    assert auth.authenticator.config is config
    assert config.requestheader_cas == (FRONT_PROXY_CA.cert,)
    assert not config.anonymous_auth

    swapped: list[bytes] = []
    auth.on_config_change(lambda new: swapped.append(new.accepted_cas_pem))
    with pytest.raises(BaseExceptionGroup) as raised:
        await auth.run()
    assert raised.group_contains(StopWatching)
    assert auth.authenticator.config.requestheader_cas == (
        FRONT_PROXY_CA.cert,
        NEW_FRONT_PROXY_CA.cert,
    )
    assert swapped == [auth.authenticator.config.accepted_cas_pem]
    # The self-check ran too, before the watch's fake ended the run.
    assert registry.get_sample_value(PERMITTED_METRIC, {"resource": "tokenreviews"}) == 1


async def test_a_failed_startup_read_raises_unless_tolerated() -> None:
    transport = FakeTransport()
    transport.script("GET", CONFIGMAP_PATH, FORBIDDEN)
    auth, _ = delegated(transport)
    with pytest.raises(AuthenticationLookupError):
        await auth.load()
    assert not auth.config_loaded
    tolerant, _ = delegated(transport, tolerate_lookup_failure=True)
    assert await tolerant.load() == AuthenticationConfig()


async def test_a_static_configuration_skips_the_configmap() -> None:
    transport = FakeTransport()
    static = AuthenticationConfig(requestheader_ca_pem=FRONT_PROXY_CA.cert_pem)
    auth, _ = delegated(transport, static_config=static)
    assert await auth.load() is static
    await auth.watch_config()  # nothing to follow: returns at once
    assert transport.calls == []
    assert auth.authenticator.config is static


async def test_watch_before_load_is_a_wiring_error() -> None:
    auth, _ = delegated(FakeTransport())
    with pytest.raises(RuntimeError, match="load"):
        await auth.watch_config()


async def test_a_forbidden_sar_drops_the_shared_gauge_at_once() -> None:
    transport = FakeTransport()
    transport.script("POST", SELF_SAR_PATH, created({"allowed": True}))
    transport.script("POST", SAR_PATH, FORBIDDEN)
    auth, registry = delegated(transport)
    await auth.self_check.check_once()
    assert registry.get_sample_value(PERMITTED_METRIC, {"resource": "subjectaccessreviews"}) == 1
    with pytest.raises(DelegationForbiddenError):
        await auth.sar_backend.review(authenticated_user("alice"), request_attributes("GET", LQ))
    assert registry.get_sample_value(PERMITTED_METRIC, {"resource": "subjectaccessreviews"}) == 0
    assert registry.get_sample_value(PERMITTED_METRIC, {"resource": "tokenreviews"}) == 1


# -- the authentication and authorization identities (--authentication-kubeconfig,
# --authorization-kubeconfig) ------------------------------------------------------------

AUTHN_USER = "the user of --authentication-kubeconfig /etc/authn"
AUTHZ_USER = "the user of --authorization-kubeconfig /etc/authz"


def identity(transport: FakeTransport, who: str) -> tuple[KubeIdentity, Refresher]:
    refresher = Refresher()
    return KubeIdentity(transport, refresher, who), refresher


def serving_authentication(transport: FakeTransport) -> None:
    """What the authentication client is asked: the ConfigMap, TokenReviews, the self-check."""
    transport.script("GET", CONFIGMAP_PATH, response(200, configmap("1", FRONT_PROXY_CA.cert_pem)))
    transport.script(
        "POST",
        TOKEN_REVIEW_PATH,
        created({"authenticated": True, "user": {"username": "carol"}}),
    )
    transport.script("POST", SELF_SAR_PATH, created({"allowed": True}))


async def test_each_call_goes_through_the_client_of_its_identity() -> None:
    """As k8s.io/apiserver's delegating servers: TokenReviews and the ConfigMap through the
    authentication client, SubjectAccessReviews through the authorization client, nothing
    through the main one (unscripted: any call to it fails the test)."""
    main = FakeTransport()
    authn = FakeTransport(main.clock)
    authz = FakeTransport(main.clock)
    serving_authentication(authn)
    authz.script("POST", SAR_PATH, status_error(401, "Unauthorized"), created({"allowed": True}))
    authz.script("POST", SELF_SAR_PATH, created({"allowed": True}))
    main_refresher = Refresher()
    authentication, authn_refresher = identity(authn, AUTHN_USER)
    authorization, authz_refresher = identity(authz, AUTHZ_USER)
    auth, registry = delegated(
        main,
        refresh_credentials=main_refresher,
        authentication=authentication,
        authorization=authorization,
    )
    config = await auth.load()
    assert config.requestheader_cas == (FRONT_PROXY_CA.cert,)
    user = await auth.token_reviewer.review("a-token")
    assert user is not None and user.name == "carol"
    decision = await auth.sar_backend.review(
        authenticated_user("alice"), request_attributes("GET", LQ)
    )
    assert decision.allowed
    # The 401 made the authorization client re-read its own credentials.
    assert (authz_refresher.calls, authn_refresher.calls, main_refresher.calls) == (1, 0, 0)
    assert await auth.self_check.check_once() == {
        "subjectaccessreviews": True,
        "tokenreviews": True,
        "configmaps": True,
    }
    assert main.calls == []
    assert [c.path for c in authz.calls] == [SAR_PATH, SAR_PATH, SELF_SAR_PATH]
    assert [c.path for c in authn.calls] == [
        CONFIGMAP_PATH,
        TOKEN_REVIEW_PATH,
        *[SELF_SAR_PATH] * 4,  # tokenreviews; get, list and watch of the ConfigMap
    ]
    self_check = authz.calls[2].body
    assert self_check is not None
    assert self_check["spec"]["resourceAttributes"]["resource"] == "subjectaccessreviews"
    assert registry.get_sample_value(PERMITTED_METRIC, {"resource": "configmaps"}) == 1


async def test_the_identity_left_out_is_the_main_one() -> None:
    main = FakeTransport()
    authz = FakeTransport(main.clock)
    serving_authentication(main)
    authz.script("POST", SAR_PATH, FORBIDDEN)
    authorization, _ = identity(authz, AUTHZ_USER)
    auth, _ = delegated(main, authorization=authorization)
    assert auth.authentication_identity.api is main
    await auth.load()
    assert await auth.token_reviewer.review("a-token") is not None
    assert [c.path for c in main.calls] == [CONFIGMAP_PATH, TOKEN_REVIEW_PATH]
    # A missing grant is named for the identity that lacks it, not for the main one.
    with pytest.raises(DelegationForbiddenError) as raised:
        await auth.sar_backend.review(authenticated_user("alice"), request_attributes("GET", LQ))
    assert f'bind {AUTHZ_USER} to the ClusterRole "system:auth-delegator"' in str(raised.value)

    plain, _ = delegated(main)
    assert plain.authentication_identity is plain.authorization_identity
    assert plain.authorization_identity.api is main


async def test_a_forbidden_configmap_names_the_authentication_identity() -> None:
    main = FakeTransport()
    authn = FakeTransport(main.clock)
    authn.script("GET", CONFIGMAP_PATH, FORBIDDEN)
    authentication, _ = identity(authn, AUTHN_USER)
    auth, _ = delegated(main, authentication=authentication)
    with pytest.raises(AuthenticationLookupError) as raised:
        await auth.load()
    assert f'bind {AUTHN_USER} to the Role "extension-apiserver-authentication-reader"' in str(
        raised.value
    )
    assert main.calls == []


async def test_a_static_configuration_is_not_checked_for_the_configmap() -> None:
    transport = FakeTransport()
    transport.script("POST", SELF_SAR_PATH, created({"allowed": True}))
    static = AuthenticationConfig(requestheader_ca_pem=FRONT_PROXY_CA.cert_pem)
    auth, _ = delegated(transport, static_config=static)
    assert await auth.self_check.check_once() == {
        "subjectaccessreviews": True,
        "tokenreviews": True,
    }
