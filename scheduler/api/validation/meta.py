"""ObjectMeta and Condition rules (apimachinery's ValidateObjectMeta / ValidateConditions)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from scheduler.api.errors import FieldError
from scheduler.api.meta import Condition, KubeObject
from scheduler.api.names import dns1123_label, label_key
from scheduler.api.validation.common import (
    NameValidator,
    duplicate,
    invalid,
    labels,
    name_errors,
    required,
)
from scheduler.api.validation.paths import index, key

_MAX_ANNOTATIONS_BYTES = 256 * 1024
_CONDITION_REASON = re.compile(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?", re.ASCII)
_MAX_REASON = 1024
_MAX_MESSAGE = 32768


def path_segment_name(value: str) -> list[str]:
    """Names of RBAC objects: anything usable as one URL path segment."""
    if value in (".", ".."):
        return [f'may not be "{value}"']
    return [f"may not contain '{c}'" for c in ("/", "%") if c in value]


def validate_metadata(obj: KubeObject, name_validator: NameValidator) -> list[FieldError]:
    meta = obj.metadata
    errors: list[FieldError] = []
    if not meta.name:
        errors.append(required("metadata.name", "name is required"))
    else:
        errors += name_errors("metadata.name", meta.name, name_validator)
    if type(obj).namespaced and meta.namespace:
        errors += name_errors("metadata.namespace", meta.namespace, dns1123_label)
    errors += labels("metadata.labels", meta.labels)
    total = 0
    for k, v in meta.annotations.items():
        # apimachinery checks annotation keys case-insensitively.
        errors += name_errors(key("metadata.annotations", k), k.lower(), label_key)
        total += len(k.encode()) + len(v.encode())
    if total > _MAX_ANNOTATIONS_BYTES:
        errors.append(
            FieldError(
                "metadata.annotations",
                f"Too long: may not be more than {_MAX_ANNOTATIONS_BYTES} bytes",
            )
        )
    if meta.generation is not None and meta.generation < 0:
        errors.append(invalid("metadata.generation", meta.generation, "must be non-negative"))
    return errors


def validate_conditions(path: str, conditions: Sequence[Condition]) -> list[FieldError]:
    errors: list[FieldError] = []
    seen: set[str] = set()
    for i, condition in enumerate(conditions):
        here = index(path, i)
        if not condition.type:
            errors.append(required(f"{here}.type", "must be set"))
        else:
            errors += name_errors(f"{here}.type", condition.type, label_key)
            if condition.type in seen:
                errors.append(duplicate(f"{here}.type", condition.type))
            seen.add(condition.type)
        if not condition.reason:
            errors.append(required(f"{here}.reason", "must be set"))
        else:
            if not _CONDITION_REASON.fullmatch(condition.reason):
                errors.append(
                    invalid(
                        f"{here}.reason",
                        condition.reason,
                        "a condition reason must start with alphabetic character, optionally "
                        "followed by a string of alphanumeric characters or '_,:', and must end "
                        "with an alphanumeric character or '_'",
                    )
                )
            if len(condition.reason) > _MAX_REASON:
                errors.append(
                    FieldError(f"{here}.reason", f"Too long: may not be more than {_MAX_REASON}")
                )
        if len(condition.message) > _MAX_MESSAGE:
            errors.append(
                FieldError(f"{here}.message", f"Too long: may not be more than {_MAX_MESSAGE}")
            )
        if condition.observed_generation is not None and condition.observed_generation < 0:
            errors.append(
                invalid(
                    f"{here}.observedGeneration",
                    condition.observed_generation,
                    "must be greater than or equal to zero",
                )
            )
    return errors
