"""Fields without a peer in the target version, kept in one annotation (docs/api-versions.md).

Converting an object to the other version can meet a field that version has no place
for (v1beta2's `spec.concurrentAdmissionPolicy` in v1beta1) or a value it spells
differently (v1beta1's `whenCanBorrow: Borrow` is v1beta2's `MayStopSearch`). So that a
round trip through the other version gives back the very same object, such fields are
recorded in the annotation `STASH_ANNOTATION` of the converted object and put back when
it converts back; the annotation is removed then. A value that was rewritten is put
back only if the object, converted back, holds what converting back makes of the
rewritten value (the `if` condition is about the object after converting back), so a
client of the other version that changed the field wins.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from scheduler.api.base import format_timestamp
from scheduler.api.conversion.paths import Path, get_path, is_missing, pop_path, set_path

STASH_ANNOTATION: Final = "queuescope.io/conversion-data"


@dataclass(frozen=True, slots=True)
class Kept:
    """One field to put back: `value` at `path`; if `when` is set, only when the object
    holds `when[1]` at `when[0]` (which is then replaced)."""

    path: Path
    value: Any
    when: tuple[Path, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": list(self.path), "value": self.value}
        if self.when is not None:
            out["ifPath"] = list(self.when[0])
            out["ifValue"] = self.when[1]
        return out


@dataclass(slots=True)
class Recorder:
    """Collects what one conversion could not express in the target version."""

    kept: list[Kept] = field(default_factory=list)

    def keep(self, path: Path, value: Any) -> None:
        self.kept.append(Kept(path, value))

    def keep_if(self, path: Path, value: Any, if_path: Path, if_value: Any) -> None:
        self.kept.append(Kept(path, value, (if_path, if_value)))


@dataclass(frozen=True, slots=True)
class Stash:
    """The decoded annotation: the version it was written for and what to put back."""

    to: str
    kept: tuple[Kept, ...]
    created_annotations: bool


class StashError(ValueError):
    """The annotation is not one this module wrote."""


def _path(raw: Any) -> Path:
    if not isinstance(raw, list) or not raw:
        raise StashError("a path must be a non-empty list")
    for step in raw:
        if not isinstance(step, str | int) or isinstance(step, bool):
            raise StashError("a path step must be a string or an integer")
    return tuple(raw)


def parse_stash(text: str) -> Stash:
    try:
        data = json.loads(text)
    except ValueError as err:
        raise StashError(f"not JSON: {err}") from None
    if not isinstance(data, dict) or not isinstance(data.get("to"), str):
        raise StashError('expected an object with "to" and "fields"')
    fields = data.get("fields", [])
    if not isinstance(fields, list):
        raise StashError('"fields" must be a list')
    kept: list[Kept] = []
    for entry in fields:
        if not isinstance(entry, dict) or "value" not in entry:
            raise StashError('every entry needs "path" and "value"')
        when = None
        if "ifPath" in entry:
            when = (_path(entry["ifPath"]), entry.get("ifValue"))
        kept.append(Kept(_path(entry.get("path")), entry["value"], when))
    return Stash(data["to"], tuple(kept), bool(data.get("createdAnnotations", False)))


def _plain(value: Any) -> Any:
    # YAML input may hold timestamps as datetime objects; in JSON they are RFC 3339 strings.
    if isinstance(value, datetime):
        return format_timestamp(value)
    raise StashError(f"a value of type {type(value).__name__} cannot be kept")


def render_stash(to: str, kept: list[Kept], created_annotations: bool) -> str:
    data: dict[str, Any] = {"to": to, "fields": [k.to_json() for k in kept]}
    if created_annotations:
        data["createdAnnotations"] = True
    return json.dumps(data, separators=(",", ":"), sort_keys=True, default=_plain)


def take_stash(document: dict[str, Any], from_version: str) -> Stash | None:
    """Remove and return the stash written for `from_version`; others stay untouched."""
    metadata = document.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    if not isinstance(annotations, dict) or STASH_ANNOTATION not in annotations:
        return None
    raw = annotations[STASH_ANNOTATION]
    if not isinstance(raw, str):
        raise StashError("the annotation value must be a string")
    stash = parse_stash(raw)
    if stash.to != from_version:
        return None
    del annotations[STASH_ANNOTATION]
    if not annotations and stash.created_annotations:
        del metadata["annotations"]  # type: ignore[union-attr]
    return stash


def put_back(document: dict[str, Any], stash: Stash) -> None:
    """Restore the stashed fields into the converted document."""
    for kept in stash.kept:
        if kept.when is not None:
            if_path, if_value = kept.when
            if get_path(document, if_path) != if_value:
                continue
            if if_path != kept.path:
                pop_path(document, if_path)
            set_path(document, kept.path, kept.value)
        elif is_missing(get_path(document, kept.path)):
            set_path(document, kept.path, kept.value)


def write_stash(document: dict[str, Any], to: str, kept: list[Kept]) -> None:
    """Record `kept` in the converted document's annotation (nothing if empty)."""
    if not kept:
        return
    metadata = document.setdefault("metadata", {})
    if not isinstance(metadata, dict):
        raise StashError("metadata must be an object")
    annotations = metadata.get("annotations")
    created = annotations is None
    if created:
        annotations = metadata["annotations"] = {}
    if not isinstance(annotations, dict):
        raise StashError("metadata.annotations must be an object")
    annotations[STASH_ANNOTATION] = render_stash(to, kept, created)
