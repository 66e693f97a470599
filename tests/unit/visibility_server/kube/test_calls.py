"""The outcome table of docs/cluster.md#decision-pipeline for every call to kube-apiserver, and the
retry schedule, on a scripted transport and a clock that never really waits."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from scheduler.kubeapi.client import Reply
from scheduler.kubeapi.errors import KubeError
from tests.unit.visibility_server.kube.support import (
    CONFIGMAP_PATH,
    FORBIDDEN,
    SAR_PATH,
    TIMEOUT,
    FakeTransport,
    Outcome,
    Refresher,
    created,
    response,
    status_error,
)
from visibility_server.kube.calls import SUBJECT_ACCESS_REVIEW, ApiCaller, configmap_endpoint
from visibility_server.kube.errors import (
    SERVICE_ACCOUNT,
    CredentialRejectedError,
    DelegationForbiddenError,
    InvalidAnswerError,
    UnavailableError,
)
from visibility_server.kube.metrics import delegated_auth_metrics

BODY = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {}}
ALLOWED = created({"allowed": True})
CONFIGMAP = configmap_endpoint("kube-system", "extension-apiserver-authentication")


def caller(
    *outcomes: Outcome, rand: float = 0.0, path: str = SAR_PATH, method: str = "POST"
) -> tuple[ApiCaller, FakeTransport, Refresher, CollectorRegistry]:
    transport = FakeTransport()
    transport.script(method, path, *outcomes)
    refresher = Refresher()
    registry = CollectorRegistry()
    api = ApiCaller(
        transport,
        policy=transport.clock.policy(rand=rand),
        refresh_credentials=refresher,
        metrics=delegated_auth_metrics(registry),
    )
    return api, transport, refresher, registry


def gauge(registry: CollectorRegistry, resource: str = "subjectaccessreviews") -> float | None:
    return registry.get_sample_value("queuescope_delegated_auth_permitted", {"resource": resource})


async def test_a_created_review_is_returned_and_marks_the_permission() -> None:
    api, transport, _, registry = caller(ALLOWED)
    doc = await api.create(SUBJECT_ACCESS_REVIEW, BODY)
    assert doc["status"] == {"allowed": True}
    assert [(c.method, c.path, c.body) for c in transport.calls] == [("POST", SAR_PATH, BODY)]
    assert gauge(registry) == 1


async def test_forbidden_is_a_500_naming_the_auth_delegator_binding_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api, transport, refresher, registry = caller(FORBIDDEN, ALLOWED)
    with pytest.raises(DelegationForbiddenError) as raised:
        await api.create(SUBJECT_ACCESS_REVIEW, BODY)
    assert not raised.value.transient
    assert "system:auth-delegator" in str(raised.value)
    assert "subjectaccessreviews.authorization.k8s.io" in str(raised.value)
    assert "cannot create resource" in raised.value.detail
    assert len(transport.calls) == 1  # not retried
    assert transport.clock.sleeps == []
    assert refresher.calls == 0
    assert gauge(registry) == 0
    assert [r.levelname for r in caplog.records] == ["ERROR"]
    assert "system:auth-delegator" in caplog.records[0].getMessage()


async def test_errors_name_the_identity_that_made_the_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    who = "the user of --authorization-kubeconfig /etc/authz"
    transport = FakeTransport()
    transport.script("POST", SAR_PATH, FORBIDDEN, status_error(401, "x"))
    registry = CollectorRegistry()
    api = ApiCaller(
        transport,
        policy=transport.clock.policy(),
        metrics=delegated_auth_metrics(registry),
        who=who,
    )
    with pytest.raises(DelegationForbiddenError) as forbidden:
        await api.create(SUBJECT_ACCESS_REVIEW, BODY)
    assert f'bind {who} to the ClusterRole "system:auth-delegator"' in str(forbidden.value)
    assert f'bind {who} to the ClusterRole "system:auth-delegator"' in caplog.text
    assert f"bind {SERVICE_ACCOUNT}" not in str(forbidden.value)
    with pytest.raises(CredentialRejectedError) as rejected:
        await api.create(SUBJECT_ACCESS_REVIEW, BODY)
    assert f"the token of {who} is expired, revoked or unreadable" in str(rejected.value)


async def test_the_forbidden_error_is_logged_once_per_transition(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api, _, _, registry = caller(FORBIDDEN, FORBIDDEN, ALLOWED, FORBIDDEN)
    for _ in range(2):
        with pytest.raises(DelegationForbiddenError):
            await api.create(SUBJECT_ACCESS_REVIEW, BODY)
    await api.create(SUBJECT_ACCESS_REVIEW, BODY)
    assert gauge(registry) == 1
    with pytest.raises(DelegationForbiddenError):
        await api.create(SUBJECT_ACCESS_REVIEW, BODY)
    assert gauge(registry) == 0
    assert len([r for r in caplog.records if r.levelname == "ERROR"]) == 2


async def test_unauthorized_rereads_the_token_and_retries_once() -> None:
    api, transport, refresher, _ = caller(status_error(401, "Unauthorized"), ALLOWED)
    doc = await api.create(SUBJECT_ACCESS_REVIEW, BODY)
    assert doc["status"]["allowed"] is True
    assert refresher.calls == 1
    assert len(transport.calls) == 2
    assert transport.clock.sleeps == []  # the retry is immediate: the token changed


async def test_unauthorized_twice_is_a_500_naming_the_credentials() -> None:
    api, transport, refresher, _ = caller(status_error(401, "Unauthorized"))
    with pytest.raises(CredentialRejectedError) as raised:
        await api.create(SUBJECT_ACCESS_REVIEW, BODY)
    assert not raised.value.transient
    assert "401" in str(raised.value)
    assert "token" in str(raised.value)
    assert refresher.calls == 1
    assert len(transport.calls) == 2


async def test_unauthorized_without_a_refresher_still_retries_once() -> None:
    transport = FakeTransport()
    transport.script("POST", SAR_PATH, status_error(401, "Unauthorized"), ALLOWED)
    api = ApiCaller(transport, policy=transport.clock.policy())
    await api.create(SUBJECT_ACCESS_REVIEW, BODY)
    assert len(transport.calls) == 2


# Instant failures at rand=0: pauses 0.5, 0.75, 1.125, 1.6875, 2.53125 (sum 6.59375); the
# next, 3.796875, would end past the 10 s budget.
INSTANT_SLEEPS = [0.5, 0.75, 1.125, 1.6875, 2.53125]


@pytest.mark.parametrize(
    "failure",
    [
        status_error(429, "too many requests"),
        status_error(500, "etcdserver: request timed out"),
        status_error(502, "bad gateway"),
        status_error(503, "unavailable"),
        status_error(504, "timeout"),
        KubeError(0, "cannot reach kube-apiserver: connection refused"),
    ],
    ids=["429", "500", "502", "503", "504", "connection"],
)
async def test_transient_failures_are_retried_with_backoff_then_503(failure: Outcome) -> None:
    api, transport, refresher, registry = caller(failure)
    with pytest.raises(UnavailableError) as raised:
        await api.create(SUBJECT_ACCESS_REVIEW, BODY)
    assert raised.value.transient  # the HTTP pipeline's 503 + Retry-After: 1
    assert transport.clock.sleeps == INSTANT_SLEEPS
    assert len(transport.calls) == 6
    assert "after 6 attempt(s)" in str(raised.value)
    # The last attempt may only use what is left of the budget.
    assert [c.timeout for c in transport.calls] == [5.0] * 5 + [pytest.approx(10 - 6.59375)]
    assert refresher.calls == 0
    assert gauge(registry) is None  # no answer says nothing about our permissions


async def test_timeouts_use_five_seconds_per_attempt_within_ten_in_total() -> None:
    api, transport, _, _ = caller(TIMEOUT)
    with pytest.raises(UnavailableError) as raised:
        await api.create(SUBJECT_ACCESS_REVIEW, BODY)
    # 5 s, a 0.5 s pause, the 4.5 s left; a 0.75 s pause would pass the deadline.
    assert [c.timeout for c in transport.calls] == [5.0, 4.5]
    assert transport.clock.sleeps == [0.5]
    assert "did not answer within" in str(raised.value)


async def test_jitter_adds_up_to_a_fifth_of_each_pause() -> None:
    api, transport, _, _ = caller(status_error(503, "unavailable"), rand=1.0)
    with pytest.raises(UnavailableError):
        await api.create(SUBJECT_ACCESS_REVIEW, BODY)
    assert transport.clock.sleeps == pytest.approx([0.6, 0.9, 1.35, 2.025, 3.0375])


async def test_a_transient_failure_then_an_answer() -> None:
    api, transport, _, _ = caller(TIMEOUT, status_error(503, "x"), ALLOWED)
    doc = await api.create(SUBJECT_ACCESS_REVIEW, BODY)
    assert doc["status"]["allowed"] is True
    assert transport.clock.sleeps == [0.5, 0.75]


async def test_a_401_after_a_transient_failure_still_gets_its_one_retry() -> None:
    api, transport, refresher, _ = caller(
        status_error(503, "x"), status_error(401, "Unauthorized"), ALLOWED
    )
    await api.create(SUBJECT_ACCESS_REVIEW, BODY)
    assert refresher.calls == 1
    assert len(transport.calls) == 3


@pytest.mark.parametrize(
    "answer",
    [
        status_error(400, "bad request"),
        status_error(404, "the server could not find the requested resource"),
        status_error(422, "spec.user: Invalid value"),
        response(201),
        Reply(201, b"<html>not json</html>"),
        response(201, ["a", "list"]),
    ],
    ids=["400", "404", "422", "empty", "not-json", "not-an-object"],
)
async def test_unusable_answers_are_500_and_not_retried(answer: Reply) -> None:
    api, transport, _, _ = caller(answer)
    with pytest.raises(InvalidAnswerError) as raised:
        await api.create(SUBJECT_ACCESS_REVIEW, BODY)
    assert not raised.value.transient
    assert len(transport.calls) == 1


async def test_a_read_treats_404_as_absent() -> None:
    api, transport, _, _ = caller(status_error(404, "not found"), path=CONFIGMAP_PATH, method="GET")
    assert await api.get(CONFIGMAP) is None
    assert [(c.method, c.body) for c in transport.calls] == [("GET", None)]


async def test_a_forbidden_read_names_the_reader_role() -> None:
    api, _, _, registry = caller(FORBIDDEN, path=CONFIGMAP_PATH, method="GET")
    with pytest.raises(DelegationForbiddenError) as raised:
        await api.get(CONFIGMAP)
    assert "extension-apiserver-authentication-reader" in str(raised.value)
    assert gauge(registry) is None  # reading the ConfigMap is not a review permission
