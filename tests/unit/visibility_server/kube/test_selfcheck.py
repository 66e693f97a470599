"""The self-check of docs/cluster.md#self-check and the `queuescope_delegated_auth_permitted`
gauge."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from tests.unit.visibility_server.kube.support import (
    SELF_SAR_PATH,
    TIMEOUT,
    FakeClock,
    FakeTransport,
    Outcome,
    StopWatching,
    created,
)
from visibility_server.kube.calls import ApiCaller
from visibility_server.kube.metrics import PERMITTED_METRIC, delegated_auth_metrics
from visibility_server.kube.selfcheck import (
    CREATE_SUBJECT_ACCESS_REVIEWS,
    CREATE_TOKEN_REVIEWS,
    READ_AUTHENTICATION_CONFIGMAP,
    Checked,
    Permission,
    SelfCheck,
)

ALLOWED = created({"allowed": True})
DENIED = created({"allowed": False, "reason": ""})
REVIEWS = (CREATE_SUBJECT_ACCESS_REVIEWS, CREATE_TOKEN_REVIEWS)
AUTHZ_USER = "the user of --authorization-kubeconfig /etc/authz"
AUTHN_USER = "the user of --authentication-kubeconfig /etc/authn"


def self_check(
    *outcomes: Outcome, permissions: tuple[Permission, ...] = REVIEWS
) -> tuple[SelfCheck, FakeTransport, CollectorRegistry]:
    """One identity (the ServiceAccount) checked for `permissions`."""
    transport = FakeTransport()
    transport.script("POST", SELF_SAR_PATH, *outcomes)
    registry = CollectorRegistry()
    policy = transport.clock.policy()
    check = SelfCheck(
        [Checked(ApiCaller(transport, policy=policy), permissions)],
        delegated_auth_metrics(registry),
        policy=policy,
    )
    return check, transport, registry


def attributes(transport: FakeTransport) -> list[dict[str, str]]:
    return [
        call.body["spec"]["resourceAttributes"] for call in transport.calls if call.body is not None
    ]


def gauge(registry: CollectorRegistry, resource: str) -> float | None:
    return registry.get_sample_value(PERMITTED_METRIC, {"resource": resource})


async def test_it_asks_about_both_reviews() -> None:
    check, transport, registry = self_check(ALLOWED)
    assert await check.check_once() == {"subjectaccessreviews": True, "tokenreviews": True}
    assert [call.body for call in transport.calls] == [
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "verb": "create",
                    "group": "authorization.k8s.io",
                    "resource": "subjectaccessreviews",
                }
            },
        },
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "verb": "create",
                    "group": "authentication.k8s.io",
                    "resource": "tokenreviews",
                }
            },
        },
    ]
    assert gauge(registry, "subjectaccessreviews") == 1
    assert gauge(registry, "tokenreviews") == 1


async def test_a_denial_sets_zero_and_logs_the_fix(caplog: pytest.LogCaptureFixture) -> None:
    check, _, registry = self_check(DENIED, ALLOWED)
    assert await check.check_once() == {"subjectaccessreviews": False, "tokenreviews": True}
    assert gauge(registry, "subjectaccessreviews") == 0
    assert gauge(registry, "tokenreviews") == 1
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1
    assert errors[0].getMessage() == (
        "self-check: queuescope's ServiceAccount may not create "
        "subjectaccessreviews.authorization.k8s.io (denied: create; no rule allows it), so "
        "every visibility request that needs it will fail with 500: bind queuescope's "
        'ServiceAccount to the ClusterRole "system:auth-delegator" (ClusterRoleBinding '
        "queuescope-auth-delegator, manifests/rbac/auth-delegator.yaml)"
    )


async def test_the_configmap_needs_get_list_and_watch(caplog: pytest.LogCaptureFixture) -> None:
    check, transport, registry = self_check(
        ALLOWED,
        DENIED,
        created({"allowed": False, "reason": "no list"}),
        permissions=(READ_AUTHENTICATION_CONFIGMAP,),
    )
    assert await check.check_once() == {"configmaps": False}
    assert attributes(transport) == [
        {
            "verb": verb,
            "resource": "configmaps",
            "namespace": "kube-system",
            "name": "extension-apiserver-authentication",
        }
        for verb in ("get", "list", "watch")
    ]
    assert gauge(registry, "configmaps") == 0
    (error,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert (
        "may not get, list and watch configmap kube-system/extension-apiserver-authentication"
        in error
    )
    assert "(denied: list, watch; no list)" in error
    assert 'Role "extension-apiserver-authentication-reader" in kube-system' in error
    check, _, registry = self_check(ALLOWED, permissions=(READ_AUTHENTICATION_CONFIGMAP,))
    assert await check.check_once() == {"configmaps": True}
    assert gauge(registry, "configmaps") == 1


async def test_each_identity_is_asked_with_its_own_credentials(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A SelfSubjectAccessReview answers for its sender: the authorization client asks
    about SARs, the authentication client about TokenReviews and the ConfigMap."""
    clock = FakeClock()
    authz = FakeTransport(clock)
    authz.script("POST", SELF_SAR_PATH, DENIED)
    authn = FakeTransport(clock)
    authn.script("POST", SELF_SAR_PATH, ALLOWED)
    registry = CollectorRegistry()
    policy = clock.policy()
    check = SelfCheck(
        [
            Checked(
                ApiCaller(authz, policy=policy, who=AUTHZ_USER), (CREATE_SUBJECT_ACCESS_REVIEWS,)
            ),
            Checked(
                ApiCaller(authn, policy=policy, who=AUTHN_USER),
                (CREATE_TOKEN_REVIEWS, READ_AUTHENTICATION_CONFIGMAP),
            ),
        ],
        delegated_auth_metrics(registry),
        policy=policy,
    )
    assert await check.check_once() == {
        "subjectaccessreviews": False,
        "tokenreviews": True,
        "configmaps": True,
    }
    assert [a["resource"] for a in attributes(authz)] == ["subjectaccessreviews"]
    assert [a["resource"] for a in attributes(authn)] == ["tokenreviews"] + ["configmaps"] * 3
    (error,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert error.startswith(f"self-check: {AUTHZ_USER} may not create subjectaccessreviews")
    assert error.endswith(
        f'bind {AUTHZ_USER} to the ClusterRole "system:auth-delegator" (as ClusterRoleBinding '
        "queuescope-auth-delegator, manifests/rbac/auth-delegator.yaml does for queuescope's "
        "ServiceAccount)"
    )


async def test_allowed_and_denied_together_counts_as_denied() -> None:
    check, _, registry = self_check(created({"allowed": True, "denied": True}))
    assert await check.check_once() == {"subjectaccessreviews": False, "tokenreviews": False}
    assert gauge(registry, "tokenreviews") == 0


async def test_no_answer_keeps_the_gauge(caplog: pytest.LogCaptureFixture) -> None:
    check, _, registry = self_check(ALLOWED, ALLOWED, TIMEOUT)
    await check.check_once()
    assert await check.check_once() == {"subjectaccessreviews": None, "tokenreviews": None}
    assert gauge(registry, "subjectaccessreviews") == 1
    assert (
        "self-check of create subjectaccessreviews.authorization.k8s.io by queuescope's "
        "ServiceAccount failed" in caplog.text
    )
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


async def test_it_runs_at_start_and_every_five_minutes() -> None:
    check, transport, _ = self_check(ALLOWED)
    transport.clock.stop_after = 2
    with pytest.raises(StopWatching):
        await check.run()
    assert transport.clock.sleeps == [300.0, 300.0]
    assert len(transport.calls) == 6  # three rounds of two reviews


async def test_an_unexpected_failure_does_not_end_the_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    check, transport, registry = self_check(RuntimeError("a bug"), ALLOWED)
    transport.clock.stop_after = 1
    with pytest.raises(StopWatching):
        await check.run()
    assert "failed unexpectedly" in caplog.text
    assert gauge(registry, "tokenreviews") == 1  # the second round ran


def test_metrics_register_once_per_registry() -> None:
    registry = CollectorRegistry()
    assert delegated_auth_metrics(registry) is delegated_auth_metrics(registry)
    assert delegated_auth_metrics(CollectorRegistry()) is not delegated_auth_metrics(registry)
