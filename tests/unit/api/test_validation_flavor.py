"""ResourceFlavor rules (docs/scheduling.md#resourceflavor)."""

from __future__ import annotations

import textwrap

import pytest

from scheduler.api import ResourceFlavor
from tests.unit.api.support import decode, errors, has_error


def flavor(spec: str) -> str:
    return (
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: rf}\nspec:\n"
        + textwrap.indent(textwrap.dedent(spec), "  ")
    )


def test_defaults_and_dicts() -> None:
    rf = decode(
        flavor(
            """
            nodeTaints: [{key: spot, effect: NoSchedule}]
            tolerations: [{key: spot, operator: Exists}]
            """
        )
    )
    assert isinstance(rf, ResourceFlavor)
    taint = rf.spec.node_taints[0]
    assert taint.value == ""
    assert taint.to_dict() == {"key": "spot", "value": "", "effect": "NoSchedule"}
    toleration = rf.spec.tolerations[0]
    assert (toleration.value, toleration.effect, toleration.toleration_seconds) == ("", "", None)
    assert toleration.to_dict() == {"key": "spot", "operator": "Exists", "value": "", "effect": ""}
    assert rf.spec.topology_name is None


def test_empty_flavor() -> None:
    rf = decode("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: f}\n")
    assert isinstance(rf, ResourceFlavor)
    assert rf.spec.node_labels == {}


@pytest.mark.parametrize("field", ["nodeLabels", "nodeTaints", "tolerations"])
def test_at_most_eight(field: str) -> None:
    if field == "nodeLabels":
        value = "{" + ", ".join(f"k{i}: v" for i in range(9)) + "}"
    elif field == "nodeTaints":
        value = "[" + ", ".join(f"{{key: k{i}, effect: NoSchedule}}" for i in range(9)) + "]"
    else:
        value = "[" + ", ".join(f"{{key: k{i}, operator: Exists}}" for i in range(9)) + "]"
    has_error(
        flavor(f"{field}: {value}"), f"spec.{field}", "Too many: 9: must have at most 8 items"
    )


def test_node_labels_are_valid_labels() -> None:
    has_error(flavor("nodeLabels: {'bad key!': x}"), "spec.nodeLabels[bad key!]", "name part must")
    has_error(flavor("nodeLabels: {ok: 'bad value!'}"), "spec.nodeLabels[ok]", "a valid label")


class TestTaints:
    def test_effect_enum(self) -> None:
        has_error(
            flavor("nodeTaints: [{key: a, effect: NoRun}]"),
            "spec.nodeTaints[0].effect",
            'Unsupported value: "NoRun": supported values: '
            '"NoSchedule", "PreferNoSchedule", "NoExecute"',
        )

    def test_effect_required(self) -> None:
        has_error(flavor("nodeTaints: [{key: a}]"), "spec.nodeTaints[0].effect", "Required value")

    def test_key_and_value_format(self) -> None:
        found = errors(flavor("nodeTaints: [{key: 'a b', value: 'c d', effect: NoSchedule}]"))
        assert [e.path for e in found] == ["spec.nodeTaints[0].key", "spec.nodeTaints[0].value"]

    def test_key_effect_pairs_are_unique(self) -> None:
        has_error(
            flavor(
                "nodeTaints: [{key: a, value: x, effect: NoSchedule}, "
                "{key: a, value: y, effect: NoSchedule}, {key: a, effect: NoExecute}]"
            ),
            "spec.nodeTaints[1].effect",
            "taints must be unique by key and effect pair",
        )


class TestTolerations:
    def test_empty_key_needs_exists(self) -> None:
        has_error(
            flavor("tolerations: [{operator: Equal, value: x}]"),
            "spec.tolerations[0].operator",
            "operator must be Exists when `key` is empty",
        )
        decode(flavor("tolerations: [{operator: Exists}]"))

    def test_toleration_seconds_needs_no_execute(self) -> None:
        has_error(
            flavor(
                "tolerations: [{key: a, operator: Exists, effect: NoSchedule, "
                "tolerationSeconds: 5}]"
            ),
            "spec.tolerations[0].effect",
            "effect must be 'NoExecute' when `tolerationSeconds` is set",
        )
        decode(
            flavor(
                "tolerations: [{key: a, operator: Exists, effect: NoExecute, tolerationSeconds: 5}]"
            )
        )

    def test_operator_enum(self) -> None:
        has_error(
            flavor("tolerations: [{key: a, operator: In}]"),
            "spec.tolerations[0].operator",
            'supported values: "Equal", "Exists"',
        )

    def test_exists_has_no_value(self) -> None:
        has_error(
            flavor("tolerations: [{key: a, operator: Exists, value: x}]"),
            "spec.tolerations[0].operator",
            "value must be empty when `operator` is 'Exists'",
        )

    def test_effect_enum(self) -> None:
        has_error(
            flavor("tolerations: [{key: a, operator: Exists, effect: Always}]"),
            "spec.tolerations[0].effect",
            "Unsupported value",
        )


def test_topology_name_needs_a_node_label() -> None:
    has_error(
        flavor("topologyName: default"),
        "spec",
        "at least one nodeLabel is required when topology is set",
    )
    rf = decode(flavor("topologyName: default\nnodeLabels: {pool: a}"))
    assert isinstance(rf, ResourceFlavor)
    assert rf.spec.topology_name == "default"
