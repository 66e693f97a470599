"""The authenticator chain of docs/cluster.md#authenticator-chain and the header rules of
docs/cluster.md#front-proxy-headers."""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.unit.visibility_server.authn.support import (
    ANY_EKU,
    CLIENT_AUTH,
    FRONT_PROXY_CN,
    NOW,
    SERVER_AUTH,
    ca,
    creds,
    der,
    kubeadm_config,
    leaf,
)
from visibility_server.authn import chain as chain_module
from visibility_server.authn.chain import (
    CREDENTIAL_ID_KEY,
    INVALID_BEARER_TOKEN,
    AuthenticatorChain,
    TokenCache,
    reject_impersonation,
    unescape_extra_key,
)
from visibility_server.authn.config import AuthenticationConfig
from visibility_server.authn.interface import (
    AuthenticationFailed,
    AuthenticationUnavailable,
    RequestCredentials,
)
from visibility_server.authz.identity import ANONYMOUS, UserInfo
from visibility_server.certs import CertifiedKey, create_ca

FRONT_PROXY_CA = ca("front-proxy-ca")
CLIENT_CA = ca("kubernetes")
OTHER_CA = ca("somebody-else")

FRONT_PROXY = leaf(FRONT_PROXY_CA, FRONT_PROXY_CN)
ALICE_CERT = leaf(CLIENT_CA, "alice", organizations=["team-a-devs", "qa"])

AUTHENTICATED = "system:authenticated"


@dataclass
class FakeClock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class FakeReviewer:
    """TokenReview as a table: token -> user (authenticated) or None (not)."""

    users: dict[str, UserInfo | None] = field(default_factory=dict)
    unavailable: bool = False
    calls: list[str] = field(default_factory=list)
    gate: asyncio.Event | None = None

    async def review(self, token: str) -> UserInfo | None:
        self.calls.append(token)
        if self.gate is not None:
            await self.gate.wait()
        if self.unavailable:
            raise AuthenticationUnavailable("tokenreviews: connection refused")
        return self.users.get(token)


def make_chain(
    config: AuthenticationConfig | None = None,
    reviewer: FakeReviewer | None = None,
    clock: FakeClock | None = None,
    now_offset: timedelta = timedelta(0),
) -> AuthenticatorChain:
    return AuthenticatorChain(
        config or kubeadm_config(FRONT_PROXY_CA, CLIENT_CA),
        reviewer,
        clock=clock or FakeClock(),
        now=lambda: NOW + now_offset,
    )


async def authenticate(chain: AuthenticatorChain, credentials: RequestCredentials) -> UserInfo:
    return await chain.authenticate(credentials)


async def failure(chain: AuthenticatorChain, credentials: RequestCredentials) -> str:
    with pytest.raises(AuthenticationFailed) as caught:
        await chain.authenticate(credentials)
    return str(caught.value)


# --- 1. front proxy ------------------------------------------------------------------


async def test_front_proxy_with_an_allowed_cn_vouches_for_the_headers() -> None:
    user = await authenticate(
        make_chain(),
        creds(
            FRONT_PROXY,
            [
                ("X-Remote-User", "alice"),
                ("X-Remote-Group", "team-a-devs"),
                ("X-Remote-Group", "qa"),
                ("X-Remote-Uid", "uid-123"),
                ("X-Remote-Extra-Scopes", "view"),
                ("Audit-ID", "abc"),
            ],
        ),
    )
    assert user == UserInfo(
        "alice",
        uid="uid-123",
        groups=("team-a-devs", "qa", AUTHENTICATED),
        extra={"scopes": ("view",)},
    )


async def test_a_cn_outside_the_allowed_list_is_an_error_with_gos_text() -> None:
    impostor = leaf(FRONT_PROXY_CA, "not-the-proxy")
    message = await failure(make_chain(), creds(impostor, [("X-Remote-User", "alice")]))
    assert "x509: subject with cn=not-the-proxy is not in the allowed list" in message


async def test_an_empty_allowed_list_accepts_any_cn() -> None:
    config = kubeadm_config(FRONT_PROXY_CA, CLIENT_CA, allowed_names=())
    proxy = leaf(FRONT_PROXY_CA, "any-name-at-all")
    user = await authenticate(make_chain(config), creds(proxy, [("X-Remote-User", "alice")]))
    assert user.name == "alice"


async def test_any_allowed_name_of_several_is_enough() -> None:
    config = kubeadm_config(FRONT_PROXY_CA, CLIENT_CA, allowed_names=("other", FRONT_PROXY_CN))
    user = await authenticate(make_chain(config), creds(FRONT_PROXY, [("X-Remote-User", "bo")]))
    assert user.name == "bo"


@pytest.mark.parametrize(
    ("offset", "word"),
    [(timedelta(days=31), "after"), (timedelta(hours=-2), "before")],
)
async def test_a_front_proxy_cert_outside_its_validity_is_an_error(
    offset: timedelta, word: str
) -> None:
    message = await failure(
        make_chain(now_offset=offset), creds(FRONT_PROXY, [("X-Remote-User", "alice")])
    )
    assert "x509: certificate has expired or is not yet valid" in message
    assert f" is {word} " in message


@pytest.mark.parametrize("eku", [None, (CLIENT_AUTH,), (ANY_EKU,), (SERVER_AUTH, CLIENT_AUTH)])
async def test_eku_absent_clientauth_or_any_is_accepted(eku: tuple[object, ...] | None) -> None:
    proxy = leaf(FRONT_PROXY_CA, FRONT_PROXY_CN, eku=eku)  # type: ignore[arg-type]
    user = await authenticate(make_chain(), creds(proxy, [("X-Remote-User", "alice")]))
    assert user.name == "alice"


async def test_a_serverauth_only_front_proxy_cert_is_an_error() -> None:
    proxy = leaf(FRONT_PROXY_CA, FRONT_PROXY_CN, eku=(SERVER_AUTH,))
    message = await failure(make_chain(), creds(proxy, [("X-Remote-User", "alice")]))
    assert "x509: certificate specifies an incompatible key usage" in message


@pytest.mark.parametrize(
    "headers",
    [[], [("X-Remote-User", "")], [("X-Remote-Group", "system:masters")]],
    ids=["no-header", "empty-value", "groups-only"],
)
async def test_no_username_falls_through_and_ends_in_401_as_in_go(
    headers: list[tuple[str, str]],
) -> None:
    # The front proxy has no opinion; the client-certificate authenticator then errs,
    # because the front-proxy CA is not a client-ca CA.
    message = await failure(make_chain(), creds(FRONT_PROXY, headers))
    assert "certificate signed by unknown authority" in message


async def test_no_username_with_the_front_proxy_ca_also_a_client_ca_is_the_proxy_itself() -> None:
    config = AuthenticationConfig(
        client_ca_pem=FRONT_PROXY_CA.cert_pem,
        requestheader_ca_pem=FRONT_PROXY_CA.cert_pem,
        username_headers=("X-Remote-User",),
    )
    user = await authenticate(make_chain(config), creds(FRONT_PROXY))
    assert user.name == FRONT_PROXY_CN


async def test_username_headers_in_list_order_first_non_empty() -> None:
    config = AuthenticationConfig(
        requestheader_ca_pem=FRONT_PROXY_CA.cert_pem,
        username_headers=("X-Remote-User", "X-Other-User"),
    )
    chain = make_chain(config)
    both = creds(FRONT_PROXY, [("X-Other-User", "bob"), ("X-Remote-User", "alice")])
    assert (await authenticate(chain, both)).name == "alice"
    first_empty = creds(FRONT_PROXY, [("X-Remote-User", ""), ("X-Other-User", "bob")])
    assert (await authenticate(chain, first_empty)).name == "bob"


async def test_groups_one_line_one_group_no_comma_splitting_empty_skipped() -> None:
    config = AuthenticationConfig(
        requestheader_ca_pem=FRONT_PROXY_CA.cert_pem,
        username_headers=("X-Remote-User",),
        group_headers=("X-Remote-Group", "X-Other-Group"),
    )
    headers = [
        ("X-Other-Group", "other"),
        ("X-Remote-Group", "a,b"),
        ("X-Remote-User", "alice"),
        ("X-Remote-Group", ""),
        ("x-remote-group", "c"),
    ]
    user = await authenticate(make_chain(config), creds(FRONT_PROXY, headers))
    # Header list order first, then line order.
    assert user.groups == ("a,b", "c", "other", AUTHENTICATED)


async def test_extras_are_lower_cased_then_percent_decoded() -> None:
    headers = [
        ("X-Remote-User", "alice"),
        ("X-Remote-Extra-Authentication.kubernetes.io%2FPod-Name", "pod-1"),
        ("X-Remote-Extra-Scopes", "view"),
        ("x-remote-extra-scopes", "edit"),
        ("X-REMOTE-EXTRA-Mixed%2fcase", "m"),
        ("X-Remote-Extra-Bad%zzKey", "kept"),
        ("X-Remote-Extra-Trailing%", "t"),
        ("X-Remote-Extra-Not-Utf8%FF", "raw"),
        ("X-Remote-Extra-Space%20Key", "s"),
    ]
    user = await authenticate(make_chain(), creds(FRONT_PROXY, headers))
    assert dict(user.extra) == {
        "authentication.kubernetes.io/pod-name": ("pod-1",),
        "scopes": ("view", "edit"),
        "mixed/case": ("m",),
        "bad%zzkey": ("kept",),
        "trailing%": ("t",),
        "not-utf8%ff": ("raw",),
        "space key": ("s",),
    }


@pytest.mark.parametrize(
    ("encoded", "decoded"),
    [
        ("plain", "plain"),
        ("a%2fb", "a/b"),
        ("%25", "%"),
        ("a+b", "a+b"),  # path unescaping: '+' is not a space
        ("%2", "%2"),
        ("%g0", "%g0"),
        ("%c3%a9", "é"),
        ("%c3", "%c3"),
    ],
)
def test_unescape_extra_key(encoded: str, decoded: str) -> None:
    assert unescape_extra_key(encoded) == decoded


async def test_uid_is_the_first_non_empty_uid_header_and_none_by_default() -> None:
    chain = make_chain()
    user = await authenticate(
        chain, creds(FRONT_PROXY, [("X-Remote-User", "alice"), ("X-Remote-Uid", "u-1")])
    )
    assert user.uid == "u-1"
    no_uid = await authenticate(chain, creds(FRONT_PROXY, [("X-Remote-User", "alice")]))
    assert no_uid.uid == ""
    not_configured = make_chain(kubeadm_config(FRONT_PROXY_CA, CLIENT_CA, uid_headers=()))
    ignored = await authenticate(
        not_configured, creds(FRONT_PROXY, [("X-Remote-User", "alice"), ("X-Remote-Uid", "u-1")])
    )
    assert ignored.uid == ""


async def test_front_proxy_headers_without_a_certificate_are_ignored() -> None:
    forged = creds(None, [("X-Remote-User", "admin"), ("X-Remote-Group", "system:masters")])
    assert await authenticate(make_chain(), forged) is ANONYMOUS


async def test_front_proxy_headers_with_a_client_certificate_are_ignored() -> None:
    forged = creds(ALICE_CERT, [("X-Remote-User", "admin"), ("X-Remote-Group", "system:masters")])
    user = await authenticate(make_chain(), forged)
    assert user.name == "alice"
    assert "system:masters" not in user.groups


async def test_a_front_proxy_cert_from_an_intermediate_in_the_bundle_is_accepted() -> None:
    # Only the leaf is visible on Python 3.11, so the intermediate must be in the bundle.
    intermediate = ca("front-proxy-intermediate")
    proxy = leaf(intermediate, FRONT_PROXY_CN)
    config = kubeadm_config(intermediate, CLIENT_CA)
    user = await authenticate(make_chain(config), creds(proxy, [("X-Remote-User", "alice")]))
    assert user.name == "alice"


# --- 2. client certificate -----------------------------------------------------------


async def test_a_client_certificate_is_its_cn_and_o_values() -> None:
    user = await authenticate(make_chain(), creds(ALICE_CERT))
    assert user.name == "alice"
    assert user.groups == ("team-a-devs", "qa", AUTHENTICATED)
    fingerprint = hashlib.sha256(der(ALICE_CERT)).hexdigest()
    assert dict(user.extra) == {CREDENTIAL_ID_KEY: (f"X509SHA256={fingerprint}",)}


async def test_an_empty_cn_is_an_error() -> None:
    nameless = leaf(CLIENT_CA, None, organizations=["g"])
    message = await failure(make_chain(), creds(nameless))
    assert "empty subject CN" in message


async def test_an_expired_client_certificate_is_an_error() -> None:
    message = await failure(make_chain(now_offset=timedelta(days=60)), creds(ALICE_CERT))
    assert "certificate has expired" in message


async def test_a_certificate_from_an_unknown_ca_is_an_error() -> None:
    # The TLS layer refuses these already (docs/cluster.md#tls-in-python); the chain does not rely
    # on it.
    message = await failure(make_chain(), creds(leaf(OTHER_CA, "mallory")))
    assert "certificate signed by unknown authority" in message


async def test_a_malformed_certificate_is_an_error() -> None:
    message = await failure(make_chain(), creds(b"not a certificate"))
    assert "malformed" in message


async def test_with_no_client_ca_a_certificate_is_an_error() -> None:
    config = AuthenticationConfig(anonymous_auth=True)
    message = await failure(make_chain(config), creds(ALICE_CERT))
    assert "unknown authority" in message


# --- certificate verdicts kept per DER -------------------------------------------------


@dataclass
class MovingNow:
    now: datetime

    def __call__(self) -> datetime:
        return self.now


def chain_at(moving: MovingNow, config: AuthenticationConfig | None = None) -> AuthenticatorChain:
    return AuthenticatorChain(config or kubeadm_config(FRONT_PROXY_CA, CLIENT_CA), None, now=moving)


def count_checks(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Records every run of the certificate checks (issuer validity, EKU)."""
    calls: list[object] = []
    real = chain_module._check_usable

    def counting(*args: Any) -> None:
        calls.append(args[0])
        real(*args)

    monkeypatch.setattr(chain_module, "_check_usable", counting)
    return calls


@pytest.mark.parametrize(
    ("cert", "headers", "user"),
    [(ALICE_CERT, [], "alice"), (FRONT_PROXY, [("X-Remote-User", "bob")], "bob")],
    ids=["client-certificate", "front-proxy"],
)
async def test_certificate_checks_run_once_per_certificate_not_per_request(
    monkeypatch: pytest.MonkeyPatch,
    cert: CertifiedKey,
    headers: list[tuple[str, str]],
    user: str,
) -> None:
    calls = count_checks(monkeypatch)
    moving = MovingNow(NOW)
    chain = chain_at(moving)
    first = await authenticate(chain, creds(cert, headers))
    moving.now += timedelta(minutes=5)
    second = await authenticate(chain, creds(cert, headers))
    assert first == second and first.name == user
    assert AUTHENTICATED in first.groups
    assert len(calls) == 1


async def test_front_proxy_headers_are_read_per_request_with_a_kept_verdict() -> None:
    chain = chain_at(MovingNow(NOW))
    users = [
        await authenticate(chain, creds(FRONT_PROXY, [("X-Remote-User", name)]))
        for name in ("alice", "bob")
    ]
    assert [u.name for u in users] == ["alice", "bob"]
    # Without a username the front proxy has no opinion and the client-certificate
    # authenticator rejects the proxy's certificate, as on the first request.
    assert "certificate signed by unknown authority" in await failure(chain, creds(FRONT_PROXY))


@pytest.mark.parametrize(
    ("cert", "headers"),
    [(ALICE_CERT, []), (FRONT_PROXY, [("X-Remote-User", "bob")])],
    ids=["client-certificate", "front-proxy"],
)
async def test_a_kept_verdict_ends_when_the_certificate_expires(
    cert: CertifiedKey, headers: list[tuple[str, str]]
) -> None:
    moving = MovingNow(NOW)
    chain = chain_at(moving)
    await authenticate(chain, creds(cert, headers))
    moving.now = cert.cert.not_valid_after_utc
    await authenticate(chain, creds(cert, headers))  # the last valid instant
    moving.now += timedelta(seconds=1)
    assert "x509: certificate has expired" in await failure(chain, creds(cert, headers))
    assert "x509: certificate has expired" in await failure(chain, creds(cert, headers))


async def test_a_kept_verdict_ends_when_the_issuing_ca_expires() -> None:
    short_ca = create_ca(now=NOW, common_name="short-lived", validity=timedelta(days=2))
    cert = leaf(short_ca, "carol")
    moving = MovingNow(NOW)
    chain = chain_at(moving, kubeadm_config(FRONT_PROXY_CA, short_ca))
    assert (await authenticate(chain, creds(cert))).name == "carol"
    moving.now = short_ca.cert.not_valid_after_utc + timedelta(seconds=1)
    message = await failure(chain, creds(cert))
    assert "was issued by a CA that has expired or is not yet valid" in message


async def test_a_not_yet_valid_certificate_is_accepted_once_it_becomes_valid() -> None:
    later = leaf(CLIENT_CA, "dave", not_before=NOW + timedelta(hours=1))
    moving = MovingNow(NOW)
    chain = chain_at(moving)
    assert "is before" in await failure(chain, creds(later))
    moving.now += timedelta(hours=2)
    assert (await authenticate(chain, creds(later))).name == "dave"


async def test_a_kept_rejection_is_rejected_again_with_the_same_message() -> None:
    chain = chain_at(MovingNow(NOW))
    wrong_proxy = leaf(FRONT_PROXY_CA, "not-the-proxy")
    request = creds(wrong_proxy, [("X-Remote-User", "alice")])
    first, second = await failure(chain, request), await failure(chain, request)
    assert first == second
    assert "x509: subject with cn=not-the-proxy is not in the allowed list" in first


# --- 3. bearer token -----------------------------------------------------------------

BOB = UserInfo("bob", uid="b-1", groups=("devs",), extra={"scopes": ("a",)})


def bearer(token: str) -> RequestCredentials:
    return creds(None, [("Authorization", f"Bearer {token}")])


async def test_a_reviewed_token_is_its_user() -> None:
    reviewer = FakeReviewer({"good": BOB})
    user = await authenticate(make_chain(reviewer=reviewer), bearer("good"))
    assert user == UserInfo("bob", uid="b-1", groups=("devs", AUTHENTICATED), extra=BOB.extra)


async def test_a_rejected_token_is_invalid_bearer_token() -> None:
    reviewer = FakeReviewer({"bad": None})
    message = await failure(make_chain(reviewer=reviewer), bearer("bad"))
    assert message == INVALID_BEARER_TOKEN


async def test_results_are_cached_for_ten_seconds_success_and_failure() -> None:
    clock = FakeClock()
    reviewer = FakeReviewer({"good": BOB, "bad": None})
    chain = make_chain(reviewer=reviewer, clock=clock)
    for _ in range(3):
        assert (await authenticate(chain, bearer("good"))).name == "bob"
        await failure(chain, bearer("bad"))
    assert reviewer.calls == ["good", "bad"]
    clock.now += 9.9
    await authenticate(chain, bearer("good"))
    assert reviewer.calls == ["good", "bad"]
    clock.now += 0.1
    await authenticate(chain, bearer("good"))
    await failure(chain, bearer("bad"))
    assert reviewer.calls == ["good", "bad", "good", "bad"]


async def test_the_cache_keeps_digests_never_tokens() -> None:
    cache = TokenCache(FakeReviewer({"s3cret-token": BOB}), clock=FakeClock())
    await cache.review("s3cret-token")
    assert len(cache) == 1
    assert list(cache._entries) == [hashlib.sha256(b"s3cret-token").digest()]


async def test_the_cache_is_bounded() -> None:
    reviewer = FakeReviewer()
    cache = TokenCache(reviewer, size=2, clock=FakeClock())
    for token in ("a", "b", "c"):
        await cache.review(token)
    assert len(cache) == 2
    await cache.review("a")  # evicted as the oldest, so asked again
    assert reviewer.calls == ["a", "b", "c", "a"]


async def test_concurrent_reviews_of_one_token_share_one_call() -> None:
    reviewer = FakeReviewer({"good": BOB}, gate=asyncio.Event())
    cache = TokenCache(reviewer, clock=FakeClock())
    waiting = [asyncio.ensure_future(cache.review("good")) for _ in range(3)]
    await asyncio.sleep(0)
    assert reviewer.gate is not None
    reviewer.gate.set()
    results = await asyncio.wait_for(asyncio.gather(*waiting), 5)
    assert results == [BOB, BOB, BOB]
    assert reviewer.calls == ["good"]


async def test_a_caller_giving_up_does_not_cancel_the_shared_review() -> None:
    reviewer = FakeReviewer({"good": BOB}, gate=asyncio.Event())
    cache = TokenCache(reviewer, clock=FakeClock())
    first = asyncio.ensure_future(cache.review("good"))
    second = asyncio.ensure_future(cache.review("good"))
    await asyncio.sleep(0)
    first.cancel()
    assert reviewer.gate is not None
    reviewer.gate.set()
    assert await asyncio.wait_for(second, 5) == BOB
    assert reviewer.calls == ["good"]


async def test_an_unreachable_reviewer_is_unavailable_and_not_cached() -> None:
    reviewer = FakeReviewer({"good": BOB}, unavailable=True)
    chain = make_chain(reviewer=reviewer)
    with pytest.raises(AuthenticationUnavailable):
        await chain.authenticate(bearer("good"))
    reviewer.unavailable = False
    assert (await authenticate(chain, bearer("good"))).name == "bob"
    assert reviewer.calls == ["good", "good"]


async def test_unavailable_wins_over_an_earlier_certificate_error() -> None:
    # The token might have been good: the outcome is unknown, not a failure.
    reviewer = FakeReviewer(unavailable=True)
    credentials = creds(leaf(OTHER_CA, "x"), [("Authorization", "Bearer t")])
    with pytest.raises(AuthenticationUnavailable):
        await make_chain(reviewer=reviewer).authenticate(credentials)


async def test_a_certificate_success_never_asks_the_reviewer() -> None:
    reviewer = FakeReviewer(unavailable=True)
    credentials = creds(ALICE_CERT, [("Authorization", "Bearer t")])
    assert (await authenticate(make_chain(reviewer=reviewer), credentials)).name == "alice"
    assert reviewer.calls == []


@pytest.mark.parametrize("authorization", ["Bearer ", "Bearer  t", "Basic dXNlcg==", "t"])
async def test_no_usable_bearer_token_is_no_opinion(authorization: str) -> None:
    reviewer = FakeReviewer()
    credentials = creds(None, [("Authorization", authorization)])
    assert await authenticate(make_chain(reviewer=reviewer), credentials) is ANONYMOUS
    assert reviewer.calls == []


async def test_without_a_reviewer_tokens_are_not_looked_at() -> None:
    # Embedded mode has no TokenReview (docs/cluster.md#embedded-mode): as in Go, no token
    # authenticator.
    assert await authenticate(make_chain(reviewer=None), bearer("anything")) is ANONYMOUS


# --- 4. anonymous --------------------------------------------------------------------


async def test_anonymous_when_allowed_and_nothing_erred() -> None:
    user = await authenticate(make_chain(), creds())
    assert user is ANONYMOUS
    assert user.groups == ("system:unauthenticated",)


async def test_no_anonymous_when_disabled() -> None:
    config = kubeadm_config(FRONT_PROXY_CA, CLIENT_CA, anonymous_auth=False)
    await failure(make_chain(config), creds())


async def test_an_error_is_401_even_with_anonymous_allowed() -> None:
    await failure(make_chain(), creds(leaf(OTHER_CA, "x")))
    await failure(make_chain(reviewer=FakeReviewer()), bearer("unknown"))


# --- system:authenticated ------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "groups", "expected"),
    [
        ("alice", [], ("system:authenticated",)),
        ("alice", ["g"], ("g", "system:authenticated")),
        ("alice", ["system:authenticated", "g"], ("system:authenticated", "g")),
        ("alice", ["system:unauthenticated"], ("system:unauthenticated",)),
        ("system:anonymous", ["g"], ("g",)),
        # The aggregator's background identities carry no group and depend on it
        # (docs/cluster.md#the-aggregation-layer).
        ("system:kube-aggregator", [], ("system:authenticated",)),
    ],
)
async def test_system_authenticated_is_appended_unless(
    name: str, groups: list[str], expected: tuple[str, ...]
) -> None:
    headers = [("X-Remote-User", name), *(("X-Remote-Group", g) for g in groups)]
    user = await authenticate(make_chain(), creds(FRONT_PROXY, headers))
    assert user.groups == expected


async def test_a_token_user_with_the_group_already_is_not_doubled() -> None:
    reviewer = FakeReviewer({"t": UserInfo("sa", groups=("system:serviceaccounts", AUTHENTICATED))})
    user = await authenticate(make_chain(reviewer=reviewer), bearer("t"))
    assert user.groups == ("system:serviceaccounts", AUTHENTICATED)


# --- runtime swap --------------------------------------------------------------------


async def test_update_swaps_the_configuration_for_the_next_request() -> None:
    chain = make_chain()
    request = creds(FRONT_PROXY, [("X-Remote-User", "alice")])
    assert (await authenticate(chain, request)).name == "alice"
    new_proxy_ca = ca("front-proxy-ca-2")
    chain.update(kubeadm_config(new_proxy_ca, CLIENT_CA))
    assert chain.config.requestheader_cas == (new_proxy_ca.cert,)
    await failure(chain, request)
    chain.update(kubeadm_config(FRONT_PROXY_CA, CLIENT_CA))
    assert (await authenticate(chain, request)).name == "alice"


async def test_update_keeps_the_token_cache() -> None:
    reviewer = FakeReviewer({"good": BOB})
    chain = make_chain(reviewer=reviewer)
    await authenticate(chain, bearer("good"))
    chain.update(kubeadm_config(FRONT_PROXY_CA, CLIENT_CA, allowed_names=()))
    await authenticate(chain, bearer("good"))
    assert reviewer.calls == ["good"]


# --- impersonation -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "rejected"),
    [
        ([], False),
        ([("accept", "application/json"), ("x-remote-user", "a")], False),
        ([("impersonate-user", "admin")], True),
        ([("Impersonate-Group", "system:masters")], True),
        ([("impersonate-uid", "1")], True),
        ([("impersonate-extra-scopes", "x")], True),
        ([("x-impersonate-user", "admin")], False),
    ],
)
def test_reject_impersonation(headers: list[tuple[str, str]], rejected: bool) -> None:
    assert reject_impersonation(headers) is rejected
    assert reject_impersonation(creds(None, headers).headers) is rejected
