"""Errors of the API layer: a field error, and the input error that names where it is.

The simulator's contract (docs/simulate.md) is "exit 2 with a message that names the file,
the document index and the field", and a server must say the same for a bad manifest,
so one error type carries all of those and renders them on one line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict, Unpack

from scheduler.api.go_json import go_json

__all__ = [
    "ApiError",
    "ErrorPlace",
    "FieldError",
    "SourceRef",
    "join_path",
    "quote",
    "unsupported_detail",
]


def quote(value: object) -> str:
    """A value as apimachinery prints it in errors: strings quoted (%q), numbers bare,
    and anything else (maps, lists, a nil) as Go's JSON of it (`{"cpu":"2"}`, `null`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if value is None or isinstance(value, Mapping | list | tuple):
        return go_json(value)
    return json.dumps(value if isinstance(value, str) else str(value), ensure_ascii=False)


def unsupported_detail(value: object, supported: Sequence[str]) -> str:
    """apimachinery's NotSupported wording."""
    choices = ", ".join(quote(s) for s in supported)
    return f"Unsupported value: {quote(value)}: supported values: {choices}"


@dataclass(frozen=True, slots=True)
class FieldError:
    """One broken rule: `path` uses JSON names (`spec.podSets[0].count`, `labels[app]`)."""

    path: str
    detail: str

    def __str__(self) -> str:
        return f"{self.path}: {self.detail}" if self.path else self.detail


@dataclass(frozen=True, slots=True)
class SourceRef:
    """Where a decoded object came from: file (or "<stdin>"), 0-based document, List item."""

    source: str
    index: int | None = None
    item: int | None = None

    def __str__(self) -> str:
        text = self.source
        if self.index is not None:
            text += f": document {self.index}"
        if self.item is not None:
            text += f", items[{self.item}]"
        return text


def join_path(prefix: str, path: str) -> str:
    """Prefix a field path (`spec.events[0].apply` + `spec.x` -> `spec.events[0].apply.spec.x`)."""
    if not prefix:
        return path
    if not path:
        return prefix
    return prefix + path if path.startswith("[") else f"{prefix}.{path}"


class ErrorPlace(TypedDict, total=False):
    """Where an :class:`ApiError` is, as far as the caller knows it (every key optional):
    file, 0-based document and List item, and the object's kind, name and namespace."""

    source: str
    index: int | None
    item: int | None
    kind: str | None
    name: str | None
    namespace: str | None


class ApiError(ValueError):
    """Bad input, with enough context to find it: file, document index, object, field.

    `str()` is one line, e.g. `manifests/cq.yaml: document 2 (ClusterQueue "team-a"):
    spec.resourceGroups[0]...lendingLimit: must be less than or equal to the nominalQuota`.
    Document indexes are 0-based (the first document of a file is "document 0").
    When several rules are broken, `path`/`detail` describe the first and `errors`
    lists all of them (all are rendered, separated by "; ").
    """

    def __init__(
        self,
        detail: str,
        *,
        path: str = "",
        errors: Sequence[FieldError] = (),
        line: int | None = None,
        **place: Unpack[ErrorPlace],
    ) -> None:
        self.detail = detail
        self.path = path
        self.errors: tuple[FieldError, ...] = tuple(errors) or (FieldError(path, detail),)
        self.line = line
        self.source = place.get("source", "")
        self.index = place.get("index")
        self.item = place.get("item")
        self.kind = place.get("kind")
        self.name = place.get("name")
        self.namespace = place.get("namespace")
        super().__init__(self._render())

    @classmethod
    def from_field_errors(
        cls, errors: Sequence[FieldError], **place: Unpack[ErrorPlace]
    ) -> ApiError:
        first = errors[0]
        return cls(first.detail, path=first.path, errors=errors, **place)

    def at(
        self,
        source: str,
        index: int | None,
        item: int | None = None,
        *,
        path_prefix: str = "",
    ) -> ApiError:
        """The same error placed in a file (and under a path prefix, for nested documents)."""
        errors = [FieldError(join_path(path_prefix, e.path), e.detail) for e in self.errors]
        return ApiError(
            self.detail,
            path=join_path(path_prefix, self.path),
            source=source,
            index=index,
            item=self.item if item is None else item,
            kind=self.kind,
            name=self.name,
            namespace=self.namespace,
            errors=errors,
            line=self.line,
        )

    def _render(self) -> str:
        parts: list[str] = []
        where = str(SourceRef(self.source, self.index, self.item)) if self.source else ""
        if self.kind:
            who = self.kind
            if self.name:
                shown = f"{self.namespace}/{self.name}" if self.namespace else self.name
                who += f' "{shown}"'
            where = f"{where} ({who})" if where else who
        if where:
            parts.append(where)
        parts.append("; ".join(str(error) for error in self.errors))
        return ": ".join(parts)

    def __str__(self) -> str:
        return self._render()
