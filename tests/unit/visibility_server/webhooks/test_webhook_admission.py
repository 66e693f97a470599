"""The admission routes through the app: JSONPatch mutations of Jobs, update rules,
malformed reviews (400, never allowed), the sync gate (503) and open access."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest

from tests.unit.test_webhook_rules import V1, V2, job, pod_set, review
from tests.unit.visibility_server.http.support import (
    ADMIN,
    Holder,
    app_for,
    client,
    make_snapshot,
)

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
NS = "webhook-rules"  # the namespace of tests/unit/test_webhook_rules.py's objects


def snapshot_with_default_queue(*, synced: bool = True) -> Holder:
    return Holder(make_snapshot({}, {(NS, "default"): "cq-a"}, synced=synced))


async def post(path: str, body: bytes, holder: Holder | None = None) -> Any:
    async with client(app_for(holder), headers={}) as c:
        return await c.post(path, content=body)


def response_of(answer: Any) -> dict[str, Any]:
    assert answer.status_code == 200, answer.text
    doc = answer.json()
    assert doc["apiVersion"] == "admission.k8s.io/v1" and doc["kind"] == "AdmissionReview"
    response: dict[str, Any] = doc["response"]
    assert response["uid"] == "0b7f6e2a-rules"
    return response


def apply_patch(obj: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    """RFC 6902 `add` operations, the only kind the webhooks send: to a key, or to the end
    of a list (`-`)."""
    assert response["patchType"] == "JSONPatch"
    result = copy.deepcopy(obj)
    for op in json.loads(base64.b64decode(response["patch"])):
        assert op["op"] == "add"
        *parents, last = [
            p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]
        ]
        target = result
        for part in parents:
            target = target[part]
        if last == "-":
            target.append(op["value"])
        else:
            target[last] = op["value"]
    return result


def unlabelled_job(**spec: Any) -> dict[str, Any]:
    obj = job(**spec)
    del obj["metadata"]["labels"]
    return obj


# -- mutation ---------------------------------------------------------------------------


async def test_an_unsuspended_job_with_a_queue_is_patched_to_suspended() -> None:
    obj = job(suspend=False)
    response = response_of(await post("/mutate-job", review(obj)))
    assert response["allowed"] is True
    patched = apply_patch(obj, response)
    assert patched["spec"]["suspend"] is True
    assert patched["metadata"] == obj["metadata"]  # nothing else changes


async def test_a_suspended_job_needs_no_patch() -> None:
    response = response_of(await post("/mutate-job", review(job(suspend=True))))
    assert response == {"uid": "0b7f6e2a-rules", "allowed": True}


async def test_a_job_without_a_queue_where_no_default_queue_exists_is_left_alone() -> None:
    response = response_of(await post("/mutate-job", review(unlabelled_job(suspend=False))))
    assert response == {"uid": "0b7f6e2a-rules", "allowed": True}


@pytest.mark.parametrize("with_labels", [True, False], ids=["other-labels", "no-labels"])
async def test_the_default_local_queue_is_named_and_the_job_suspended(with_labels: bool) -> None:
    obj = unlabelled_job(suspend=False)
    if with_labels:
        obj["metadata"]["labels"] = {"app": "x"}
    response = response_of(await post("/mutate-job", review(obj), snapshot_with_default_queue()))
    patched = apply_patch(obj, response)
    assert patched["metadata"]["labels"][QUEUE_LABEL] == "default"
    assert patched["spec"]["suspend"] is True
    if with_labels:
        assert patched["metadata"]["labels"]["app"] == "x"


async def test_an_empty_queue_label_is_defaulted_too() -> None:
    obj = job({QUEUE_LABEL: ""}, suspend=False)
    response = response_of(await post("/mutate-job", review(obj), snapshot_with_default_queue()))
    assert apply_patch(obj, response)["metadata"]["labels"][QUEUE_LABEL] == "default"


async def test_a_named_queue_is_never_replaced_by_the_default() -> None:
    obj = job(suspend=False)
    response = response_of(await post("/mutate-job", review(obj), snapshot_with_default_queue()))
    assert apply_patch(obj, response)["metadata"]["labels"][QUEUE_LABEL] == "lq"


async def test_before_the_sync_the_defaulting_is_503_and_named_queues_still_work() -> None:
    unsynced = snapshot_with_default_queue(synced=False)
    answer = await post("/mutate-job", review(unlabelled_job(suspend=False)), unsynced)
    assert answer.status_code == 503
    assert answer.json()["reason"] == "ServiceUnavailable"
    response = response_of(await post("/mutate-job", review(job(suspend=False)), unsynced))
    assert apply_patch(job(suspend=False), response)["spec"]["suspend"] is True


async def test_an_update_is_not_mutated() -> None:
    obj = job(suspend=False)
    response = response_of(await post("/mutate-job", review(obj, "UPDATE", obj)))
    assert "patch" not in response and response["allowed"] is True


# -- validation: creation and updates ---------------------------------------------------


async def test_a_valid_object_is_allowed_in_both_versions() -> None:
    for version in (V1, V2):
        obj = {
            "apiVersion": version,
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": NS},
            "spec": {"clusterQueue": "cq"},
        }
        response = response_of(await post("/validate", review(obj)))
        assert response == {"uid": "0b7f6e2a-rules", "allowed": True}


def workload(version: str, queue: str, *, reserved: bool) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": version,
        "kind": "Workload",
        "metadata": {"name": "wl", "namespace": NS},
        "spec": {"queueName": queue, "podSets": [pod_set()]},
    }
    if reserved:
        condition = {
            "type": "QuotaReserved",
            "status": "True",
            "reason": "QuotaReserved",
            "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
        obj["status"] = {
            "conditions": [condition],
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [
                    {"name": "main", "flavors": {"cpu": "f"}, "resourceUsage": {"cpu": "1"}}
                ],
            },
        }
    return obj


@pytest.mark.parametrize("version", [V1, V2])
async def test_a_reserved_workload_keeps_its_queue(version: str) -> None:
    old = workload(version, "lq", reserved=True)
    new = workload(version, "lq-2", reserved=True)
    response = response_of(await post("/validate", review(new, "UPDATE", old)))
    assert response["allowed"] is False
    assert response["status"]["message"] == "spec.queueName: field is immutable"
    free = response_of(
        await post(
            "/validate",
            review(
                workload(version, "lq-2", reserved=False),
                "UPDATE",
                workload(version, "lq", reserved=False),
            ),
        )
    )
    assert free["allowed"] is True


async def test_a_local_queue_keeps_its_cluster_queue() -> None:
    def lq(cq: str) -> dict[str, Any]:
        return {
            "apiVersion": V2,
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": NS},
            "spec": {"clusterQueue": cq},
        }

    response = response_of(await post("/validate", review(lq("b"), "UPDATE", lq("a"))))
    assert response["status"]["message"] == "spec.clusterQueue: field is immutable"


async def test_a_running_job_keeps_its_queue_and_a_suspended_one_may_move() -> None:
    old = job(suspend=False)
    moved = job({QUEUE_LABEL: "other"}, suspend=False)
    response = response_of(await post("/validate", review(moved, "UPDATE", old)))
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        f'metadata.labels[{QUEUE_LABEL}]: Invalid value: "other": field is immutable'
    )
    suspended = job({QUEUE_LABEL: "other"}, suspend=True)
    allowed = response_of(await post("/validate", review(suspended, "UPDATE", job(suspend=True))))
    assert allowed["allowed"] is True


async def test_the_queue_label_stays_where_a_default_queue_exists() -> None:
    old = job(suspend=True)
    new = unlabelled_job(suspend=True)
    holder = snapshot_with_default_queue()
    response = response_of(await post("/validate", review(new, "UPDATE", old), holder))
    assert (
        "queue-name must not be empty in namespace with default queue"
        in (response["status"]["message"])
    )
    elsewhere = response_of(await post("/validate", review(new, "UPDATE", old)))
    assert elsewhere["allowed"] is True
    unsynced = await post(
        "/validate", review(new, "UPDATE", old), snapshot_with_default_queue(synced=False)
    )
    assert unsynced.status_code == 503


async def test_a_running_job_gets_no_priority_class_and_none_is_removed() -> None:
    label = "kueue.x-k8s.io/priority-class"
    added = job({label: "high"}, suspend=False)
    response = response_of(await post("/validate", review(added, "UPDATE", job(suspend=False))))
    assert (
        "WorkloadPriorityClass cannot be added to a non-suspended workload"
        in (response["status"]["message"])
    )
    removed = response_of(
        await post(
            "/validate", review(job(suspend=True), "UPDATE", job({label: "high"}, suspend=True))
        )
    )
    assert (
        "WorkloadPriorityClass cannot be removed from a workload" in (removed["status"]["message"])
    )


async def test_partial_admission_fixes_a_running_jobs_parallelism() -> None:
    note = {"kueue.x-k8s.io/job-min-parallelism": "1"}
    old = job(annotations=note, suspend=False, parallelism=3, completions=3)
    new = job(annotations=note, suspend=False, parallelism=2, completions=3)
    response = response_of(await post("/validate", review(new, "UPDATE", old)))
    assert response["status"]["message"] == (
        "spec.parallelism: Forbidden: cannot change when partial admission is enabled and "
        "the job is not suspended"
    )
    assert response["status"]["details"]["causes"][0]["reason"] == "FieldValueForbidden"


async def test_finalizers_of_an_object_being_deleted_can_always_be_removed() -> None:
    bad = job({QUEUE_LABEL: "Bad_Queue"}, suspend=True)
    old = copy.deepcopy(bad)
    old["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    old["metadata"]["finalizers"] = ["example.com/f"]
    response = response_of(await post("/validate", review(bad, "UPDATE", old)))
    assert response["allowed"] is True


async def test_several_broken_rules_are_listed_together() -> None:
    obj = job({QUEUE_LABEL: "Bad_Queue", "kueue.x-k8s.io/priority-class": "Bad_Class"})
    response = response_of(await post("/validate", review(obj)))
    message = response["status"]["message"]
    assert message.startswith("[") and message.endswith("]") and ", " in message
    assert len(response["status"]["details"]["causes"]) == 2


async def test_a_kueue_kind_not_implemented_is_allowed_with_a_warning() -> None:
    obj = {"apiVersion": V2, "kind": "SomethingNew", "metadata": {"name": "x"}}
    response = response_of(await post("/validate", review(obj)))
    assert response["allowed"] is True
    assert response["warnings"] == [
        "SomethingNew kueue.x-k8s.io/v1beta2 is not implemented by queuescope: not validated"
    ]


async def test_deletes_and_status_writes_are_allowed() -> None:
    obj = job({QUEUE_LABEL: "Bad_Queue"})
    body = json.loads(review(obj))
    body["request"]["subResource"] = "status"
    response = response_of(await post("/validate", json.dumps(body).encode()))
    assert response["allowed"] is True
    body = json.loads(review(obj, "DELETE"))
    body["request"]["object"] = None
    body["request"]["oldObject"] = obj
    assert response_of(await post("/validate", json.dumps(body).encode()))["allowed"] is True


# -- malformed reviews: 400, never an allowed answer -------------------------------------


def _request(**changes: Any) -> bytes:
    body = json.loads(review(job()))
    for key, value in changes.items():
        if value is None:
            body["request"].pop(key, None)
        else:
            body["request"][key] = value
    return json.dumps(body).encode()


MALFORMED = [
    ("not-json", b"{not json", "the body is not JSON"),
    ("not-an-object", b"[1, 2]", "the body is not a JSON object"),
    (
        "wrong-kind",
        json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "ConversionReview"}).encode(),
        "apiVersion/kind must be admission.k8s.io/v1/AdmissionReview",
    ),
    (
        "wrong-version",
        json.dumps({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}).encode(),
        "apiVersion/kind must be",
    ),
    (
        "no-request",
        json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
        "request: must be an object",
    ),
    ("no-uid", _request(uid=None), "request.uid: Field required"),
    ("empty-uid", _request(uid=""), "request.uid"),
    ("no-kind", _request(kind=None), "request.kind: Field required"),
    ("bad-operation", _request(operation="PATCH"), "request.operation"),
    ("no-object", _request(object=None), "request.object: required for CREATE"),
    ("object-not-a-map", _request(object="a string"), "request.object"),
    ("update-without-old", _request(operation="UPDATE"), "request.oldObject: required for UPDATE"),
]


@pytest.mark.parametrize("path", ["/validate", "/mutate-job"])
@pytest.mark.parametrize(("name", "body", "says"), MALFORMED, ids=[m[0] for m in MALFORMED])
async def test_a_malformed_review_is_a_400_status(
    path: str, name: str, body: bytes, says: str
) -> None:
    answer = await post(path, body)
    assert answer.status_code == 400, (name, answer.text)
    status = answer.json()
    assert status["kind"] == "Status" and status["code"] == 400
    assert status["reason"] == "BadRequest"
    assert status["message"].startswith("malformed AdmissionReview: ")
    assert says in status["message"]
    assert "response" not in status


async def test_the_mutating_route_refuses_other_kinds_with_a_400() -> None:
    obj = {"apiVersion": V2, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": NS}}
    answer = await post("/mutate-job", review(obj))
    assert answer.status_code == 400
    assert "only batch/v1 Jobs are mutated here" in answer.json()["message"]


async def test_an_undecodable_object_is_denied_not_a_500() -> None:
    obj = job()
    obj["spec"]["parallelism"] = "many"
    response = response_of(await post("/validate", review(obj)))
    assert response["allowed"] is False
    assert "spec.parallelism" in response["status"]["message"]


# -- access -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/validate", "/mutate-job"])
async def test_the_routes_need_no_credentials_and_take_post_only(path: str) -> None:
    async with client(app_for(), headers={}) as c:
        answer = await c.post(path, content=review(job()))
        assert answer.status_code == 200
        wrong = await c.get(path)
    assert wrong.status_code == 405
    assert wrong.headers["allow"] == "POST"
    assert wrong.json()["code"] == 405


async def test_a_body_over_the_limit_is_413(monkeypatch: pytest.MonkeyPatch) -> None:
    from visibility_server.webhooks import admission, routes  # noqa: PLC0415

    monkeypatch.setattr(routes, "MAX_BODY_BYTES", 64)
    assert admission.MAX_BODY_BYTES > 64
    answer = await post("/validate", review(job()))
    assert answer.status_code == 413
    assert answer.json()["reason"] == "RequestEntityTooLarge"


async def test_admission_calls_are_counted_by_route() -> None:
    app = app_for()
    async with client(app, headers={}) as c:
        assert (await c.post("/validate", content=review(job()))).status_code == 200
        assert (await c.post("/mutate-job", content=b"nope")).status_code == 400
        assert (await c.post("/convert", content=b"nope")).status_code == 400
        metrics = (await c.get("/metrics", headers=ADMIN)).text
    assert 'requests_total{code="200",endpoint="validating-webhook",version="v1"} 1.0' in metrics
    assert 'requests_total{code="400",endpoint="mutating-webhook",version="v1"} 1.0' in metrics
    assert 'requests_total{code="400",endpoint="conversion",version="v1"} 1.0' in metrics
