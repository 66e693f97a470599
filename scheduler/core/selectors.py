"""Label selectors, taints/tolerations and node affinity (docs/scheduling.md#resourceflavor,
#clusterqueue).

Everything works on plain data as decoded from YAML/JSON (camelCase keys), so the
matching rules stay independent of the model classes that carry them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from scheduler.api.names import label_key, label_value

__all__ = [
    "SelectorError",
    "first_untolerated_taint",
    "flavor_matches_pod",
    "format_taint",
    "label_selector_matches",
    "toleration_tolerates",
    "validate_label_selector",
]


class SelectorError(ValueError):
    """A selector or node affinity expression that cannot be evaluated."""


# ---------------------------------------------------------------------------
# Field errors worded like apimachinery's field.Error.


def _go_quote(value: object) -> str:
    # Close enough to Go's %q for the printable strings that appear in manifests,
    # and to its %#v for the []string values of requirements.
    if isinstance(value, list | tuple):
        if not value:
            return "[]string(nil)"
        return "[]string{" + ", ".join(_go_quote(item) for item in value) + "}"
    return json.dumps(value if isinstance(value, str) else str(value), ensure_ascii=False)


def _invalid(path: str, value: object, detail: str) -> str:
    return f"{path}: Invalid value: {_go_quote(value)}: {detail}"


def _required(path: str, detail: str) -> str:
    return f"{path}: Required value: {detail}"


def _forbidden(path: str, detail: str) -> str:
    return f"{path}: Forbidden: {detail}"


def _unsupported(path: str, value: object) -> str:
    return f"{path}: Unsupported value: {_go_quote(value)}"


def _as_list(raw: object) -> list[Any]:
    if raw is None:
        return []
    if isinstance(raw, list | tuple):
        return list(raw)
    raise SelectorError(f"expected a list, got {raw!r}")


# ---------------------------------------------------------------------------
# LabelSelector (metav1.LabelSelector).

_LABEL_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def validate_label_selector(selector: Mapping[str, Any] | None) -> list[str]:
    """Validation errors of a LabelSelector, with paths relative to the selector."""
    if selector is None:
        return []
    if not isinstance(selector, Mapping):
        return [f"Invalid value: {_go_quote(selector)}: must be a label selector object"]
    errors: list[str] = []
    match_labels = selector.get("matchLabels") or {}
    if not isinstance(match_labels, Mapping):
        errors.append(_invalid("matchLabels", match_labels, "must be a map of strings"))
        match_labels = {}
    for key, value in match_labels.items():
        # apimachinery reports map entries against the map itself, not per key.
        if not isinstance(key, str) or not isinstance(value, str):
            errors.append(_invalid("matchLabels", value, "keys and values must be strings"))
            continue
        errors.extend(_invalid("matchLabels", key, msg) for msg in label_key(key))
        errors.extend(_invalid("matchLabels", value, msg) for msg in label_value(value))
    expressions = selector.get("matchExpressions") or []
    if not isinstance(expressions, list | tuple):
        return [*errors, _invalid("matchExpressions", expressions, "must be a list")]
    for index, expression in enumerate(expressions):
        errors.extend(_validate_requirement(expression, f"matchExpressions[{index}]"))
    return errors


def _validate_requirement(expression: object, path: str) -> list[str]:
    if not isinstance(expression, Mapping):
        return [_invalid(path, expression, "must be a label selector requirement")]
    errors: list[str] = []
    operator = expression.get("operator", "")
    values = expression.get("values") or []
    if not isinstance(values, list | tuple):
        return [_invalid(f"{path}.values", values, "must be a list of strings")]
    if operator in ("In", "NotIn"):
        if not values:
            errors.append(
                _required(f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'")
            )
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            errors.append(
                _forbidden(
                    f"{path}.values",
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                )
            )
    else:
        errors.append(_invalid(f"{path}.operator", operator, "not a valid selector operator"))
    key = expression.get("key", "")
    if not isinstance(key, str):
        errors.append(_invalid(f"{path}.key", key, "must be a string"))
    else:
        errors.extend(_invalid(f"{path}.key", key, msg) for msg in label_key(key))
    for index, value in enumerate(values):
        value_path = f"{path}.values[{index}]"
        if not isinstance(value, str):
            errors.append(_invalid(value_path, value, "must be a string"))
            continue
        errors.extend(_invalid(value_path, value, msg) for msg in label_value(value))
    return errors


def label_selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """ClusterQueue namespaceSelector semantics: unset matches nothing, {} matches everything.

    Selectors are validated when their object is accepted; here only what makes an
    expression meaningless (unknown operator, wrong value count) raises SelectorError.
    """
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for index, expression in enumerate(_as_list(selector.get("matchExpressions"))):
        if not _label_requirement_matches(expression, labels, f"matchExpressions[{index}]"):
            return False
    return True


def _label_requirement_matches(
    expression: Mapping[str, Any], labels: Mapping[str, str], path: str
) -> bool:
    key = expression.get("key", "")
    operator = expression.get("operator", "")
    values = _as_list(expression.get("values"))
    if operator not in _LABEL_SELECTOR_OPERATORS:
        raise SelectorError(_invalid(f"{path}.operator", operator, "not a valid selector operator"))
    if operator in ("In", "NotIn") and not values:
        raise SelectorError(
            _required(f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'")
        )
    if operator in ("Exists", "DoesNotExist") and values:
        raise SelectorError(
            _forbidden(
                f"{path}.values",
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )
        )
    return _membership(operator, key, labels, values)


def _membership(operator: str, key: str, labels: Mapping[str, str], values: list[Any]) -> bool:
    """In, NotIn, Exists; any other operator is read as DoesNotExist."""
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    return not present


# ---------------------------------------------------------------------------
# Taints and tolerations (docs/scheduling.md#resourceflavor step 1).

_SCHEDULING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def toleration_tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Kubernetes Toleration.ToleratesTaint."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect", ""):
        return False
    key = toleration.get("key") or ""
    # An empty toleration key places no constraint on the taint key (validation
    # only allows that together with Exists, which then matches every taint).
    if key and key != taint.get("key", ""):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Equal":
        return bool((toleration.get("value") or "") == (taint.get("value") or ""))
    return operator == "Exists"


def first_untolerated_taint(
    taints: Sequence[Mapping[str, Any]], tolerations: Sequence[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The first NoSchedule/NoExecute taint, in list order, that no toleration tolerates."""
    for taint in taints:
        if taint.get("effect") not in _SCHEDULING_EFFECTS:
            continue
        if not any(toleration_tolerates(toleration, taint) for toleration in tolerations):
            return taint
    return None


def format_taint(taint: Mapping[str, Any]) -> str:
    """Go's %v of a corev1.Taint whose timeAdded is nil, as Kueue prints it in reasons."""
    key = taint.get("key") or ""
    value = taint.get("value") or ""
    effect = taint.get("effect") or ""
    return f"{{{key} {value} {effect} <nil>}}"


# ---------------------------------------------------------------------------
# Node affinity (docs/scheduling.md#resourceflavor step 2).

_NODE_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_GO_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


def _parse_go_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64), or None where Go would return an error."""
    if not _GO_INT.fullmatch(text):
        return None
    number = int(text)
    return number if _INT64_MIN <= number <= _INT64_MAX else None


def _required_affinity_terms(pod_spec: Mapping[str, Any]) -> list[Any] | None:
    affinity = pod_spec.get("affinity") or {}
    node_affinity = affinity.get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return None
    return _as_list(required.get("nodeSelectorTerms"))


def _filtered_terms(
    terms: Iterable[Mapping[str, Any]], keys: set[str]
) -> list[list[Mapping[str, Any]]]:
    """Terms reduced to expressions on flavor label keys; [] means "no constraint".

    A term left without expressions would match every node, and terms are OR-ed,
    so one such term makes the whole required affinity vacuous.
    """
    kept: list[list[Mapping[str, Any]]] = []
    for term in terms:
        expressions = [
            expression
            for expression in _as_list((term or {}).get("matchExpressions"))
            if expression.get("key") in keys
        ]
        if not expressions:
            return []
        kept.append(expressions)
    return kept


def _requirement_errors(expression: Mapping[str, Any], path: str) -> list[str]:
    """What labels.NewRequirement rejects, worded like it."""
    operator = expression.get("operator", "")
    if operator not in _NODE_SELECTOR_OPERATORS:
        return [_unsupported(f"{path}.operator", operator)]
    errors: list[str] = []
    key = expression.get("key", "")
    key_errors = label_key(key)
    if key_errors:
        errors.append(_invalid(f"{path}.key", key, "; ".join(key_errors)))
    values = _as_list(expression.get("values"))
    values_path = f"{path}.values"
    if operator in ("In", "NotIn"):
        if not values:
            errors.append(
                _invalid(
                    values_path, values, "for 'in', 'notin' operators, values set can't be empty"
                )
            )
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            errors.append(
                _invalid(
                    values_path, values, "values set must be empty for exists and does not exist"
                )
            )
    elif len(values) != 1:
        errors.append(
            _invalid(values_path, values, "for 'Gt', 'Lt' operators, exactly one value is required")
        )
    elif not isinstance(values[0], str) or _parse_go_int64(values[0]) is None:
        errors.append(
            _invalid(
                f"{values_path}[0]",
                values[0],
                "for 'Gt', 'Lt' operators, the value must be an integer",
            )
        )
    if operator in ("In", "NotIn"):
        for index, value in enumerate(values):
            for msg in label_value(value) if isinstance(value, str) else ["must be a string"]:
                errors.append(_invalid(f"{values_path}[{index}]", value, msg))
    return errors


def _node_requirement_matches(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key = expression.get("key", "")
    operator = expression.get("operator", "")
    values = _as_list(expression.get("values"))
    if operator in ("In", "NotIn", "Exists", "DoesNotExist"):
        return _membership(operator, key, labels, values)
    return key in labels and _compares(operator, labels[key], values[0])


def _compares(operator: str, label: str, bound_text: Any) -> bool:
    """Gt/Lt of a node label against the requirement's one value."""
    # A node label that is not an integer simply fails Gt/Lt; it is not an error.
    label_number = _parse_go_int64(label)
    if label_number is None:
        return False
    bound = _parse_go_int64(bound_text)
    assert bound is not None  # guaranteed by _requirement_errors
    return label_number > bound if operator == "Gt" else label_number < bound


def _term_matches(
    expressions: Sequence[Mapping[str, Any]], labels: Mapping[str, str], path: str
) -> bool:
    errors: list[str] = []
    for index, expression in enumerate(expressions):
        errors.extend(_requirement_errors(expression, f"{path}.matchExpressions[{index}]"))
    if errors:
        # apimachinery flattens an aggregate of several errors as "[a, b]".
        raise SelectorError(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
    return all(_node_requirement_matches(expression, labels) for expression in expressions)


def flavor_matches_pod(
    pod_spec: Mapping[str, Any],
    flavor_node_labels: Mapping[str, str],
    group_label_keys: set[str],
) -> bool:
    """Whether a pod template's node constraints admit a flavor's node labels.

    Only constraints on label keys that some flavor of the resource group defines
    are considered: the rest are for kube-scheduler to decide on real nodes.
    Raises SelectorError when an expression that must be evaluated is malformed;
    like kube-scheduler, a malformed term is only reported if no earlier term matched.
    """
    node_selector = pod_spec.get("nodeSelector") or {}
    for key, value in node_selector.items():
        if key in group_label_keys and flavor_node_labels.get(key) != value:
            return False
    terms = _required_affinity_terms(pod_spec)
    if terms is None:
        return True
    kept = _filtered_terms(terms, group_label_keys)
    if not kept:
        return True
    return any(
        _term_matches(expressions, flavor_node_labels, f"nodeSelectorTerms[{index}]")
        for index, expressions in enumerate(kept)
    )
