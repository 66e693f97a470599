"""Property-based: v1beta1 -> v1beta2 -> v1beta1 and v1beta2 -> v1beta1 -> v1beta2 give back
the very same object, for every field of every convertible kind (docs/api-versions.md)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from scheduler.api import AdmissionCheck, ClusterQueue, Cohort, LocalQueue, ResourceFlavor, Workload
from scheduler.api import WorkloadPriorityClass as Wpc
from scheduler.api.conversion import convert_document
from scheduler.api.errors import ApiError
from scheduler.api.v1beta2 import V1BETA2_MODELS
from scheduler.api.versions import KUEUE_V1BETA1, KUEUE_V1BETA2
from tests.unit.api.kueue_shapes import KINDS, ListOf, Obj, Opaque, strategy

MODELS: dict[str, dict[str, type[BaseModel]]] = {
    KUEUE_V1BETA1: {
        "ResourceFlavor": ResourceFlavor,
        "WorkloadPriorityClass": Wpc,
        "Cohort": Cohort,
        "LocalQueue": LocalQueue,
        "ClusterQueue": ClusterQueue,
        "Workload": Workload,
        "AdmissionCheck": AdmissionCheck,
    },
    KUEUE_V1BETA2: dict(V1BETA2_MODELS),
}
DIRECTIONS = [(KUEUE_V1BETA1, KUEUE_V1BETA2), (KUEUE_V1BETA2, KUEUE_V1BETA1)]


def _both_check_lists(doc: dict[str, Any]) -> bool:
    spec = doc.get("spec") or {}
    return bool(spec.get("admissionChecks")) and "admissionChecksStrategy" in spec


@pytest.mark.parametrize(("start", "other"), DIRECTIONS, ids=["from-v1beta1", "from-v1beta2"])
@pytest.mark.parametrize("kind", sorted(KINDS))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip_keeps_every_field(kind: str, start: str, other: str, data: Any) -> None:
    doc = data.draw(strategy(KINDS[kind](start)), label="document")
    if _both_check_lists(doc):
        # Invalid in v1beta1 (the two lists exclude each other): refused, naming the field.
        with pytest.raises(ApiError) as info:
            convert_document(doc, other)
        assert info.value.path == "spec"
        return
    snapshot = repr(doc)
    there = convert_document(doc, other)
    assert repr(doc) == snapshot, "the input was modified"
    assert there["apiVersion"] == other
    model = MODELS[other].get(kind)
    if model is not None:
        # The converted object is a well-formed object of the other version: no field of
        # the first version is left behind (the models reject unknown fields).
        model.model_validate(there, by_alias=True, by_name=False)
    back = convert_document(there, start)
    assert back == doc


# --------------------------------------------------------------------------- coverage


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[-1]]
    for branch in schema.get("anyOf", []):
        resolved = _resolve(branch, defs)
        if resolved.get("type") in ("object", "array") or "properties" in resolved:
            return resolved
    return schema


def _missing(schema: dict[str, Any], defs: dict[str, Any], shape: Any, path: str) -> list[str]:
    schema = _resolve(schema, defs)
    if isinstance(shape, Opaque) or not isinstance(shape, Obj | ListOf):
        return []
    if isinstance(shape, ListOf):
        items = schema.get("items")
        return _missing(items, defs, shape.item, f"{path}[]") if isinstance(items, dict) else []
    missing = []
    for name, prop in schema.get("properties", {}).items():
        if name not in shape.fields:
            missing.append(f"{path}.{name}")
        else:
            missing += _missing(prop, defs, shape.fields[name], f"{path}.{name}")
    return missing


@pytest.mark.parametrize("version", [KUEUE_V1BETA1, KUEUE_V1BETA2])
def test_shapes_cover_every_model_field(version: str) -> None:
    missing: list[str] = []
    for kind, model in MODELS[version].items():
        schema = model.model_json_schema(by_alias=True, mode="validation")
        missing += _missing(schema, schema.get("$defs", {}), KINDS[kind](version), kind)
    assert missing == []
