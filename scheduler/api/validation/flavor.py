"""ResourceFlavor rules (docs/scheduling.md#resourceflavor): Kueue's CRD limits plus core/v1 taint
rules."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.api.errors import FieldError
from scheduler.api.flavor import ResourceFlavor
from scheduler.api.names import label_key, label_value
from scheduler.api.taints import Taint, Toleration
from scheduler.api.validation.common import (
    at_most,
    duplicate,
    invalid,
    labels,
    name_errors,
    required,
    subdomain,
    unsupported,
)
from scheduler.api.validation.paths import index

MAX_ITEMS = 8
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_OPERATORS = ("Equal", "Exists")


def validate_taints(path: str, taints: Sequence[Taint]) -> list[FieldError]:
    errors: list[FieldError] = []
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(taints):
        here = index(path, i)
        if not taint.key:
            errors.append(required(f"{here}.key"))
        else:
            errors += name_errors(f"{here}.key", taint.key, label_key)
        errors += name_errors(f"{here}.value", taint.value, label_value)
        if not taint.effect:
            errors.append(required(f"{here}.effect"))
        elif taint.effect not in TAINT_EFFECTS:
            errors.append(unsupported(f"{here}.effect", taint.effect, TAINT_EFFECTS))
        pair = (taint.key, taint.effect)
        if pair in seen:
            errors.append(
                duplicate(
                    f"{here}.effect", taint.effect, "taints must be unique by key and effect pair"
                )
            )
        seen.add(pair)
    return errors


def validate_tolerations(path: str, tolerations: Sequence[Toleration]) -> list[FieldError]:
    """core/v1 ValidateTolerations."""
    errors: list[FieldError] = []
    for i, toleration in enumerate(tolerations):
        here = index(path, i)
        if toleration.key:
            errors += name_errors(f"{here}.key", toleration.key, label_key)
        elif toleration.operator != "Exists":
            errors.append(
                invalid(
                    f"{here}.operator",
                    toleration.operator,
                    "operator must be Exists when `key` is empty, which means "
                    '"match all values and all keys"',
                )
            )
        if toleration.toleration_seconds is not None and toleration.effect != "NoExecute":
            errors.append(
                invalid(
                    f"{here}.effect",
                    toleration.effect,
                    "effect must be 'NoExecute' when `tolerationSeconds` is set",
                )
            )
        if toleration.operator in ("", "Equal"):
            errors += name_errors(f"{here}.value", toleration.value, label_value)
        elif toleration.operator == "Exists":
            if toleration.value:
                errors.append(
                    invalid(
                        f"{here}.operator",
                        toleration.value,
                        "value must be empty when `operator` is 'Exists'",
                    )
                )
        else:
            errors.append(
                unsupported(f"{here}.operator", toleration.operator, TOLERATION_OPERATORS)
            )
        if toleration.effect and toleration.effect not in TAINT_EFFECTS:
            errors.append(unsupported(f"{here}.effect", toleration.effect, TAINT_EFFECTS))
    return errors


def validate_resource_flavor(flavor: ResourceFlavor) -> list[FieldError]:
    spec = flavor.spec
    errors = at_most("spec.nodeLabels", spec.node_labels, MAX_ITEMS)
    errors += labels("spec.nodeLabels", spec.node_labels)
    errors += at_most("spec.nodeTaints", spec.node_taints, MAX_ITEMS)
    errors += validate_taints("spec.nodeTaints", spec.node_taints)
    errors += at_most("spec.tolerations", spec.tolerations, MAX_ITEMS)
    errors += validate_tolerations("spec.tolerations", spec.tolerations)
    if spec.topology_name is not None:
        errors += subdomain("spec.topologyName", spec.topology_name)
        if not spec.node_labels:
            errors.append(
                FieldError("spec", "at least one nodeLabel is required when topology is set")
            )
    return errors
