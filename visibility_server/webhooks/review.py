"""The `admission.k8s.io/v1` AdmissionReview as kube-apiserver sends it, parsed at the edge.

`parse_review` turns a request body into an `AdmissionRequest` or raises
`MalformedReviewError` saying what is wrong (answered 400, never allowed: see
docs/operations.md, "Admission webhooks"). Fields the models do not name are ignored:
kube-apiserver adds fields over releases (userInfo, options, requestKind ...), and
none of them changes a decision here.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from visibility_server.webhooks.envelope import MalformedReviewError, review_document

REVIEW_API_VERSION: Final = "admission.k8s.io/v1"
REVIEW_KIND: Final = "AdmissionReview"

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class GroupVersionKind(_Wire):
    group: str = ""
    version: str = Field(min_length=1)
    kind: str = Field(min_length=1)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


class AdmissionRequest(_Wire):
    uid: str = Field(min_length=1)
    kind: GroupVersionKind
    operation: Operation
    name: str = ""
    namespace: str = ""
    sub_resource: str = Field("", alias="subResource")
    object: dict[str, Any] | None = None
    old_object: dict[str, Any] | None = Field(None, alias="oldObject")
    dry_run: bool = Field(False, alias="dryRun")

    @property
    def new(self) -> dict[str, Any]:
        """The object being written (checked present by `parse_review`)."""
        assert self.object is not None
        return self.object


class _Review(_Wire):
    request: AdmissionRequest


def _location(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def parse_review(body: bytes) -> AdmissionRequest:
    """The request of an AdmissionReview body; MalformedReviewError otherwise."""
    doc = review_document(body, REVIEW_API_VERSION, REVIEW_KIND)
    try:
        request = _Review.model_validate(doc).request
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        raise MalformedReviewError(f"{_location(first['loc'])}: {first['msg']}") from None
    if request.operation in ("CREATE", "UPDATE") and request.object is None:
        raise MalformedReviewError(f"request.object: required for {request.operation}")
    if request.operation == "UPDATE" and request.old_object is None:
        raise MalformedReviewError("request.oldObject: required for UPDATE")
    return request
