"""The kueue.x-k8s.io CRDs: generated from the model, structural, named as cluster.md §5 says."""

from __future__ import annotations

import copy
import importlib.util
import re
import subprocess
import sys
from types import ModuleType
from typing import Any

import pytest

from tests.unit.manifests.support import (
    CRD_DIR,
    REPO,
    Schema,
    crds,
    served_schema,
    structural_errors,
    validate,
)

CRDGEN = REPO / "tools" / "crdgen.py"

# cluster.md §5: plural, scope, short names, status subresource.
EXPECTED = {
    "ClusterQueue": ("clusterqueues", "Cluster", ["cq"], True),
    "LocalQueue": ("localqueues", "Namespaced", ["queue", "queues", "lq"], True),
    "Workload": ("workloads", "Namespaced", ["wl"], True),
    "ResourceFlavor": ("resourceflavors", "Cluster", ["flavor", "flavors", "rf"], False),
    "WorkloadPriorityClass": ("workloadpriorityclasses", "Cluster", [], False),
    "Cohort": ("cohorts", "Cluster", [], True),
}


def _crdgen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("crdgen", CRDGEN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("crdgen", module)
    spec.loader.exec_module(module)
    return module


def test_committed_crds_are_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, str(CRDGEN), "--check"],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_check_reports_a_stale_file(tmp_path: Any) -> None:
    crdgen = _crdgen()
    assert crdgen.main(["--out", str(tmp_path)]) == 0
    assert crdgen.main(["--check", "--out", str(tmp_path)]) == 0
    target = tmp_path / "kueue.x-k8s.io_workloads.yaml"
    target.write_text(target.read_text().replace("default: main", "default: other"))
    (tmp_path / "kueue.x-k8s.io_stale.yaml").write_text("{}\n")
    assert crdgen.main(["--check", "--out", str(tmp_path)]) == 1


def test_every_kind_has_a_crd_named_as_the_spec_says() -> None:
    found = crds()
    assert set(found) == set(EXPECTED)
    for kind, (plural, scope, short_names, status) in EXPECTED.items():
        crd = found[kind]
        spec = crd["spec"]
        assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
        assert crd["metadata"]["name"] == f"{plural}.kueue.x-k8s.io"
        assert spec["group"] == "kueue.x-k8s.io"
        assert spec["names"]["plural"] == plural
        assert spec["names"]["singular"] == kind.lower()
        assert spec["names"]["listKind"] == f"{kind}List"
        assert spec["names"].get("shortNames", []) == short_names
        assert spec["scope"] == scope
        # v1beta1 only, served and stored: v1alpha1 Cohorts are an embedded-mode input.
        assert [(v["name"], v["served"], v["storage"]) for v in spec["versions"]] == [
            ("v1beta1", True, True)
        ]
        version = spec["versions"][0]
        assert ("status" in version.get("subresources", {})) == status
        if status:
            assert "status" in version["schema"]["openAPIV3Schema"]["properties"]


def test_every_file_is_in_the_kustomization() -> None:
    kustomization = (CRD_DIR / "kustomization.yaml").read_text()
    for path in CRD_DIR.glob("kueue.x-k8s.io_*.yaml"):
        assert f"- {path.name}" in kustomization


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_schema_is_structural(kind: str) -> None:
    schema = served_schema(crds()[kind], "v1beta1")
    assert schema is not None
    assert structural_errors(schema) == []


def _columns(kind: str) -> dict[str, dict[str, Any]]:
    version = crds()[kind]["spec"]["versions"][0]
    return {c["name"]: c for c in version["additionalPrinterColumns"]}


def test_printer_columns() -> None:
    assert list(_columns("ClusterQueue")) == [
        "Cohort",
        "Strategy",
        "Pending Workloads",
        "Admitted Workloads",
        "Age",
    ]
    assert list(_columns("LocalQueue")) == [
        "ClusterQueue",
        "Pending Workloads",
        "Admitted Workloads",
        "Age",
    ]
    assert list(_columns("Workload")) == ["Queue", "Reserved in", "Admitted", "Finished", "Age"]
    assert _columns("Workload")["Reserved in"]["jsonPath"] == ".status.admission.clusterQueue"
    assert _columns("Cohort")["Parent"]["jsonPath"] == ".spec.parentName"
    for kind in EXPECTED:
        for column in _columns(kind).values():
            assert column["type"] in {"integer", "number", "string", "boolean", "date"}
            assert column["jsonPath"].startswith(".")
        assert _columns(kind)["Age"] == {
            "name": "Age",
            "type": "date",
            "jsonPath": ".metadata.creationTimestamp",
        }


def _spec_path_exists(schema: Schema, json_path: str) -> bool:
    node = schema
    for part in re.sub(r"\[[^\]]*\]", "", json_path).lstrip(".").split("."):
        if node.get("x-kubernetes-preserve-unknown-fields"):
            return True
        properties = node.get("properties") or {}
        if part not in properties:
            return False
        node = properties[part]
        if node.get("type") == "array":
            node = node["items"]
    return True


def test_printer_columns_point_at_fields_of_the_schema() -> None:
    for kind in EXPECTED:
        schema = served_schema(crds()[kind], "v1beta1")
        assert schema is not None
        for column in _columns(kind).values():
            if column["jsonPath"].startswith(".metadata."):
                continue
            assert _spec_path_exists(schema, column["jsonPath"]), (kind, column)


def _prop(schema: Schema, *path: str) -> Schema:
    node = schema
    for part in path:
        node = node["items"] if part == "[]" else node["properties"][part]
    return node


def test_schema_choices() -> None:
    cq = served_schema(crds()["ClusterQueue"], "v1beta1")
    wl = served_schema(crds()["Workload"], "v1beta1")
    cohort = served_schema(crds()["Cohort"], "v1beta1")
    assert cq is not None and wl is not None and cohort is not None
    groups = _prop(cq, "spec", "resourceGroups")
    assert groups["x-kubernetes-list-type"] == "atomic"
    flavors = _prop(groups, "[]", "flavors")
    assert flavors["x-kubernetes-list-map-keys"] == ["name"]
    quota = _prop(flavors, "[]", "resources", "[]", "nominalQuota")
    assert quota["x-kubernetes-int-or-string"] is True
    assert quota["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    assert "pattern" in quota
    assert _prop(cq, "spec", "queueingStrategy")["default"] == "BestEffortFIFO"
    assert _prop(cq, "spec", "queueingStrategy")["enum"] == ["StrictFIFO", "BestEffortFIFO"]
    assert _prop(cq, "spec", "namespaceSelector")["x-kubernetes-preserve-unknown-fields"]
    assert _prop(cq, "spec", "preemption")["default"] == {}
    pod_sets = _prop(wl, "spec", "podSets")
    assert pod_sets["x-kubernetes-list-type"] == "map"
    assert pod_sets["x-kubernetes-list-map-keys"] == ["name"]
    assert _prop(pod_sets, "[]", "name")["default"] == "main"
    assert _prop(pod_sets, "[]", "count") == {"type": "integer", "format": "int32", "default": 1}
    template = _prop(pod_sets, "[]", "template")
    assert template["type"] == "object"
    assert template["x-kubernetes-preserve-unknown-fields"] is True
    conditions = _prop(wl, "status", "conditions")
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    usage = _prop(wl, "status", "admission", "podSetAssignments", "[]", "resourceUsage")
    assert usage["additionalProperties"]["x-kubernetes-int-or-string"] is True
    assert "parentName" in _prop(cohort, "spec")["properties"]
    assert "parent" not in _prop(cohort, "spec")["properties"]


def test_nothing_under_status_is_defaulted() -> None:
    def defaults(node: Any) -> bool:
        if isinstance(node, dict):
            return "default" in node or any(defaults(v) for v in node.values())
        if isinstance(node, list):
            return any(defaults(v) for v in node)
        return False

    for kind in EXPECTED:
        schema = served_schema(crds()[kind], "v1beta1")
        assert schema is not None
        assert not defaults(schema["properties"].get("status", {})), kind


# -- the checker itself catches what kube-apiserver would refuse ----------------------


def _workload_schema() -> Schema:
    schema = served_schema(crds()["Workload"], "v1beta1")
    assert schema is not None
    return copy.deepcopy(schema)


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        (lambda s: s["properties"]["spec"].pop("type"), "a type is required"),
        (
            lambda s: s["properties"]["spec"]["properties"]["podSets"]["items"]["properties"][
                "name"
            ].pop("default"),
            "must be required or have a default",
        ),
        (
            lambda s: s["properties"]["spec"].update(additionalProperties={"type": "string"}),
            "mutually exclusive",
        ),
        (
            lambda s: s["properties"]["spec"].update(anyOf=[{"type": "object"}]),
            "must not be set inside",
        ),
        (
            lambda s: s["properties"]["spec"].update(
                anyOf=[{"properties": {"bogus": {"type": "string"}}}]
            ),
            "must also be specified outside",
        ),
        (lambda s: s["properties"]["spec"].update({"$ref": "#/x"}), "forbidden keywords"),
        (
            lambda s: s["properties"]["metadata"].update(properties={"labels": {"type": "object"}}),
            "only name and generateName",
        ),
        (
            lambda s: s["properties"]["spec"]["properties"]["active"].update(default="yes"),
            "must be of type boolean",
        ),
        (
            lambda s: s["properties"]["spec"]["properties"]["podSets"].pop("items"),
            "arrays must specify items",
        ),
        (
            lambda s: s["properties"]["spec"]["properties"]["priority"].update(
                {"x-kubernetes-int-or-string": True}
            ),
            "must not set a type",
        ),
        (
            lambda s: s["properties"]["spec"].update(additionalProperties=False),
            "must not be false",
        ),
    ],
)
def test_checker_rejects_non_structural_schemas(breakage: Any, message: str) -> None:
    schema = _workload_schema()
    breakage(schema)
    errors = structural_errors(schema)
    assert any(message in e for e in errors), errors


def test_defaults_are_valid_against_their_schema() -> None:
    schema = _workload_schema()
    assert structural_errors(schema) == []
    for kind in EXPECTED:
        root = served_schema(crds()[kind], "v1beta1")
        assert root is not None
        _assert_defaults_valid(root)


def _assert_defaults_valid(node: Any) -> None:
    if isinstance(node, dict):
        if "default" in node:
            assert validate(node["default"], node) == []
        for value in node.values():
            _assert_defaults_valid(value)
    elif isinstance(node, list):
        for value in node:
            _assert_defaults_valid(value)
