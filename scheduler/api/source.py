"""Where a decoded object came from, kept on the object itself.

`load_documents` returns plain model objects (so callers keep simple lists); the
file, document index and List item travel in a private attribute that survives
`model_copy`, and is read with `source_of`.
"""

from __future__ import annotations

from typing import TypeVar

from scheduler.api.base import TypedObject
from scheduler.api.errors import SourceRef

__all__ = ["SourceRef", "set_source", "source_of"]

T = TypeVar("T", bound=TypedObject)


def source_of(obj: TypedObject) -> SourceRef | None:
    """The file/document an object was decoded from, or None if built in code."""
    return obj._source


def set_source(obj: T, ref: SourceRef | None) -> T:
    """Record where `obj` came from (in place, returns it for chaining)."""
    obj._source = ref
    return obj
