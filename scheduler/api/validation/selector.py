"""metav1.LabelSelector: its schema and Kubernetes' validation rules.

Objects keep selectors as raw dicts (the core's matching functions take plain data);
this module checks that such a dict is a valid selector. It lives in the API layer
because validating input is the API layer's job and the layer rule (docs/product.md)
forbids it from importing the core.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, ValidationError

from scheduler.api.base import ApiModel
from scheduler.api.errors import FieldError
from scheduler.api.names import label_key, label_value
from scheduler.api.pydantic_errors import field_errors
from scheduler.api.validation.common import invalid, labels, name_errors
from scheduler.api.validation.paths import child, index

__all__ = ["LabelSelector", "LabelSelectorRequirement", "validate_label_selector"]


class LabelSelectorRequirement(ApiModel):
    key: str
    operator: str  # checked below, with apimachinery's message
    values: list[str] = Field(default_factory=list)


class LabelSelector(ApiModel):
    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)


def _requirement_errors(path: str, requirement: LabelSelectorRequirement) -> list[FieldError]:
    errors: list[FieldError] = []
    values_path = child(path, "values")
    if requirement.operator in ("In", "NotIn"):
        if not requirement.values:
            errors.append(
                FieldError(
                    values_path,
                    "Required value: must be specified when `operator` is 'In' or 'NotIn'",
                )
            )
    elif requirement.operator in ("Exists", "DoesNotExist"):
        if requirement.values:
            errors.append(
                FieldError(
                    values_path,
                    "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                )
            )
    else:
        errors.append(
            invalid(child(path, "operator"), requirement.operator, "not a valid selector operator")
        )
    errors += name_errors(child(path, "key"), requirement.key, label_key)
    for i, value in enumerate(requirement.values):
        errors += name_errors(index(values_path, i), value, label_value)
    return errors


def validate_label_selector(path: str, raw: Mapping[str, Any] | None) -> list[FieldError]:
    """Errors of a raw LabelSelector dict (None, "no selector", is valid)."""
    if raw is None:
        return []
    try:
        selector = LabelSelector.model_validate(raw, by_alias=True, by_name=False)
    except ValidationError as err:
        return field_errors(LabelSelector, err, path)
    errors = labels(child(path, "matchLabels"), selector.match_labels)
    for i, requirement in enumerate(selector.match_expressions):
        errors += _requirement_errors(index(child(path, "matchExpressions"), i), requirement)
    return errors
