"""The conversion webhook's review function and its ASGI wiring (docs/operations.md)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import pytest

from scheduler.api.errors import ApiError
from visibility_server.webhooks import conversion
from visibility_server.webhooks.conversion import CONVERSION_PATH, review, serve_conversion

V1 = "kueue.x-k8s.io/v1beta1"
V2 = "kueue.x-k8s.io/v1beta2"


def queue(version: str, name: str = "cq", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": version,
        "kind": "ClusterQueue",
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "7"},
        "spec": spec,
    }


def rename_cohort(document: Mapping[str, Any], to: str) -> dict[str, Any]:
    """A stand-in converter: v1beta1 `cohort` is v1beta2 `cohortName`."""
    out = json.loads(json.dumps(document))
    spec = out["spec"]
    if to == V2 and "cohort" in spec:
        spec["cohortName"] = spec.pop("cohort")
    if to == V1 and "cohortName" in spec:
        spec["cohort"] = spec.pop("cohortName")
    if spec.get("cohort") == "broken" or spec.get("cohortName") == "broken":
        raise ApiError("must be a valid name", path="spec.cohort", kind="ClusterQueue")
    out["apiVersion"] = to
    return out


def body(objects: list[Any], desired: str = V2, uid: str = "u-1") -> bytes:
    request = {"uid": uid, "desiredAPIVersion": desired, "objects": objects}
    doc = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": request}
    return json.dumps(doc).encode()


def answer(raw: bytes) -> tuple[int, dict[str, Any]]:
    result = review(raw, rename_cohort)
    return result.status, json.loads(result.body)


def test_converts_every_object_and_echoes_the_uid() -> None:
    code, doc = answer(body([queue(V1, "a", cohort="c"), queue(V1, "b")], uid="abc"))
    assert code == 200
    assert doc["apiVersion"] == "apiextensions.k8s.io/v1"
    assert doc["kind"] == "ConversionReview"
    response = doc["response"]
    assert response["uid"] == "abc"
    assert response["result"] == {"status": "Success"}
    assert [o["apiVersion"] for o in response["convertedObjects"]] == [V2, V2]
    assert response["convertedObjects"][0]["spec"] == {"cohortName": "c"}
    assert [o["metadata"]["name"] for o in response["convertedObjects"]] == ["a", "b"]


def test_an_object_already_in_the_desired_version_is_passed_on() -> None:
    obj = queue(V2, cohortName="c")
    _, doc = answer(body([obj]))
    assert doc["response"]["convertedObjects"] == [obj]


def test_a_failed_conversion_fails_the_whole_review_with_the_reason() -> None:
    code, doc = answer(body([queue(V1, "fine"), queue(V1, "bad", cohort="broken")]))
    assert code == 200
    response = doc["response"]
    assert response["uid"] == "u-1"
    assert "convertedObjects" not in response
    assert response["result"]["status"] == "Failure"
    message = response["result"]["message"]
    assert "objects[1] (ClusterQueue 'bad')" in message
    assert "spec.cohort: must be a valid name" in message


def test_a_converter_bug_is_a_failure_not_a_crash() -> None:
    def crash(document: Mapping[str, Any], to: str) -> dict[str, Any]:
        raise KeyError("spec")

    result = json.loads(review(body([queue(V1)]), crash).body)
    assert result["response"]["result"]["status"] == "Failure"
    assert "internal error" in result["response"]["result"]["message"]


@pytest.mark.parametrize(
    ("tamper", "field"),
    [
        (lambda o: o["metadata"].update(name="other"), "metadata.name"),
        (lambda o: o["metadata"].update(uid="x"), "metadata.uid"),
        (lambda o: o["metadata"].update(resourceVersion="8"), "metadata.resourceVersion"),
        (lambda o: o.update(kind="LocalQueue"), "'LocalQueue'"),
        (lambda o: o.update(apiVersion=V1), f"'{V1}'"),
    ],
)
def test_a_converted_object_that_lost_its_identity_is_refused(tamper: Any, field: str) -> None:
    def bad(document: Mapping[str, Any], to: str) -> dict[str, Any]:
        out = rename_cohort(document, to)
        tamper(out)
        return out

    result = json.loads(review(body([queue(V1)]), bad).body)["response"]["result"]
    assert result["status"] == "Failure"
    assert field in result["message"]


def test_an_unserved_desired_version_is_a_failure() -> None:
    _, doc = answer(body([queue(V1)], desired="kueue.x-k8s.io/v1alpha1"))
    result = doc["response"]["result"]
    assert result["status"] == "Failure"
    assert "'kueue.x-k8s.io/v1alpha1' is not served here" in result["message"]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"{not json", "the body is not JSON"),
        (b"[]", "not a JSON object"),
        (
            json.dumps({"apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "ConversionReview"}),
            "apiVersion/kind must be apiextensions.k8s.io/v1/ConversionReview",
        ),
        (
            json.dumps({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview"}),
            "request: must be an object",
        ),
        (body([], uid=""), "request.uid: must be a non-empty string"),
        (body([], desired=""), "request.desiredAPIVersion: must be a non-empty string"),
        (body([]).replace(b'"objects": []', b'"objects": {}'), "request.objects"),
        (body(["text"]), None),
    ],
)
def test_malformed_reviews_get_400_with_the_reason(raw: bytes | str, message: str | None) -> None:
    data = raw.encode() if isinstance(raw, str) else raw
    code, doc = answer(data)
    if message is None:  # well-formed review, unconvertible object: a Failure result
        assert code == 200
        assert doc["response"]["result"]["message"] == "objects[0]: not an object"
        return
    assert code == 400
    assert doc["kind"] == "Status"
    assert doc["code"] == 400
    assert doc["reason"] == "BadRequest"
    assert message in doc["message"]
    assert doc["message"].startswith("malformed ConversionReview: ")


def _call(method: str, chunks: list[bytes]) -> tuple[int, dict[str, str], bytes]:
    messages: list[dict[str, Any]] = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
        for i, c in enumerate(chunks)
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "path": CONVERSION_PATH}
    asyncio.run(serve_conversion(scope, receive, send, rename_cohort))
    start, end = sent
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return int(start["status"]), headers, end["body"]


def test_asgi_post_reads_a_chunked_body() -> None:
    raw = body([queue(V1, cohort="c")])
    code, headers, out = _call("POST", [raw[:10], raw[10:]])
    assert code == 200
    assert headers["content-type"] == "application/json"
    assert int(headers["content-length"]) == len(out)
    assert json.loads(out)["response"]["convertedObjects"][0]["spec"] == {"cohortName": "c"}


def test_asgi_other_methods_get_405() -> None:
    code, headers, out = _call("GET", [b""])
    assert code == 405
    assert headers["allow"] == "POST"
    assert json.loads(out)["reason"] == "MethodNotAllowed"


def test_asgi_an_oversized_body_gets_413(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conversion, "MAX_BODY_BYTES", 16)
    code, _, out = _call("POST", [b"x" * 10, b"x" * 10])
    assert code == 413
    assert json.loads(out)["reason"] == "RequestEntityTooLarge"


def test_the_real_converter_round_trips_through_reviews() -> None:
    v1 = queue(V1, "real", cohort="team", admissionChecks=["prov"])
    up = json.loads(review(body([v1])).body)["response"]
    assert up["result"] == {"status": "Success"}
    (stored,) = up["convertedObjects"]
    assert stored["spec"]["cohortName"] == "team"
    assert stored["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "prov"}]}
    down = json.loads(review(body([stored], desired=V1)).body)["response"]
    (back,) = down["convertedObjects"]
    assert back["spec"] == v1["spec"]


def test_the_real_converter_refuses_an_unconvertible_object() -> None:
    workload = {
        "apiVersion": V2,
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns", "uid": "u"},
        "spec": {"priorityClassRef": {"group": "example.com", "kind": "Other", "name": "x"}},
    }
    result = json.loads(review(body([workload], desired=V1)).body)["response"]["result"]
    assert result["status"] == "Failure"
    assert "objects[0] (Workload 'ns/w')" in result["message"]
    assert "spec.priorityClassRef" in result["message"]
