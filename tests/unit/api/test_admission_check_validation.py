"""AdmissionCheck rules and the limits of a Workload's `status.admissionChecks`
(docs/scheduling.md#admission-checks): Kueue's CRD limits, with the field named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.api.admissioncheck import AdmissionCheck
from scheduler.api.decode import ApiError, decode_object
from scheduler.api.validation.admissioncheck import (
    MAX_CONDITIONS,
    MAX_POD_SET_UPDATES,
    MAX_WORKLOAD_CHECKS,
    validate_admission_check,
    validate_check_states,
)
from scheduler.api.workload import AdmissionCheckState

EXAMPLES = Path(__file__).resolve().parents[3].parent / "shared" / "kueue-examples" / "v0.19.2"
V1BETA1 = "kueue.x-k8s.io/v1beta1"
V1BETA2 = "kueue.x-k8s.io/v1beta2"


def check(spec: dict[str, Any] | None, **status: Any) -> AdmissionCheck:
    doc: dict[str, Any] = {
        "apiVersion": V1BETA1,
        "kind": "AdmissionCheck",
        "metadata": {"name": "ac"},
    }
    if spec is not None:
        doc["spec"] = spec
    if status:
        doc["status"] = status
    return AdmissionCheck.model_validate(doc, by_alias=True, by_name=False)


def errors(obj: AdmissionCheck) -> list[str]:
    return [str(e) for e in validate_admission_check(obj)]


PARAMS = {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "cfg"}


def test_a_complete_check_and_one_without_spec_are_valid() -> None:
    assert errors(check({"controllerName": "example.com/ctl", "parameters": PARAMS})) == []
    assert errors(check(None)) == []  # the CRD makes spec optional: it names no controller


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ({"controllerName": ""}, "spec.controllerName: Required value"),
        (
            {"controllerName": "c" * 254},
            "spec.controllerName: Too long: may not be more than 253 bytes",
        ),
        (
            {"controllerName": "c", "retryDelayMinutes": -1},
            "spec.retryDelayMinutes: Invalid value: -1: must not be negative",
        ),
        (
            {"controllerName": "c", "parameters": {**PARAMS, "apiGroup": "Kueue_Group"}},
            'spec.parameters.apiGroup: Invalid value: "Kueue_Group": spec.parameters.apiGroup '
            "in body should match",
        ),
        (
            {"controllerName": "c", "parameters": {**PARAMS, "kind": "9Config"}},
            'spec.parameters.kind: Invalid value: "9Config"',
        ),
        (
            {"controllerName": "c", "parameters": {**PARAMS, "name": "Upper"}},
            'spec.parameters.name: Invalid value: "Upper"',
        ),
        (
            {"controllerName": "c", "parameters": {**PARAMS, "name": "n" * 64}},
            "spec.parameters.name: Too long: may not be more than 63 bytes",
        ),
        (
            {"controllerName": "c", "parameters": {**PARAMS, "kind": ""}},
            "spec.parameters.kind: Required value",
        ),
    ],
)
def test_each_spec_rule_names_its_field(spec: dict[str, Any], said: str) -> None:
    found = errors(check(spec))
    assert len(found) == 1 and found[0].startswith(said), found


def test_the_kind_pattern_is_case_insensitive_like_the_crds() -> None:
    for kind in ("ProvisioningRequestConfig", "multikueueconfig", "A-b1"):
        assert errors(check({"controllerName": "c", "parameters": {**PARAMS, "kind": kind}})) == []


def test_at_most_sixteen_conditions() -> None:
    conditions = [
        {
            "type": f"T{i}",
            "status": "True",
            "reason": "R",
            "message": "",
            "lastTransitionTime": "2025-01-01T00:00:00Z",
        }
        for i in range(MAX_CONDITIONS + 1)
    ]
    found = errors(check({"controllerName": "c"}, conditions=conditions))
    assert found == ["status.conditions: Too many: 17: must have at most 16 items"]


def test_upstreams_example_checks_decode_in_v1beta2() -> None:
    if not EXAMPLES.is_dir():
        pytest.skip(f"Kueue's example manifests are not at {EXAMPLES}")
    found = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "AdmissionCheck":
                obj = decode_object(doc, source=str(path))
                assert isinstance(obj, AdmissionCheck)
                found.append(obj.metadata.name)
    assert sorted(found) == ["multikueue-ac", "prov-test", "sample-multikueue", "sample-prov"]


def test_a_v1beta2_error_names_the_field_and_the_object() -> None:
    doc = {
        "apiVersion": V1BETA2,
        "kind": "AdmissionCheck",
        "metadata": {"name": "bad"},
        "spec": {"controllerName": "c", "parameters": {**PARAMS, "name": "Bad_Name"}},
    }
    with pytest.raises(ApiError) as err:
        decode_object(doc, source="checks.yaml", index=2)
    text = str(err.value)
    assert "checks.yaml" in text and "AdmissionCheck" in text and "bad" in text
    assert "spec.parameters.name" in text


# -- Workload.status.admissionChecks ----------------------------------------------------


def state(name: str, **extra: Any) -> AdmissionCheckState:
    return AdmissionCheckState.model_validate(
        {
            "name": name,
            "state": "Pending",
            "lastTransitionTime": "2025-01-01T00:00:00Z",
            "message": "",
            **extra,
        },
        by_alias=True,
        by_name=False,
    )


def state_errors(states: list[AdmissionCheckState]) -> list[str]:
    return [str(e) for e in validate_check_states("status.admissionChecks", states)]


def test_valid_states() -> None:
    assert state_errors([state("a"), state("b", retryCount=2, requeueAfterSeconds=30)]) == []


def test_state_limits_name_the_entry() -> None:
    assert state_errors([state(f"c{i}") for i in range(MAX_WORKLOAD_CHECKS + 1)]) == [
        "status.admissionChecks: Too many: 9: must have at most 8 items"
    ]
    assert state_errors([state("a"), state("a")]) == [
        'status.admissionChecks[1].name: Duplicate value: "a"'
    ]
    assert state_errors([state("")]) == ["status.admissionChecks[0].name: Required value"]
    assert state_errors([state("a", requeueAfterSeconds=-1)]) == [
        "status.admissionChecks[0].requeueAfterSeconds: Invalid value: -1: "
        "must be greater than or equal to 0"
    ]
    assert state_errors([state("a", message="m" * 32769)]) == [
        "status.admissionChecks[0].message: Too long: may not be more than 32768 bytes"
    ]
    updates = [{"name": f"ps{i}"} for i in range(MAX_POD_SET_UPDATES + 1)]
    assert state_errors([state("a", podSetUpdates=updates)]) == [
        "status.admissionChecks[0].podSetUpdates: Too many: 19: must have at most 18 items"
    ]
