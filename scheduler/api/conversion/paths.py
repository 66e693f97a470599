"""Reading and writing nested JSON values by path (a tuple of keys and list indexes)."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

Path = tuple[str | int, ...]

_MISSING: Any = object()


def get_path(root: Any, path: Path) -> Any:
    """The value at `path`, or MISSING when any step is absent or has the wrong shape."""
    node = root
    for step in path:
        if isinstance(step, int):
            if not isinstance(node, list) or not 0 <= step < len(node):
                return _MISSING
            node = node[step]
        else:
            if not isinstance(node, dict) or step not in node:
                return _MISSING
            node = node[step]
    return node


def _holds(node: Any, step: str | int) -> bool:
    """Whether `node` is a container that `step` can address (an index must exist)."""
    if isinstance(step, int):
        return isinstance(node, list) and 0 <= step < len(node)
    return isinstance(node, dict)


def set_path(root: dict[str, Any], path: Path, value: Any) -> bool:
    """Set `path` to `value`, creating missing mappings; False if a list index is absent."""
    node: Any = root
    for step, following in pairwise(path):
        if not _holds(node, step):
            return False
        if isinstance(step, str) and step not in node:
            if isinstance(following, int):
                return False
            node[step] = {}
        node = node[step]
    last = path[-1]
    if not _holds(node, last):
        return False
    node[last] = value
    return True


def pop_path(root: Any, path: Path) -> Any:
    """Remove the mapping entry at `path` and return it (MISSING when absent)."""
    parent = get_path(root, path[:-1])
    last = path[-1]
    if isinstance(last, str) and isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    return _MISSING


def is_missing(value: Any) -> bool:
    return value is _MISSING


def path_text(path: Path) -> str:
    """`spec.podSets[0].template` for ("spec", "podSets", 0, "template")."""
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else step)
    return text
