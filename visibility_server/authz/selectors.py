"""Label selectors (meta/v1 LabelSelector) for ClusterRole aggregation.

A raw selector mapping (`matchLabels`, `matchExpressions`) is compiled once into a
predicate over a label mapping. `{}` selects everything. A selector Kubernetes would
refuse to convert (unknown operator, `In`/`NotIn` without values, `Exists`/
`DoesNotExist` with values, wrong shapes) selects nothing: aggregation fails closed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

LabelPredicate = Callable[[Mapping[str, str]], bool]
Requirement = tuple[str, str, frozenset[str]]

_SET_OPERATORS = frozenset({"In", "NotIn"})
_EXISTENCE_OPERATORS = frozenset({"Exists", "DoesNotExist"})


def _nothing(_labels: Mapping[str, str]) -> bool:
    return False


def _requirement(expression: Any) -> Requirement | None:
    if not isinstance(expression, Mapping):
        return None
    key = expression.get("key")
    operator = expression.get("operator")
    values = expression.get("values") or []
    if not isinstance(key, str) or not isinstance(operator, str) or not isinstance(values, list):
        return None
    if not all(isinstance(value, str) for value in values) or not _arity_fits(operator, values):
        return None
    return key, operator, frozenset(values)


def _arity_fits(operator: str, values: list[str]) -> bool:
    """In/NotIn need values, Exists/DoesNotExist take none; other operators are unknown."""
    if operator in _SET_OPERATORS:
        return bool(values)
    if operator in _EXISTENCE_OPERATORS:
        return not values
    return False


def _satisfied(requirement: Requirement, labels: Mapping[str, str]) -> bool:
    key, operator, values = requirement
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    return key not in labels  # DoesNotExist


def compile_selector(selector: Any) -> LabelPredicate:
    """A predicate telling whether a label set is selected by `selector`."""
    if not isinstance(selector, Mapping):
        return _nothing
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping) or not isinstance(expressions, list):
        return _nothing
    requirements: list[Requirement] = []
    for key, value in match_labels.items():
        if not isinstance(key, str) or not isinstance(value, str):
            return _nothing
        requirements.append((key, "In", frozenset({value})))
    for expression in expressions:
        requirement = _requirement(expression)
        if requirement is None:
            return _nothing
        requirements.append(requirement)
    frozen = tuple(requirements)

    def matches(labels: Mapping[str, str]) -> bool:
        return all(_satisfied(requirement, labels) for requirement in frozen)

    return matches


def selector_matches(selector: Any, labels: Mapping[str, str]) -> bool:
    """Whether `labels` are selected by the raw `selector`."""
    return compile_selector(selector)(labels)


__all__ = ["LabelPredicate", "compile_selector", "selector_matches"]
