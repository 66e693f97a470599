"""Compare a status the core renders with the one the server holds.

The server returns what was written minus what its schema prunes, and Go's
`omitempty` drops empty values; so both sides are compared with nulls and empty
maps, lists and strings removed. Equal after this means "nothing to write".
"""

from __future__ import annotations

from typing import Any


def normalized(value: Any) -> Any:
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            n = normalized(v)
            if n is not None and n not in ({}, [], ""):
                out[k] = n
        return out
    if isinstance(value, list):
        return [normalized(v) for v in value]
    return value


def same_status(desired: Any, current: Any) -> bool:
    return bool(normalized(desired or {}) == normalized(current or {}))
