"""How each field maps between kueue.x-k8s.io/v1beta1 and v1beta2 (docs/api-versions.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scheduler.api.conversion import STASH_ANNOTATION, convert_document, v1beta2_path
from scheduler.api.errors import ApiError
from scheduler.api.versions import KUEUE_V1BETA1 as V1
from scheduler.api.versions import KUEUE_V1BETA2 as V2


def doc(api_version: str, kind: str, **parts: Any) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}, **parts}


def stash(obj: dict[str, Any]) -> dict[str, Any]:
    return dict(json.loads(obj["metadata"]["annotations"][STASH_ANNOTATION]))


def test_cluster_queue_cohort_is_cohort_name() -> None:
    up = convert_document(doc(V1, "ClusterQueue", spec={"cohort": "team"}), V2)
    assert up == doc(V2, "ClusterQueue", spec={"cohortName": "team"})
    assert convert_document(up, V1) == doc(V1, "ClusterQueue", spec={"cohort": "team"})


def test_borrow_and_preempt_are_may_stop_search_in_v1beta2() -> None:
    fungibility = {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}
    up = convert_document(doc(V1, "ClusterQueue", spec={"flavorFungibility": fungibility}), V2)
    assert up["spec"]["flavorFungibility"] == {
        "whenCanBorrow": "MayStopSearch",
        "whenCanPreempt": "MayStopSearch",
    }
    # A v1beta2 client that changes the field wins over the kept v1beta1 spelling.
    up["spec"]["flavorFungibility"]["whenCanBorrow"] = "TryNextFlavor"
    back = convert_document(up, V1)
    assert back["spec"]["flavorFungibility"] == {
        "whenCanBorrow": "TryNextFlavor",
        "whenCanPreempt": "Preempt",
    }
    assert "annotations" not in back["metadata"]


def test_may_stop_search_stays_in_v1beta1() -> None:
    fungibility = {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}
    down = convert_document(doc(V2, "ClusterQueue", spec={"flavorFungibility": fungibility}), V1)
    assert down["spec"]["flavorFungibility"] == fungibility
    assert "annotations" not in down["metadata"]


def test_admission_checks_become_strategy_rules() -> None:
    up = convert_document(doc(V1, "ClusterQueue", spec={"admissionChecks": ["a", "b"]}), V2)
    assert up["spec"] == {
        "admissionChecksStrategy": {"admissionChecks": [{"name": "a"}, {"name": "b"}]}
    }
    assert convert_document(up, V1)["spec"] == {"admissionChecks": ["a", "b"]}
    # Without the record (keep=False), v1beta1 sees the strategy form: same meaning.
    plain = convert_document(
        doc(V1, "ClusterQueue", spec={"admissionChecks": ["a"]}), V2, keep=False
    )
    assert STASH_ANNOTATION not in plain["metadata"].get("annotations", {})
    assert convert_document(plain, V1)["spec"] == {
        "admissionChecksStrategy": {"admissionChecks": [{"name": "a"}]}
    }


def test_both_admission_check_lists_are_refused() -> None:
    spec = {"admissionChecks": ["a"], "admissionChecksStrategy": {"admissionChecks": []}}
    with pytest.raises(ApiError) as info:
        convert_document(doc(V1, "ClusterQueue", spec=spec), V2)
    assert info.value.path == "spec"
    assert 'ClusterQueue "x"' in str(info.value)


def test_v1beta2_only_fields_are_kept_in_the_annotation() -> None:
    policy = {"migration": {"mode": "TryPreferredFlavors"}}
    original = doc(
        V2, "ClusterQueue", spec={"cohortName": "c", "concurrentAdmissionPolicy": policy}
    )
    original["metadata"]["annotations"] = {"team": "a"}
    down = convert_document(original, V1)
    assert down["spec"] == {"cohort": "c"}
    assert down["metadata"]["annotations"]["team"] == "a"
    assert stash(down)["to"] == V1
    assert convert_document(down, V2) == original
    assert convert_document(original, V1, keep=False)["metadata"]["annotations"] == {"team": "a"}


def test_v1beta1_only_status_is_kept_too() -> None:
    status = {
        "pendingWorkloads": 1,
        "pendingWorkloadsStatus": {"lastChangeTime": "2026-01-01T00:00:00Z"},
    }
    up = convert_document(doc(V1, "ClusterQueue", status=status), V2)
    assert up["status"] == {"pendingWorkloads": 1}
    assert convert_document(up, V1)["status"] == status


def test_local_queue_flavor_usage_is_flavors_usage() -> None:
    usage = [{"name": "f", "resources": [{"name": "cpu", "total": "1"}]}]
    up = convert_document(doc(V1, "LocalQueue", status={"flavorUsage": usage}), V2)
    assert up["status"] == {"flavorsUsage": usage}
    assert convert_document(up, V1)["status"] == {"flavorUsage": usage}


@pytest.mark.parametrize(
    ("source", "group", "kind"),
    [
        ("kueue.x-k8s.io/workloadpriorityclass", "kueue.x-k8s.io", "WorkloadPriorityClass"),
        ("scheduling.k8s.io/priorityclass", "scheduling.k8s.io", "PriorityClass"),
    ],
)
def test_priority_class_source_and_name_are_priority_class_ref(
    source: str, group: str, kind: str
) -> None:
    spec = {"priorityClassName": "high", "priorityClassSource": source, "priority": 5}
    up = convert_document(doc(V1, "Workload", spec=spec), V2)
    assert up["spec"] == {
        "priorityClassRef": {"group": group, "kind": kind, "name": "high"},
        "priority": 5,
    }
    assert convert_document(up, V1)["spec"] == spec


def test_unknown_priority_class_ref_is_refused() -> None:
    spec = {"priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "PriorityClass", "name": "a"}}
    with pytest.raises(ApiError) as info:
        convert_document(doc(V2, "Workload", spec=spec), V1)
    assert info.value.path == "spec.priorityClassRef"


def test_past_execution_time_spelling() -> None:
    up = convert_document(
        doc(V1, "Workload", status={"accumulatedPastExexcutionTimeSeconds": 7}), V2
    )
    assert up["status"] == {"accumulatedPastExecutionTimeSeconds": 7}


def test_topology_domains_and_slices_describe_the_same_domains() -> None:
    packed = {
        "levels": ["rack", "host"],
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [
                    {"universal": "r1"},
                    {"individual": {"prefix": "h-", "roots": ["1", "2"]}},
                ],
                "podCounts": {"universal": 3},
            }
        ],
    }
    status = {
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [{"name": "main", "topologyAssignment": packed}],
        }
    }
    down = convert_document(doc(V2, "Workload", status=status), V1)
    assignment = down["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    assert assignment == {
        "levels": ["rack", "host"],
        "domains": [{"values": ["r1", "h-1"], "count": 3}, {"values": ["r1", "h-2"], "count": 3}],
    }
    assert convert_document(down, V2)["status"] == status


def test_bad_slices_name_the_field() -> None:
    packed = {
        "levels": ["a"],
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [{"universal": "x"}],
                "podCounts": {"individual": [1]},
            }
        ],
    }
    status = {
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [{"name": "m", "topologyAssignment": packed}],
        }
    }
    with pytest.raises(ApiError) as info:
        convert_document(doc(V2, "Workload", status=status), V1)
    assert info.value.path == (
        "status.admission.podSetAssignments[0].topologyAssignment.slices[0].podCounts.individual"
    )


def test_metadata_and_unknown_fields_are_carried_untouched() -> None:
    original = doc(V1, "ResourceFlavor", spec={"nodeLabels": {"a": "b"}, "futureField": [1]})
    original["metadata"] = {"name": "x", "uid": "u", "resourceVersion": "7", "labels": {"l": "v"}}
    up = convert_document(original, V2)
    assert up == {**original, "apiVersion": V2}
    assert up["metadata"] is not original["metadata"]


def test_same_version_is_a_copy() -> None:
    original = doc(V2, "Cohort", spec={"parentName": "root"})
    assert convert_document(original, V2) == original


@pytest.mark.parametrize(
    ("document", "path", "fragment"),
    [
        (doc(V1, "Widget"), "kind", "cannot convert kind 'Widget'"),
        (doc("kueue.x-k8s.io/v1alpha1", "Cohort"), "apiVersion", "unsupported version"),
        (doc(V1, "ClusterQueue"), "", "unsupported version 'v1'"),
    ],
)
def test_what_cannot_be_converted(document: dict[str, Any], path: str, fragment: str) -> None:
    target = "v1" if fragment.endswith("'v1'") else V2
    with pytest.raises(ApiError) as info:
        convert_document(document, target)
    assert info.value.path == path
    assert fragment in info.value.detail


def test_a_foreign_annotation_value_is_an_error_naming_it() -> None:
    original = doc(V2, "ClusterQueue")
    original["metadata"]["annotations"] = {STASH_ANNOTATION: "not json"}
    with pytest.raises(ApiError) as info:
        convert_document(original, V1)
    assert info.value.path == f"metadata.annotations[{STASH_ANNOTATION}]"


def test_v1beta2_names_of_error_paths() -> None:
    assert v1beta2_path("spec.cohort") == "spec.cohortName"
    assert v1beta2_path("spec.cohortX") == "spec.cohortX"
    assert v1beta2_path("status.flavorUsage[0].name") == "status.flavorsUsage[0].name"


def test_slices_need_one_value_per_level() -> None:
    packed = {
        "levels": ["rack", "host"],
        "slices": [
            {
                "domainCount": 1,
                "valuesPerLevel": [{"universal": "r"}],
                "podCounts": {"universal": 1},
            }
        ],
    }
    assignment = {"name": "m", "topologyAssignment": packed}
    status = {"admission": {"clusterQueue": "cq", "podSetAssignments": [assignment]}}
    with pytest.raises(ApiError) as info:
        convert_document(doc(V2, "Workload", status=status), V1)
    assert info.value.path.endswith("topologyAssignment.slices[0].valuesPerLevel")
    assert "same length as the number of levels" in info.value.detail
