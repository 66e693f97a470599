"""JSON written as Go's `encoding/json` writes it: compact, non-ASCII as it is, and
`<`, `>`, `&` and the two line separators escaped. Kueue hashes such JSON (the role hash,
scheduler/api/role_hash.py) and apimachinery prints a complex bad value in it
(`Invalid value: {"cpu":"2"}`, scheduler/api/errors.py), so both need Go's bytes."""

from __future__ import annotations

import json
from typing import Any, Final

# Go's encoder escapes these inside strings (HTML safety, and JavaScript's line ends).
_GO_ESCAPES: Final = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def go_json(value: Any) -> str:
    """`value` as Go's json.Marshal writes it (the keys in the order given)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    for char, escaped in _GO_ESCAPES.items():
        text = text.replace(char, escaped)
    return text
