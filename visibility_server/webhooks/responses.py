"""AdmissionReview responses: allowed (with a JSONPatch, for the mutating webhook), denied
with Kueue's wording, and the 400 of a malformed review.

A denial carries what kube-apiserver and kubectl show: `status.message` is the broken rules
as Kueue words them (`spec.x: Invalid value: ...`, several as `[a, b]`), which
kube-apiserver prefixes with `admission webhook "NAME" denied the request: `; the code is
403 Forbidden as Kueue's webhooks answer; `status.details.causes` lists each rule with its
field path for clients that read structure.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any, Final

from scheduler.api.errors import FieldError
from visibility_server.webhooks.asgi import Answer, status_body
from visibility_server.webhooks.review import REVIEW_API_VERSION, REVIEW_KIND

JsonPatch = list[dict[str, Any]]

# apimachinery's field-error types, by the words their message starts with.
_CAUSE_REASONS: Final = (
    ("Required value", "FieldValueRequired"),
    ("Unsupported value", "FieldValueNotSupported"),
    ("Duplicate value", "FieldValueDuplicate"),
    ("Forbidden", "FieldValueForbidden"),
    ("Too many", "FieldValueTooMany"),
    ("Too long", "FieldValueTooLong"),
    ("Not found", "FieldValueNotFound"),
)


def _review(response: dict[str, Any]) -> Answer:
    doc = {"apiVersion": REVIEW_API_VERSION, "kind": REVIEW_KIND, "response": response}
    return Answer(200, json.dumps(doc, separators=(",", ":")).encode())


def allowed(uid: str, patch: JsonPatch | None = None, warnings: Sequence[str] = ()) -> Answer:
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode("ascii")
    if warnings:
        response["warnings"] = list(warnings)
    return _review(response)


def denial_message(errors: Sequence[FieldError]) -> str:
    """Kueue's aggregate of field errors: one as it is, several in brackets."""
    texts = [str(error) for error in errors]
    return texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"


def _cause(error: FieldError) -> dict[str, str]:
    reason = next(
        (r for prefix, r in _CAUSE_REASONS if error.detail.startswith(prefix)),
        "FieldValueInvalid",
    )
    return {"reason": reason, "message": error.detail, "field": error.path}


def denied(uid: str, errors: Sequence[FieldError]) -> Answer:
    status = {
        "status": "Failure",
        "code": 403,
        "reason": "Forbidden",
        "message": denial_message(errors),
        "details": {"causes": [_cause(error) for error in errors]},
    }
    return _review({"uid": uid, "allowed": False, "status": status})


def malformed(message: str) -> Answer:
    return Answer(400, status_body(400, "BadRequest", f"malformed AdmissionReview: {message}"))


def not_ready(message: str) -> Answer:
    """Not a decision: kube-apiserver applies the webhook's failurePolicy."""
    return Answer(503, status_body(503, "ServiceUnavailable", message))
