"""The CRD conversion webhook: kube-apiserver's `ConversionReview` in, converted objects out.

The CRDs of `manifests/crds/` store `kueue.x-k8s.io/v1beta2` and serve `v1beta1` too; for
every object read or written in the version it is not stored in, kube-apiserver POSTs an
`apiextensions.k8s.io/v1` `ConversionReview` to `CONVERSION_PATH` on our TLS port. The
answer decides what is stored, so the rules are strict (docs/operations.md, "Conversion
webhook"):

* A request that is not a well-formed review (not JSON, wrong kind, no uid, objects not a
  list) is answered 400 with a `Status` saying what is wrong.
* A review whose objects cannot all be converted is answered 200 with
  `response.result.status: Failure` and the reason: kube-apiserver then refuses the whole
  request, so nothing half-converted is ever stored or returned.
* A converted object must keep its kind, name, namespace and uid and carry the desired
  apiVersion; anything else is a Failure too, never passed on.

`review` is a pure function of the request body; `serve_conversion` is the ASGI wiring. The
caller is not authenticated: kube-apiserver calls conversion webhooks without credentials,
and the webhook only transforms what it is sent, reads nothing of ours and changes nothing
(docs/operations.md, "API versions and the conversion webhook").
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

from starlette.types import Receive, Scope, Send

from scheduler.api.conversion import convert_document
from scheduler.api.errors import ApiError
from visibility_server.webhooks.asgi import Answer, serve, status_body
from visibility_server.webhooks.envelope import MalformedReviewError, review_document

log = logging.getLogger(__name__)

CONVERSION_PATH: Final = "/convert"
REVIEW_API_VERSION: Final = "apiextensions.k8s.io/v1"
REVIEW_KIND: Final = "ConversionReview"
GROUP: Final = "kueue.x-k8s.io"
VERSIONS: Final = ("v1beta1", "v1beta2")
# The CRDs that convert through this webhook: every kind whose two versions differ in a
# field (in spec, or in a status the CRD keeps free-form), as in Kueue. ResourceFlavor,
# WorkloadPriorityClass, ProvisioningRequestConfig and Topology are the same in both
# (strategy None). tools/crdgen.py checks that
# every CRD whose schemas differ is listed; the certificate tooling sets their caBundle.
CONVERTED_CRDS: Final = (
    "admissionchecks.kueue.x-k8s.io",
    "clusterqueues.kueue.x-k8s.io",
    "cohorts.kueue.x-k8s.io",
    "localqueues.kueue.x-k8s.io",
    "multikueueclusters.kueue.x-k8s.io",
    "multikueueconfigs.kueue.x-k8s.io",
    "workloads.kueue.x-k8s.io",
)
# kube-apiserver sends a whole list in one review; bounded so a caller cannot exhaust memory.
MAX_BODY_BYTES: Final = 256 * 1024 * 1024

Converter = Callable[[Mapping[str, Any], str], dict[str, Any]]


def review(body: bytes, convert: Converter | None = None) -> Answer:
    """Answer one ConversionReview request body (see the module docstring)."""
    try:
        uid, desired, objects = _parse(body)
    except MalformedReviewError as err:
        return Answer(400, status_body(400, "BadRequest", f"malformed ConversionReview: {err}"))
    try:
        converted = _convert_all(objects, desired, convert or convert_document)
    except _RefusedError as err:
        result: dict[str, Any] = {"status": "Failure", "message": str(err)}
        return Answer(200, _review_body({"uid": uid, "result": result}))
    return Answer(
        200,
        _review_body({"uid": uid, "convertedObjects": converted, "result": {"status": "Success"}}),
    )


class _RefusedError(Exception):
    """One object cannot be converted: the whole review fails with this message."""


def _parse(body: bytes) -> tuple[str, str, list[Any]]:
    request = review_document(body, REVIEW_API_VERSION, REVIEW_KIND)["request"]
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise MalformedReviewError("request.uid: must be a non-empty string")
    desired = request.get("desiredAPIVersion")
    if not isinstance(desired, str) or not desired:
        raise MalformedReviewError("request.desiredAPIVersion: must be a non-empty string")
    objects = request.get("objects")
    if not isinstance(objects, list):
        raise MalformedReviewError("request.objects: must be a list")
    return uid, desired, objects


def _convert_all(objects: list[Any], desired: str, convert: Converter) -> list[dict[str, Any]]:
    group, _, version = desired.partition("/")
    if group != GROUP or version not in VERSIONS:
        supported = ", ".join(f"{GROUP}/{v}" for v in VERSIONS)
        raise _RefusedError(f"desiredAPIVersion {desired!r} is not served here (only {supported})")
    return [_convert_one(index, obj, desired, convert) for index, obj in enumerate(objects)]


def _who(index: int, obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata")
    meta = metadata if isinstance(metadata, Mapping) else {}
    name = meta.get("name", "")
    namespace = meta.get("namespace")
    shown = f"{namespace}/{name}" if namespace else str(name)
    return f"objects[{index}] ({obj.get('kind', '?')} {shown!r})"


def _convert_one(index: int, obj: Any, desired: str, convert: Converter) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise _RefusedError(f"objects[{index}]: not an object")
    who = _who(index, obj)
    if obj.get("apiVersion") == desired:
        return obj
    try:
        converted = convert(obj, desired)
    except ApiError as err:
        raise _RefusedError(f"{who}: cannot convert to {desired}: {err}") from None
    except Exception as err:  # a bug must fail the review, never the server
        log.exception("converting %s to %s failed", who, desired)
        raise _RefusedError(f"{who}: cannot convert to {desired}: internal error: {err}") from None
    _check_identity(who, obj, converted, desired)
    return converted


_IDENTITY_FIELDS: Final = ("name", "namespace", "uid", "resourceVersion")


def _check_identity(
    who: str, before: Mapping[str, Any], after: Mapping[str, Any], desired: str
) -> None:
    if after.get("apiVersion") != desired or after.get("kind") != before.get("kind"):
        raise _RefusedError(
            f"{who}: the conversion produced {after.get('apiVersion')!r} "
            f"{after.get('kind')!r} instead of {desired!r} {before.get('kind')!r}"
        )
    old, new = before.get("metadata") or {}, after.get("metadata") or {}
    for key in _IDENTITY_FIELDS:
        if old.get(key) != new.get(key):
            raise _RefusedError(f"{who}: the conversion changed metadata.{key}")


def _review_body(response: Mapping[str, Any]) -> bytes:
    doc = {"apiVersion": REVIEW_API_VERSION, "kind": REVIEW_KIND, "response": dict(response)}
    return json.dumps(doc, separators=(",", ":")).encode()


# -- ASGI wiring -----------------------------------------------------------------------


async def serve_conversion(
    scope: Scope, receive: Receive, send: Send, convert: Converter | None = None
) -> None:
    """POST CONVERSION_PATH. Parsing and conversion run in a worker thread: a review may
    carry a whole list, and the event loop must keep its turns meanwhile."""
    await serve(
        scope,
        receive,
        send,
        path=CONVERSION_PATH,
        what="ConversionReview",
        limit=MAX_BODY_BYTES,
        answer_for=lambda body: review(body, convert),
    )


def is_conversion_request(scope: Scope) -> bool:
    return scope["type"] == "http" and scope.get("path") == CONVERSION_PATH
