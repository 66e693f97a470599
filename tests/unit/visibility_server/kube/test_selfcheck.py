"""The self-check of cluster.md §4.3 and the `queuescope_delegated_auth_permitted` gauge."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from tests.unit.visibility_server.kube.support import (
    SELF_SAR_PATH,
    TIMEOUT,
    FakeTransport,
    Outcome,
    StopWatching,
    created,
)
from visibility_server.kube.metrics import PERMITTED_METRIC, delegated_auth_metrics
from visibility_server.kube.selfcheck import SelfCheck

ALLOWED = created({"allowed": True})
DENIED = created({"allowed": False, "reason": ""})


def self_check(*outcomes: Outcome) -> tuple[SelfCheck, FakeTransport, CollectorRegistry]:
    transport = FakeTransport()
    transport.script("POST", SELF_SAR_PATH, *outcomes)
    registry = CollectorRegistry()
    check = SelfCheck(transport, delegated_auth_metrics(registry), policy=transport.clock.policy())
    return check, transport, registry


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
    assert "subjectaccessreviews.authorization.k8s.io" in errors[0].getMessage()
    assert 'ClusterRole "system:auth-delegator"' in errors[0].getMessage()


async def test_allowed_and_denied_together_counts_as_denied() -> None:
    check, _, registry = self_check(created({"allowed": True, "denied": True}))
    assert await check.check_once() == {"subjectaccessreviews": False, "tokenreviews": False}
    assert gauge(registry, "tokenreviews") == 0


async def test_no_answer_keeps_the_gauge(caplog: pytest.LogCaptureFixture) -> None:
    check, _, registry = self_check(ALLOWED, ALLOWED, TIMEOUT)
    await check.check_once()
    assert await check.check_once() == {"subjectaccessreviews": None, "tokenreviews": None}
    assert gauge(registry, "subjectaccessreviews") == 1
    assert "self-check of subjectaccessreviews.authorization.k8s.io failed" in caplog.text
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
