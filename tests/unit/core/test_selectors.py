from __future__ import annotations

from typing import Any

import pytest

from scheduler.core.selectors import (
    SelectorError,
    first_untolerated_taint,
    flavor_matches_pod,
    format_taint,
    label_selector_matches,
    toleration_tolerates,
    validate_label_selector,
)

# -- label selectors ----------------------------------------------------------

LABELS = {"team": "ml", "env": "prod"}


def test_unset_selector_matches_nothing_and_empty_matches_everything() -> None:
    assert label_selector_matches(None, LABELS) is False
    assert label_selector_matches(None, {}) is False
    assert label_selector_matches({}, LABELS) is True
    assert label_selector_matches({}, {}) is True
    assert label_selector_matches({"matchLabels": {}, "matchExpressions": []}, {}) is True


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ({"matchLabels": {"team": "ml"}}, True),
        ({"matchLabels": {"team": "ml", "env": "prod"}}, True),
        ({"matchLabels": {"team": "ml", "env": "dev"}}, False),
        ({"matchLabels": {"missing": ""}}, False),
        ({"matchExpressions": [{"key": "team", "operator": "In", "values": ["ml", "x"]}]}, True),
        ({"matchExpressions": [{"key": "team", "operator": "In", "values": ["x"]}]}, False),
        ({"matchExpressions": [{"key": "gone", "operator": "In", "values": ["x"]}]}, False),
        ({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["x"]}]}, True),
        ({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["ml"]}]}, False),
        ({"matchExpressions": [{"key": "gone", "operator": "NotIn", "values": ["ml"]}]}, True),
        ({"matchExpressions": [{"key": "team", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "gone", "operator": "Exists"}]}, False),
        ({"matchExpressions": [{"key": "gone", "operator": "DoesNotExist"}]}, True),
        ({"matchExpressions": [{"key": "team", "operator": "DoesNotExist", "values": []}]}, False),
        (
            {
                "matchLabels": {"env": "prod"},
                "matchExpressions": [
                    {"key": "team", "operator": "Exists"},
                    {"key": "env", "operator": "NotIn", "values": ["prod"]},
                ],
            },
            False,
        ),
    ],
)
def test_label_selector_matches(selector: dict[str, Any], expected: bool) -> None:
    assert label_selector_matches(selector, LABELS) is expected


@pytest.mark.parametrize(
    "expression",
    [
        {"key": "team", "operator": "Gt", "values": ["1"]},
        {"key": "team", "operator": "In"},
        {"key": "team", "operator": "Exists", "values": ["a"]},
    ],
)
def test_label_selector_matches_raises_on_meaningless_expressions(
    expression: dict[str, Any],
) -> None:
    with pytest.raises(SelectorError, match=r"matchExpressions\[0\]"):
        label_selector_matches({"matchExpressions": [expression]}, LABELS)


def test_validate_label_selector_accepts_valid() -> None:
    assert validate_label_selector(None) == []
    assert validate_label_selector({}) == []
    assert (
        validate_label_selector(
            {
                "matchLabels": {"kubernetes.io/metadata.name": "team-a", "empty": ""},
                "matchExpressions": [
                    {"key": "team", "operator": "In", "values": ["a", "b"]},
                    {"key": "x", "operator": "DoesNotExist"},
                ],
            }
        )
        == []
    )


def test_validate_label_selector_operator_and_values() -> None:
    errors = validate_label_selector(
        {
            "matchExpressions": [
                {"key": "a", "operator": "Gt", "values": ["1"]},
                {"key": "b", "operator": "In", "values": []},
                {"key": "c", "operator": "NotIn"},
                {"key": "d", "operator": "Exists", "values": ["x"]},
                {"key": "e", "operator": "DoesNotExist", "values": ["x"]},
            ]
        }
    )
    assert errors == [
        'matchExpressions[0].operator: Invalid value: "Gt": not a valid selector operator',
        "matchExpressions[1].values: Required value: "
        "must be specified when `operator` is 'In' or 'NotIn'",
        "matchExpressions[2].values: Required value: "
        "must be specified when `operator` is 'In' or 'NotIn'",
        "matchExpressions[3].values: Forbidden: "
        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        "matchExpressions[4].values: Forbidden: "
        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
    ]


def test_validate_label_selector_keys_and_values() -> None:
    errors = validate_label_selector(
        {
            "matchLabels": {"bad key": "ok", "ok": "bad value"},
            "matchExpressions": [{"key": "-k", "operator": "In", "values": ["ok", "-v"]}],
        }
    )
    assert len(errors) == 4
    assert errors[0].startswith('matchLabels: Invalid value: "bad key": name part must consist')
    assert errors[1].startswith('matchLabels: Invalid value: "bad value": a valid label must')
    assert errors[2].startswith('matchExpressions[0].key: Invalid value: "-k": name part')
    assert errors[3].startswith('matchExpressions[0].values[1]: Invalid value: "-v": a valid')


def test_validate_label_selector_wrong_shapes() -> None:
    (error,) = validate_label_selector({"matchLabels": ["a"]})
    assert error.startswith("matchLabels: Invalid value: ")
    assert error.endswith(": must be a map of strings")
    assert validate_label_selector({"matchExpressions": {"key": "a"}})[0].startswith(
        "matchExpressions: Invalid value"
    )
    assert validate_label_selector({"matchExpressions": ["a"]})[0].startswith(
        "matchExpressions[0]: Invalid value"
    )


# -- taints and tolerations ---------------------------------------------------

TAINT = {"key": "gpu", "value": "true", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("toleration", "expected"),
    [
        ({"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}, True),
        ({"key": "gpu", "value": "true", "effect": "NoSchedule"}, True),  # Equal is the default
        ({"key": "gpu", "operator": "", "value": "true"}, True),  # empty effect matches all
        ({"key": "gpu", "operator": "Equal", "value": "false"}, False),
        ({"key": "gpu", "operator": "Equal"}, False),
        ({"key": "gpu", "operator": "Exists"}, True),
        ({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}, True),
        ({"key": "gpu", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "other", "operator": "Exists"}, False),
        ({"operator": "Exists"}, True),  # empty key + Exists tolerates everything
        ({"key": "", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "gpu", "operator": "Bogus", "value": "true"}, False),
    ],
)
def test_toleration_tolerates(toleration: dict[str, Any], expected: bool) -> None:
    assert toleration_tolerates(toleration, TAINT) is expected


def test_toleration_of_taint_without_value() -> None:
    taint = {"key": "dedicated", "effect": "NoExecute"}
    assert toleration_tolerates({"key": "dedicated", "operator": "Equal"}, taint)
    assert toleration_tolerates({"key": "dedicated", "value": ""}, taint)
    assert not toleration_tolerates({"key": "dedicated", "value": "x"}, taint)


def test_first_untolerated_taint_in_list_order() -> None:
    taints = [
        {"key": "soft", "effect": "PreferNoSchedule"},
        {"key": "a", "value": "1", "effect": "NoSchedule"},
        {"key": "b", "value": "2", "effect": "NoExecute"},
    ]
    assert first_untolerated_taint(taints, []) == taints[1]
    assert first_untolerated_taint(taints, [{"key": "a", "operator": "Exists"}]) == taints[2]
    tolerations = [{"key": "b", "value": "2"}, {"key": "a", "value": "1"}]
    assert first_untolerated_taint(taints, tolerations) is None
    assert first_untolerated_taint(taints, [{"operator": "Exists"}]) is None
    # PreferNoSchedule never blocks.
    assert first_untolerated_taint(taints[:1], []) is None
    assert first_untolerated_taint([], []) is None


def test_format_taint() -> None:
    assert format_taint(TAINT) == "{gpu true NoSchedule <nil>}"
    # Go's %v keeps the empty field, so an absent value leaves two spaces.
    assert format_taint({"key": "k", "effect": "NoExecute"}) == "{k  NoExecute <nil>}"
    assert format_taint({"key": "k", "value": "v", "effect": "NoSchedule", "timeAdded": None}) == (
        "{k v NoSchedule <nil>}"
    )


# -- node affinity ------------------------------------------------------------

FLAVOR_LABELS = {"cloud.com/gpu": "a100", "zone": "z1", "cores": "64"}
KEYS = {"cloud.com/gpu", "zone", "cores", "tier"}


def _affinity(*terms: list[dict[str, Any]], fields: bool = False) -> dict[str, Any]:
    node_terms: list[dict[str, Any]] = []
    for expressions in terms:
        term: dict[str, Any] = {"matchExpressions": expressions}
        if fields:
            term["matchFields"] = [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]
        node_terms.append(term)
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": node_terms}
            }
        }
    }


def _expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    expression: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        expression["values"] = list(values)
    return expression


def test_no_constraints_match() -> None:
    assert flavor_matches_pod({}, FLAVOR_LABELS, KEYS)
    assert flavor_matches_pod({"containers": []}, {}, set())
    assert flavor_matches_pod({"affinity": {}}, FLAVOR_LABELS, KEYS)
    assert flavor_matches_pod({"affinity": {"nodeAffinity": {}}}, FLAVOR_LABELS, KEYS)


def test_node_selector_filtered_to_group_keys() -> None:
    assert flavor_matches_pod({"nodeSelector": {"zone": "z1"}}, FLAVOR_LABELS, KEYS)
    assert not flavor_matches_pod({"nodeSelector": {"zone": "z2"}}, FLAVOR_LABELS, KEYS)
    # "tier" is a group key this flavor lacks, so the flavor cannot satisfy it.
    assert not flavor_matches_pod({"nodeSelector": {"tier": "gold"}}, FLAVOR_LABELS, KEYS)
    # Keys no flavor of the group defines are left to kube-scheduler.
    assert flavor_matches_pod(
        {"nodeSelector": {"zone": "z1", "kubernetes.io/os": "windows"}}, FLAVOR_LABELS, KEYS
    )


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (_expr("zone", "In", "z1", "z2"), True),
        (_expr("zone", "In", "z2"), False),
        (_expr("tier", "In", "gold"), False),
        (_expr("zone", "NotIn", "z2"), True),
        (_expr("zone", "NotIn", "z1"), False),
        (_expr("tier", "NotIn", "gold"), True),
        (_expr("zone", "Exists"), True),
        (_expr("tier", "Exists"), False),
        (_expr("tier", "DoesNotExist"), True),
        (_expr("zone", "DoesNotExist"), False),
        (_expr("cores", "Gt", "32"), True),
        (_expr("cores", "Gt", "64"), False),
        (_expr("cores", "Gt", "-1"), True),
        (_expr("cores", "Lt", "+65"), True),
        (_expr("cores", "Lt", "64"), False),
        (_expr("tier", "Gt", "1"), False),  # absent key fails Gt/Lt
        (_expr("tier", "Lt", "1"), False),
        (_expr("zone", "Gt", "1"), False),  # non-integer label value fails, no error
    ],
)
def test_affinity_operators(expression: dict[str, Any], expected: bool) -> None:
    assert flavor_matches_pod(_affinity([expression]), FLAVOR_LABELS, KEYS) is expected


def test_terms_are_ored_and_expressions_anded() -> None:
    matching = [_expr("zone", "In", "z1"), _expr("cloud.com/gpu", "Exists")]
    failing = [_expr("zone", "In", "z1"), _expr("cloud.com/gpu", "In", "h100")]
    assert flavor_matches_pod(_affinity(matching), FLAVOR_LABELS, KEYS)
    assert not flavor_matches_pod(_affinity(failing), FLAVOR_LABELS, KEYS)
    assert flavor_matches_pod(_affinity(failing, matching), FLAVOR_LABELS, KEYS)
    assert not flavor_matches_pod(_affinity(failing, failing), FLAVOR_LABELS, KEYS)


def test_irrelevant_expressions_and_match_fields_are_dropped() -> None:
    spec = _affinity(
        [_expr("zone", "In", "z1"), _expr("kubernetes.io/arch", "In", "s390x")], fields=True
    )
    assert flavor_matches_pod(spec, FLAVOR_LABELS, KEYS)


def test_a_term_left_empty_drops_the_whole_affinity() -> None:
    spec = _affinity([_expr("zone", "In", "z9")], [_expr("kubernetes.io/arch", "In", "s390x")])
    assert flavor_matches_pod(spec, FLAVOR_LABELS, KEYS)
    # Even a malformed expression in another term is then never evaluated.
    spec = _affinity([_expr("cores", "Gt", "many")], [_expr("other", "Exists")])
    assert flavor_matches_pod(spec, FLAVOR_LABELS, KEYS)
    # An affinity without terms is dropped too.
    assert flavor_matches_pod(_affinity(), FLAVOR_LABELS, KEYS)


def test_node_selector_and_affinity_must_both_hold() -> None:
    spec = {"nodeSelector": {"zone": "z2"}, **_affinity([_expr("zone", "Exists")])}
    assert not flavor_matches_pod(spec, FLAVOR_LABELS, KEYS)
    spec = {"nodeSelector": {"zone": "z1"}, **_affinity([_expr("cores", "Lt", "8")])}
    assert not flavor_matches_pod(spec, FLAVOR_LABELS, KEYS)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (
            _expr("cores", "Gt", "many"),
            'nodeSelectorTerms[0].matchExpressions[0].values[0]: Invalid value: "many": '
            "for 'Gt', 'Lt' operators, the value must be an integer",
        ),
        (
            _expr("cores", "Lt", "1.5"),
            'nodeSelectorTerms[0].matchExpressions[0].values[0]: Invalid value: "1.5": '
            "for 'Gt', 'Lt' operators, the value must be an integer",
        ),
        (
            _expr("cores", "Gt", "1", "2"),
            'nodeSelectorTerms[0].matchExpressions[0].values: Invalid value: []string{"1", "2"}: '
            "for 'Gt', 'Lt' operators, exactly one value is required",
        ),
        (
            _expr("cores", "Gt"),
            "nodeSelectorTerms[0].matchExpressions[0].values: Invalid value: []string(nil): "
            "for 'Gt', 'Lt' operators, exactly one value is required",
        ),
        (
            _expr("zone", "In"),
            "nodeSelectorTerms[0].matchExpressions[0].values: Invalid value: []string(nil): "
            "for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            _expr("zone", "Exists", "z1"),
            'nodeSelectorTerms[0].matchExpressions[0].values: Invalid value: []string{"z1"}: '
            "values set must be empty for exists and does not exist",
        ),
        (
            _expr("zone", "Near", "z1"),
            'nodeSelectorTerms[0].matchExpressions[0].operator: Unsupported value: "Near"',
        ),
    ],
)
def test_unevaluable_expressions_raise(expression: dict[str, Any], message: str) -> None:
    with pytest.raises(SelectorError) as caught:
        flavor_matches_pod(_affinity([expression]), FLAVOR_LABELS, KEYS)
    assert str(caught.value) == message


def test_several_errors_in_a_term_are_aggregated() -> None:
    spec = _affinity([_expr("cores", "Gt", "x"), _expr("zone", "Near")])
    with pytest.raises(SelectorError, match=r"^\[nodeSelectorTerms\[0\].*, nodeSelectorTerms"):
        flavor_matches_pod(spec, FLAVOR_LABELS, KEYS)


def test_errors_are_lazy_per_term() -> None:
    good = [_expr("zone", "In", "z1")]
    bad = [_expr("cores", "Gt", "x")]
    # An earlier matching term short-circuits, as in kube-scheduler.
    assert flavor_matches_pod(_affinity(good, bad), FLAVOR_LABELS, KEYS)
    with pytest.raises(SelectorError, match=r"nodeSelectorTerms\[0\]"):
        flavor_matches_pod(_affinity(bad, good), FLAVOR_LABELS, KEYS)
    # A failing nodeSelector also decides before the affinity is looked at.
    spec = {"nodeSelector": {"zone": "z2"}, **_affinity(bad)}
    assert not flavor_matches_pod(spec, FLAVOR_LABELS, KEYS)


def test_out_of_range_integers() -> None:
    huge = str(2**63)
    with pytest.raises(SelectorError, match="must be an integer"):
        flavor_matches_pod(_affinity([_expr("cores", "Gt", huge)]), FLAVOR_LABELS, KEYS)
    labels = {**FLAVOR_LABELS, "cores": huge}
    assert not flavor_matches_pod(_affinity([_expr("cores", "Gt", "1")]), labels, KEYS)
