"""The SubjectAccessReview backend: the request body of docs/cluster.md#request-attributes, the
decisions of docs/cluster.md#decision-pipeline, how it sits behind the Authorizer's cache, and the
Status the app answers with."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.unit.visibility_server.http.support import BOB, V2, app_for, get
from tests.unit.visibility_server.kube.support import (
    FORBIDDEN,
    SAR_PATH,
    TIMEOUT,
    FakeTransport,
    Outcome,
    created,
    status_error,
)
from visibility_server.authz.attributes import request_attributes
from visibility_server.authz.decision import Decision
from visibility_server.authz.identity import UserInfo, authenticated_user
from visibility_server.authz.pipeline import Authorizer
from visibility_server.kube.calls import ApiCaller
from visibility_server.kube.errors import InvalidAnswerError
from visibility_server.kube.sar import SubjectAccessReviewBackend

LQ = f"{V2}/namespaces/team-a/localqueues/lq-a/pendingworkloads"
ALICE = authenticated_user(
    "alice",
    groups=["team-a-devs"],
    extra={"authentication.kubernetes.io/credential-id": ["X509SHA256=ab12"]},
)
ALLOWED = created({"allowed": True, "reason": 'RBAC: allowed by RoleBinding "x"'})
DENIED = created({"allowed": False})


def backend(*outcomes: Outcome) -> tuple[SubjectAccessReviewBackend, FakeTransport]:
    transport = FakeTransport()
    transport.script("POST", SAR_PATH, *outcomes)
    caller = ApiCaller(transport, policy=transport.clock.policy())
    return SubjectAccessReviewBackend(caller), transport


async def test_the_body_of_the_spec_example_byte_for_byte() -> None:
    sar, transport = backend(ALLOWED)
    await sar.review(ALICE, request_attributes("GET", LQ))
    # docs/cluster.md#request-attributes's example: attributes, then user, groups, extra (a map of
    # lists).
    assert json.dumps(transport.calls[0].body, separators=(",", ":")) == (
        '{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":'
        '{"resourceAttributes":{"namespace":"team-a","verb":"get",'
        '"group":"visibility.kueue.x-k8s.io","version":"v1beta2","resource":"localqueues",'
        '"subresource":"pendingworkloads","name":"lq-a"},"user":"alice",'
        '"groups":["team-a-devs","system:authenticated"],'
        '"extra":{"authentication.kubernetes.io/credential-id":["X509SHA256=ab12"]}}}'
    )


async def test_uid_is_sent_and_empty_fields_are_left_out() -> None:
    sar, transport = backend(ALLOWED)
    user = UserInfo("svc", uid="1234-abcd")
    await sar.review(user, request_attributes("GET", f"{V2}/clusterqueues/cq-a/pendingworkloads"))
    assert transport.calls[0].body == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "resourceAttributes": {
                "verb": "get",
                "group": "visibility.kueue.x-k8s.io",
                "version": "v1beta2",
                "resource": "clusterqueues",
                "subresource": "pendingworkloads",
                "name": "cq-a",
            },
            "user": "svc",
            "uid": "1234-abcd",
        },
    }


async def test_non_resource_paths_and_several_extra_values() -> None:
    sar, transport = backend(ALLOWED)
    user = UserInfo("bob", extra={"scopes": ("a", "b"), "team": ("x",)})
    await sar.review(user, request_attributes("GET", "/metrics"))
    assert transport.calls[0].body == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
            "user": "bob",
            "extra": {"scopes": ["a", "b"], "team": ["x"]},
        },
    }


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({"allowed": True}, Decision.allow()),
        ({"allowed": True, "reason": "RBAC: allowed"}, Decision.allow("RBAC: allowed")),
        ({"allowed": False}, Decision.deny()),
        ({}, Decision.deny()),
        ({"allowed": False, "denied": True, "reason": "no"}, Decision.deny("no")),
        (
            {"allowed": False, "reason": "no RBAC policy matched"},
            Decision.deny("no RBAC policy matched"),
        ),
        ({"allowed": False, "evaluationError": "webhook down"}, Decision.deny()),
    ],
    ids=["allowed", "allowed-reason", "denied", "no-status", "denied-flag", "reason", "eval-error"],
)
async def test_decisions(status: dict[str, object], expected: Decision) -> None:
    sar, _ = backend(created(status))
    assert await sar.review(ALICE, request_attributes("GET", LQ)) == expected


async def test_allowed_and_denied_at_once_is_an_error() -> None:
    sar, _ = backend(created({"allowed": True, "denied": True}))
    with pytest.raises(InvalidAnswerError) as raised:
        await sar.review(ALICE, request_attributes("GET", LQ))
    assert not raised.value.transient


# -- behind the Authorizer -----------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def authorizer(*outcomes: Outcome) -> tuple[Authorizer, FakeTransport, Clock]:
    sar, transport = backend(*outcomes)
    clock = Clock()
    return Authorizer(sar, clock=clock), transport, clock


@pytest.mark.parametrize("answer", [ALLOWED, DENIED], ids=["allowed", "denied"])
async def test_decisions_are_cached_for_ten_seconds(answer: Outcome) -> None:
    authz, transport, clock = authorizer(answer)
    attrs = request_attributes("GET", LQ)
    first = await authz.authorize(ALICE, attrs)
    clock.now = 9.9
    assert await authz.authorize(ALICE, attrs) == first
    assert len(transport.calls) == 1
    clock.now = 10.0
    await authz.authorize(ALICE, attrs)
    assert len(transport.calls) == 2


@pytest.mark.parametrize(
    "failure",
    [
        FORBIDDEN,
        status_error(401, "Unauthorized"),
        TIMEOUT,
        created({"allowed": True, "denied": True}),
    ],
    ids=["forbidden", "unauthorized", "unavailable", "both"],
)
async def test_errors_are_never_cached(failure: Outcome) -> None:
    authz, transport, _ = authorizer(failure, failure, failure, ALLOWED)
    attrs = request_attributes("GET", LQ)
    with pytest.raises(Exception):  # noqa: B017 (the kind is the previous tests' subject)
        await authz.authorize(ALICE, attrs)
    calls = len(transport.calls)
    transport.script("POST", SAR_PATH, ALLOWED)
    assert (await authz.authorize(ALICE, attrs)).allowed
    assert len(transport.calls) == calls + 1


async def test_concurrent_identical_requests_share_one_review() -> None:
    gate = asyncio.Event()
    transport = FakeTransport()

    class Slow:
        async def request(self, *args: object, **kwargs: object) -> object:
            await gate.wait()
            return await transport.request(*args, **kwargs)  # type: ignore[arg-type]

    transport.script("POST", SAR_PATH, ALLOWED)
    slow = ApiCaller(Slow(), policy=transport.clock.policy())  # type: ignore[arg-type]
    authz = Authorizer(SubjectAccessReviewBackend(slow))
    attrs = request_attributes("GET", LQ)
    waiting = [asyncio.create_task(authz.authorize(ALICE, attrs)) for _ in range(5)]
    await asyncio.sleep(0)
    gate.set()
    assert all(d.allowed for d in await asyncio.gather(*waiting))
    assert len(transport.calls) == 1


async def test_static_decisions_need_no_review() -> None:
    authz, transport, _ = authorizer(FORBIDDEN)
    admin = authenticated_user("admin", groups=["system:masters"])
    assert (await authz.authorize(admin, request_attributes("GET", LQ))).allowed
    assert (await authz.authorize(ALICE, request_attributes("GET", "/apis"))).allowed
    assert (await authz.authorize(ALICE, request_attributes("GET", "/livez"))).allowed
    assert transport.calls == []


# -- the Status the app answers with --------------------------------------------------------


async def test_app_answers_a_forbidden_sar_with_500_naming_the_binding() -> None:
    authz, _, _ = authorizer(FORBIDDEN)
    response = await get(app_for(authorizer=authz), LQ, BOB)
    assert response.status_code == 500
    body = response.json()
    assert body["reason"] == "InternalError"
    cause = body["details"]["causes"][0]["message"]
    assert body["message"] == f"Internal error occurred: {cause}"
    assert 'ClusterRole "system:auth-delegator"' in cause
    assert "retry-after" not in response.headers


async def test_app_answers_an_unavailable_sar_with_503_retry_after_1() -> None:
    authz, _, _ = authorizer(TIMEOUT)
    response = await get(app_for(authorizer=authz), LQ, BOB)
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"
    assert response.json()["reason"] == "ServiceUnavailable"
    assert response.json()["message"].startswith("authorization is temporarily unavailable: ")


async def test_app_answers_a_denial_with_kube_apiservers_403() -> None:
    authz, _, _ = authorizer(created({"allowed": False, "reason": "no RBAC policy matched"}))
    response = await get(app_for(authorizer=authz), LQ, BOB)
    assert response.status_code == 403
    assert response.json()["message"] == (
        'localqueues.visibility.kueue.x-k8s.io "lq-a" is forbidden: User "bob" cannot get '
        'resource "localqueues/pendingworkloads" in API group "visibility.kueue.x-k8s.io" in '
        'the namespace "team-a": no RBAC policy matched'
    )
