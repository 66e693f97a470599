"""Reading an object as the API server sent it (a plain JSON mapping), where the API
layer has no model for it or the admission webhooks must not depend on one: a missing or
mistyped part reads as empty, never as an error (the validating webhook judges it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def mapping(value: Any) -> Mapping[str, Any]:
    """`value` if it is a mapping, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def integer(value: Any, default: int) -> int:
    """`value` if it is an integer (not a bool), else `default`."""
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def metadata_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return mapping(obj.get("metadata"))


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return mapping(metadata_of(obj).get("labels"))


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return mapping(metadata_of(obj).get("annotations"))


def controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The owner reference that says `controller: true`, None for none."""
    for ref in metadata_of(obj).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None
