"""Kueue's `ValidateImmutablePodGroupPodSpec`: while a pod group's owner is managed, its
pod template may not change in what makes a Pod's role (docs/cluster.md#pod-groups):
the shape `scheduler.api.role_hash.spec_shape` hashes. Each leaf that differs is
reported at its own path, as Kueue walks the shape: a container list of another length
as a whole (`spec.template.spec.containers`), otherwise each container's `ports` and
`resources.requests`, and each other field of the shape as it stands.

Equality is apimachinery's semantic one on the server's JSON: an empty list or map is
the same as none (Go's nil), and quantities are compared by value (`1` is `1000m`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from scheduler.api.errors import FieldError
from scheduler.api.quantity import Quantity, QuantityError
from scheduler.api.role_hash import spec_shape
from scheduler.api.validation.common import invalid
from scheduler.api.validation.paths import child, index
from scheduler.api.validation.queue_labels import IMMUTABLE

_CONTAINER_LISTS: Final = ("containers", "initContainers")
# The shape's resource lists (name -> quantity), besides each container's requests.
_RESOURCE_LISTS: Final = ("overhead", "resources")


def pod_spec_shape_errors(
    old_spec: Mapping[str, Any], new_spec: Mapping[str, Any], path: str
) -> list[FieldError]:
    """The leaves of the role shape that differ between two pod specs, under `path`
    (sorted by field, where Kueue's order is its map's, which is random)."""
    old, new = spec_shape(old_spec), spec_shape(new_spec)
    errors: list[FieldError] = []
    for name in sorted(old.keys() | new.keys()):
        at = child(path, name)
        if name in _CONTAINER_LISTS:
            errors += _containers_errors(old[name], new[name], at)
        elif name not in old or name not in new:
            # Pod-level requests are in the shape only when set: set or unset is a change.
            errors.append(invalid(at, new.get(name), IMMUTABLE))
        elif not _same(old[name], new[name], quantities=name in _RESOURCE_LISTS):
            errors.append(invalid(at, new[name], IMMUTABLE))
    return errors


def _containers_errors(
    old: Sequence[Mapping[str, Any]] | None, new: Sequence[Mapping[str, Any]] | None, path: str
) -> list[FieldError]:
    before, after = old or [], new or []
    if len(before) != len(after):
        return [invalid(path, new, IMMUTABLE)]
    errors: list[FieldError] = []
    for i, (was, now) in enumerate(zip(before, after, strict=True)):
        at = index(path, i)
        if not _same(was["ports"], now["ports"]):
            errors.append(invalid(child(at, "ports"), now["ports"], IMMUTABLE))
        requests = was["resources"]["requests"], now["resources"]["requests"]
        if not _same(*requests, quantities=True):
            errors.append(invalid(child(at, "resources.requests"), requests[1], IMMUTABLE))
    return errors


def _same(old: Any, new: Any, *, quantities: bool = False) -> bool:
    """apimachinery's semantic equality, on JSON values; `quantities`: a resource list,
    whose values are compared as quantities."""
    if _empty(old) or _empty(new):
        return _empty(old) and _empty(new)
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        if old.keys() != new.keys():
            return False
        same = _same_quantity if quantities else _same
        return all(same(old[k], new[k]) for k in old)
    if isinstance(old, list) and isinstance(new, list):
        return len(old) == len(new) and all(_same(a, b) for a, b in zip(old, new, strict=True))
    return bool(old == new)


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, Mapping | list) and not value)


def _same_quantity(old: Any, new: Any) -> bool:
    """Two values of a resource list that are the same quantity (the server writes
    each in its canonical form; a hand-made spec may not)."""
    if old == new:
        return True
    try:
        return Quantity.parse(old) == Quantity.parse(new)
    except QuantityError:
        return False
