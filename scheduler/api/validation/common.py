"""Helpers shared by the per-kind validators: Kubernetes-style messages, names, and
the CRD item-count and quantity rules (the field paths are `paths.py`'s).

Messages follow apimachinery's field errors ("Required value", "Duplicate value:
\\"x\\"", "Unsupported value: ...", "Too many: ...") because users compare them with
what a real API server says; rule violations use Kueue's own wording.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence, Sized

from scheduler.api.errors import FieldError, quote, unsupported_detail
from scheduler.api.names import dns1123_label, dns1123_subdomain, label_key, label_value
from scheduler.api.quantity import Quantity, QuantityError, scheduler_value
from scheduler.api.validation.paths import index, key

NameValidator = Callable[[str], list[str]]

NEGATIVE = "must be greater than or equal to 0"


def invalid(path: str, value: object, detail: str) -> FieldError:
    return FieldError(path, f"Invalid value: {quote(value)}: {detail}")


def required(path: str, detail: str = "") -> FieldError:
    return FieldError(path, f"Required value: {detail}" if detail else "Required value")


def duplicate(path: str, value: object, detail: str = "") -> FieldError:
    text = f"Duplicate value: {quote(value)}"
    return FieldError(path, f"{text}: {detail}" if detail else text)


def unsupported(path: str, value: object, supported: Sequence[str]) -> FieldError:
    return FieldError(path, unsupported_detail(value, supported))


def too_many(path: str, actual: int, limit: int) -> FieldError:
    return FieldError(path, f"Too many: {actual}: must have at most {limit} items")


def not_found(path: str, value: object) -> FieldError:
    return FieldError(path, f"Not found: {quote(value)}")


def item_count(path: str, items: Sized, minimum: int, maximum: int) -> list[FieldError]:
    """CRD MinItems/MaxItems."""
    if len(items) < minimum:
        return [required(path, f"must have at least {minimum} item{'s' if minimum > 1 else ''}")]
    return at_most(path, items, maximum)


def at_most(path: str, items: Sized, maximum: int) -> list[FieldError]:
    """CRD MaxItems."""
    count = len(items)
    return [too_many(path, count, maximum)] if count > maximum else []


def name_errors(path: str, value: str, validator: NameValidator) -> list[FieldError]:
    return [invalid(path, value, msg) for msg in validator(value)]


def subdomain(path: str, value: str) -> list[FieldError]:
    return name_errors(path, value, dns1123_subdomain)


def label(path: str, value: str) -> list[FieldError]:
    return name_errors(path, value, dns1123_label)


def labels(path: str, values: Mapping[str, str]) -> list[FieldError]:
    """metav1 ValidateLabels: qualified-name keys, label-value values."""
    errors: list[FieldError] = []
    for k, v in values.items():
        errors += name_errors(key(path, k), k, label_key)
        errors += name_errors(key(path, k), v, label_value)
    return errors


def resource_name(path: str, value: str) -> list[FieldError]:
    """Resource names (`cpu`, `nvidia.com/gpu`) are qualified names."""
    return name_errors(path, value, label_key)


def quantity(
    path: str, resource: str, value: Quantity, *, non_negative: bool = True
) -> list[FieldError]:
    """Kueue's "must be greater than or equal to 0" and our int64 rule
    (docs/scheduling.md#quantities)."""
    if non_negative and value.value < 0:
        return [invalid(path, str(value), NEGATIVE)]
    try:
        scheduler_value(resource, value)
    except QuantityError as err:
        return [FieldError(path, str(err))]
    return []


def resource_list(
    path: str, values: Mapping[str, Quantity], *, non_negative: bool = True
) -> list[FieldError]:
    errors: list[FieldError] = []
    for name, value in values.items():
        errors += resource_name(key(path, name), name)
        errors += quantity(key(path, name), name, value, non_negative=non_negative)
    return errors


def at_least(path: str, value: int | None, minimum: int) -> list[FieldError]:
    if value is not None and value < minimum:
        return [invalid(path, value, f"must be greater than or equal to {minimum}")]
    return []


def each(
    path: str, items: Iterable[str], check: Callable[[str, str], list[FieldError]]
) -> list[FieldError]:
    errors: list[FieldError] = []
    for i, item in enumerate(items):
        errors += check(index(path, i), item)
    return errors
