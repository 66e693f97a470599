"""The TokenReview client (docs/cluster.md#authenticator-chain): body, answers, unavailability as
503, and that no token ever reaches a log."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import CollectorRegistry

from tests.unit.visibility_server.kube.support import (
    FORBIDDEN,
    TIMEOUT,
    TOKEN_REVIEW_PATH,
    FakeTransport,
    Outcome,
    created,
    status_error,
)
from visibility_server.authn.chain import INVALID_BEARER_TOKEN, AuthenticatorChain
from visibility_server.authn.config import AuthenticationConfig
from visibility_server.authn.interface import (
    AuthenticationFailed,
    AuthenticationUnavailable,
    RequestCredentials,
)
from visibility_server.authz.identity import UserInfo
from visibility_server.kube.calls import ApiCaller
from visibility_server.kube.errors import (
    CredentialRejectedError,
    DelegationForbiddenError,
    InvalidAnswerError,
)
from visibility_server.kube.metrics import delegated_auth_metrics
from visibility_server.kube.tokenreview import TokenReviewClient

TOKEN = "eyJhbGciOiJSUzI1NiJ9.secret-token-value.signature"
SA_USER = {
    "username": "system:serviceaccount:monitoring:prometheus",
    "uid": "5b1f0c9e-0000-4000-8000-000000000001",
    "groups": [
        "system:serviceaccounts",
        "system:serviceaccounts:monitoring",
        "system:authenticated",
    ],
    "extra": {
        "authentication.kubernetes.io/pod-name": ["prometheus-0"],
        "authentication.kubernetes.io/credential-id": ["JTI=abc"],
    },
}


def client(*outcomes: Outcome) -> tuple[TokenReviewClient, FakeTransport]:
    transport = FakeTransport()
    transport.script("POST", TOKEN_REVIEW_PATH, *outcomes)
    metrics = delegated_auth_metrics(CollectorRegistry())
    return TokenReviewClient(
        ApiCaller(transport, policy=transport.clock.policy(), metrics=metrics)
    ), transport


async def test_the_body_carries_only_the_token() -> None:
    reviewer, transport = client(created({"authenticated": False}))
    await reviewer.review(TOKEN)
    assert transport.calls[0].body == {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": TOKEN},
    }


async def test_an_authenticated_token_is_its_user() -> None:
    # kube-apiserver echoes the token in spec; the user comes from status alone.
    reviewer, _ = client(created({"authenticated": True, "user": SA_USER}, token=TOKEN))
    assert await reviewer.review(TOKEN) == UserInfo(
        "system:serviceaccount:monitoring:prometheus",
        uid="5b1f0c9e-0000-4000-8000-000000000001",
        groups=(
            "system:serviceaccounts",
            "system:serviceaccounts:monitoring",
            "system:authenticated",
        ),
        extra={
            "authentication.kubernetes.io/pod-name": ("prometheus-0",),
            "authentication.kubernetes.io/credential-id": ("JTI=abc",),
        },
    )


async def test_a_user_with_only_a_name() -> None:
    reviewer, _ = client(created({"authenticated": True, "user": {"username": "bob"}}))
    assert await reviewer.review(TOKEN) == UserInfo("bob")


@pytest.mark.parametrize(
    "status",
    [{"authenticated": False}, {"authenticated": False, "error": "token expired"}, {}],
    ids=["false", "with-error", "no-status"],
)
async def test_an_unauthenticated_token_is_none(status: dict[str, object]) -> None:
    reviewer, _ = client(created(status))
    assert await reviewer.review(TOKEN) is None


@pytest.mark.parametrize(
    "user", [None, {}, {"username": ""}, "bob"], ids=["missing", "empty", "no-name", "not-object"]
)
async def test_authenticated_without_a_username_is_an_error(user: object) -> None:
    reviewer, _ = client(created({"authenticated": True, "user": user}))
    with pytest.raises(InvalidAnswerError):
        await reviewer.review(TOKEN)


@pytest.mark.parametrize(
    "failure",
    [TIMEOUT, status_error(503, "unavailable"), status_error(500, "x"), status_error(429, "slow")],
    ids=["timeout", "503", "500", "429"],
)
async def test_unreachable_is_authentication_unavailable(failure: Outcome) -> None:
    reviewer, transport = client(failure)
    with pytest.raises(AuthenticationUnavailable):
        await reviewer.review(TOKEN)
    assert len(transport.calls) > 1  # retried first


async def test_forbidden_names_the_auth_delegator_binding() -> None:
    reviewer, _ = client(FORBIDDEN)
    with pytest.raises(DelegationForbiddenError) as raised:
        await reviewer.review(TOKEN)
    assert "tokenreviews.authentication.k8s.io" in str(raised.value)
    assert "system:auth-delegator" in str(raised.value)


async def test_our_own_401_twice_is_a_credential_error() -> None:
    reviewer, transport = client(status_error(401, "Unauthorized"))
    with pytest.raises(CredentialRejectedError):
        await reviewer.review(TOKEN)
    assert len(transport.calls) == 2


def chain(*outcomes: Outcome) -> tuple[AuthenticatorChain, FakeTransport]:
    reviewer, transport = client(*outcomes)
    return AuthenticatorChain(AuthenticationConfig(), reviewer), transport


def bearer(token: str) -> RequestCredentials:
    return RequestCredentials(None, (("authorization", f"Bearer {token}"),), token)


async def test_in_the_chain_a_rejected_token_is_401_and_cached() -> None:
    authenticator, transport = chain(created({"authenticated": False}))
    for _ in range(2):
        with pytest.raises(AuthenticationFailed, match=INVALID_BEARER_TOKEN):
            await authenticator.authenticate(bearer(TOKEN))
    assert len(transport.calls) == 1


async def test_in_the_chain_an_accepted_token_gets_system_authenticated() -> None:
    authenticator, _ = chain(created({"authenticated": True, "user": {"username": "bob"}}))
    user = await authenticator.authenticate(bearer(TOKEN))
    assert user == UserInfo("bob", groups=("system:authenticated",))


async def test_no_token_is_logged_on_any_path(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    echoed = created({"authenticated": True, "user": SA_USER}, token=TOKEN)
    for outcome in (
        echoed,
        FORBIDDEN,
        TIMEOUT,
        status_error(401, "Unauthorized"),
        status_error(400, "bad"),
    ):
        reviewer, _ = client(outcome)
        try:
            await reviewer.review(TOKEN)
        except Exception as err:
            assert "secret-token-value" not in str(err)
    assert caplog.records  # the forbidden answer did log
    assert all("secret-token-value" not in r.getMessage() for r in caplog.records)
