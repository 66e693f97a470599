"""Where a decoded object came from, kept on the object itself.

`load_documents` returns plain model objects (so callers keep simple lists); the
file, document index and List item travel in a private attribute that survives
`model_copy`, and is read with `source_of`. Likewise the apiVersion a document was
written in, when it differs from the model's (a v1beta2 document decodes into the
internal v1beta1 form): `wire_version`.
"""

from __future__ import annotations

from typing import TypeVar

from scheduler.api.base import TypedObject
from scheduler.api.errors import SourceRef

__all__ = ["SourceRef", "set_source", "set_wire_version", "source_of", "wire_version"]

T = TypeVar("T", bound=TypedObject)


def source_of(obj: TypedObject) -> SourceRef | None:
    """The file/document an object was decoded from, or None if built in code."""
    return obj._source


def set_source(obj: T, ref: SourceRef | None) -> T:
    """Record where `obj` came from (in place, returns it for chaining)."""
    obj._source = ref
    return obj


def wire_version(obj: TypedObject) -> str:
    """The apiVersion `obj` was written in (its own apiVersion unless it was converted)."""
    return obj._wire_version or obj.api_version


def set_wire_version(obj: T, api_version: str) -> T:
    obj._wire_version = api_version
    return obj
