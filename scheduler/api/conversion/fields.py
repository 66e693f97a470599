"""Small in-place edits of a JSON object shared by the kind converters, and their error."""

from __future__ import annotations

from typing import Any

from scheduler.api.conversion.paths import Path
from scheduler.api.conversion.stash import Recorder


class ConversionError(ValueError):
    """An object that cannot be converted; `path` names the field."""

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(detail)
        self.path = path
        self.detail = detail


def mapping(parent: Any, key: str) -> dict[str, Any] | None:
    """`parent[key]` if both are JSON objects (anything else is left for decoding to report)."""
    if not isinstance(parent, dict):
        return None
    value = parent.get(key)
    return value if isinstance(value, dict) else None


def replace_key(obj: dict[str, Any], old: str, new: str, value: Any) -> None:
    """Put `new: value` where `old` was (output keeps its field order), in place."""
    items = list(obj.items())
    obj.clear()
    for key, current in items:
        if key == old:
            obj[new] = value
        elif key != new:
            obj[key] = current


def rename(obj: dict[str, Any] | None, old: str, new: str) -> None:
    """Rename a key in place, keeping its position."""
    if obj is not None and old in obj:
        replace_key(obj, old, new, obj[old])


def keep_field(obj: dict[str, Any] | None, key: str, at: Path, rec: Recorder) -> None:
    """Move `obj[key]` (a field the target version lacks) into the stash."""
    if obj is not None and key in obj:
        rec.keep((*at, key), obj.pop(key))
