"""The envelope both review kinds share: a JSON object of one apiVersion and kind with a
`request` object inside. Anything else is a `MalformedReviewError`, answered 400 and never
allowed (docs/operations.md, "Admission webhooks")."""

from __future__ import annotations

import json
from typing import Any


class MalformedReviewError(ValueError):
    """The body is not a review request we can answer."""


def review_document(body: bytes, api_version: str, kind: str) -> dict[str, Any]:
    """The decoded review of `api_version`/`kind`, its `request` checked to be an object."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as err:
        raise MalformedReviewError(f"the body is not JSON: {err}") from None
    if not isinstance(doc, dict):
        raise MalformedReviewError("the body is not a JSON object")
    if doc.get("apiVersion") != api_version or doc.get("kind") != kind:
        raise MalformedReviewError(
            f"apiVersion/kind must be {api_version}/{kind}, "
            f"not {doc.get('apiVersion')!r}/{doc.get('kind')!r}"
        )
    if not isinstance(doc.get("request"), dict):
        raise MalformedReviewError("request: must be an object")
    return doc
