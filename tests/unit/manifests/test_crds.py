"""The kueue.x-k8s.io CRDs: generated from the model, structural, named as docs/cluster.md#manifests
says."""

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

# Plural, scope, short names (Kueue v0.19.2's), status subresource.
EXPECTED = {
    "ClusterQueue": ("clusterqueues", "Cluster", ["cq"], True),
    "LocalQueue": ("localqueues", "Namespaced", ["queue", "queues", "lq"], True),
    "Workload": (
        "workloads",
        "Namespaced",
        ["kwl", "kueueworkload", "kueueworkloads"],
        True,
    ),
    "ResourceFlavor": ("resourceflavors", "Cluster", ["flavor", "flavors", "rf"], False),
    "WorkloadPriorityClass": ("workloadpriorityclasses", "Cluster", ["wpc"], False),
    "Cohort": ("cohorts", "Cluster", ["co"], True),
    "AdmissionCheck": ("admissionchecks", "Cluster", ["ac"], True),
    # Stored and validated, not acted on (docs/scheduling.md#kinds-stored-but-not-acted-on).
    "ProvisioningRequestConfig": ("provisioningrequestconfigs", "Cluster", ["prc"], False),
    "MultiKueueConfig": ("multikueueconfigs", "Cluster", ["mkconf"], False),
    "MultiKueueCluster": ("multikueueclusters", "Cluster", ["mkc"], True),
    "Topology": ("topologies", "Cluster", ["topo"], False),
}
INERT = {"ProvisioningRequestConfig", "MultiKueueConfig", "MultiKueueCluster", "Topology"}
VERSIONS = ("v1beta1", "v1beta2")
# Converted through our webhook (the rest: strategy None), as Kueue does.
CONVERTED = {
    "ClusterQueue",
    "LocalQueue",
    "Workload",
    "Cohort",
    "AdmissionCheck",
    "MultiKueueConfig",
    "MultiKueueCluster",
}
# Kueue leaves MultiKueueConfig's v1beta1 undeprecated.
NOT_DEPRECATED = {"MultiKueueConfig"}


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
        # v1beta2 stored; v1beta1 served and deprecated with Kueue's warning.
        assert [(v["name"], v["served"], v["storage"]) for v in spec["versions"]] == [
            ("v1beta1", True, False),
            ("v1beta2", True, True),
        ]
        old, new = spec["versions"]
        if kind in NOT_DEPRECATED:
            assert "deprecated" not in old and "deprecationWarning" not in old
        else:
            assert old["deprecated"] is True
            assert old["deprecationWarning"] == "This version is deprecated. Use v1beta2 instead."
        assert "deprecated" not in new
        for version in spec["versions"]:
            assert ("status" in version.get("subresources", {})) == status
            if status:
                assert "status" in version["schema"]["openAPIV3Schema"]["properties"]


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_conversion_is_our_webhook_where_the_versions_differ(kind: str) -> None:
    conversion = crds()[kind]["spec"]["conversion"]
    if kind not in CONVERTED:
        assert conversion == {"strategy": "None"}
        assert served_schema(crds()[kind], "v1beta1") == served_schema(crds()[kind], "v1beta2")
        return
    assert conversion == {
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": {
                "service": {
                    "namespace": "queuescope-system",
                    "name": "queuescope-visibility",
                    "path": "/convert",
                    "port": 443,
                }
            },
            "conversionReviewVersions": ["v1"],
        },
    }


def _undescribed(node: Schema, path: str) -> list[str]:
    missing: list[str] = []
    for name, prop in (node.get("properties") or {}).items():
        if path.count(".") == 0 and name == "metadata":
            continue  # a CRD may not describe metadata (kube-apiserver refuses it)
        if not prop.get("description"):
            missing.append(f"{path}.{name}")
        missing += _undescribed(prop, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        missing += _undescribed(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        missing += _undescribed(node["additionalProperties"], f"{path}{{}}")
    return missing


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_every_field_has_a_description(kind: str, version: str) -> None:
    schema = served_schema(crds()[kind], version)
    assert schema is not None
    assert schema["description"]
    assert _undescribed(schema, kind) == []


def test_a_field_without_a_description_fails_the_check(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    crdgen = _crdgen()
    assert crdgen.main(["--out", str(tmp_path)]) == 0
    monkeypatch.delitem(crdgen.FIELDS, ("ResourceQuota", "lendingLimit"))
    assert crdgen.main(["--check", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "no description for ('ResourceQuota', 'lendingLimit')" in err
    assert "spec.resourceGroups[].flavors[].resources[].lendingLimit" in err


def test_v1beta2_renames_what_kueue_renamed() -> None:
    cq1 = served_schema(crds()["ClusterQueue"], "v1beta1")
    cq2 = served_schema(crds()["ClusterQueue"], "v1beta2")
    wl1 = served_schema(crds()["Workload"], "v1beta1")
    wl2 = served_schema(crds()["Workload"], "v1beta2")
    assert cq1 is not None and cq2 is not None and wl1 is not None and wl2 is not None
    spec1, spec2 = _prop(cq1, "spec")["properties"], _prop(cq2, "spec")["properties"]
    assert "cohort" in spec1 and "cohortName" not in spec1
    assert "cohortName" in spec2 and "cohort" not in spec2
    assert "admissionChecks" in spec1 and "admissionChecks" not in spec2
    fungibility = _prop(cq2, "spec", "flavorFungibility", "whenCanBorrow")
    assert fungibility["enum"] == ["MayStopSearch", "TryNextFlavor"]
    assert fungibility["default"] == "MayStopSearch"
    ref = _prop(wl2, "spec", "priorityClassRef")
    assert ref["required"] == ["group", "kind", "name"]
    assert _prop(ref, "kind")["enum"] == ["WorkloadPriorityClass", "PriorityClass"]
    # Every group/kind pair the schema lets through converts to v1beta1.
    rules = [r["rule"] for r in ref["x-kubernetes-validations"]]
    assert rules == [
        "(self.group == 'scheduling.k8s.io') ? self.kind == 'PriorityClass' : true",
        "(self.group == 'kueue.x-k8s.io') ? self.kind == 'WorkloadPriorityClass' : true",
    ]
    assert {"priorityClassName", "priorityClassSource"} <= set(_prop(wl1, "spec")["properties"])
    assert not {"priorityClassName", "priorityClassSource"} & set(_prop(wl2, "spec")["properties"])
    assert "accumulatedPastExecutionTimeSeconds" in _prop(wl2, "status")["properties"]
    assert "accumulatedPastExexcutionTimeSeconds" in _prop(wl1, "status")["properties"]


def test_every_file_is_in_the_kustomization() -> None:
    kustomization = (CRD_DIR / "kustomization.yaml").read_text()
    for path in CRD_DIR.glob("kueue.x-k8s.io_*.yaml"):
        assert f"- {path.name}" in kustomization


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_schema_is_structural(kind: str, version: str) -> None:
    schema = served_schema(crds()[kind], version)
    assert schema is not None
    assert structural_errors(schema) == []


def _columns(kind: str, version: str = "v1beta1") -> dict[str, dict[str, Any]]:
    (found,) = (v for v in crds()[kind]["spec"]["versions"] if v["name"] == version)
    return {c["name"]: c for c in found.get("additionalPrinterColumns", [])}


# Kueue v0.19.2's columns: (name, jsonPath, type, priority) per kind; the same in both
# versions except ClusterQueue's renamed cohort field.
COLUMNS = {
    "ClusterQueue": [
        ("Cohort", ".spec.cohort", "string", 0),
        ("Strategy", ".spec.queueingStrategy", "string", 1),
        ("Pending Workloads", ".status.pendingWorkloads", "integer", 0),
        ("Admitted Workloads", ".status.admittedWorkloads", "integer", 1),
    ],
    "LocalQueue": [
        ("ClusterQueue", ".spec.clusterQueue", "string", 0),
        ("Pending Workloads", ".status.pendingWorkloads", "integer", 0),
        ("Admitted Workloads", ".status.admittedWorkloads", "integer", 0),
    ],
    "Workload": [
        ("Queue", ".spec.queueName", "string", 0),
        ("Reserved in", ".status.admission.clusterQueue", "string", 0),
        ("Admitted", ".status.conditions[?(@.type=='Admitted')].status", "string", 0),
        ("Finished", ".status.conditions[?(@.type=='Finished')].status", "string", 0),
        ("Age", ".metadata.creationTimestamp", "date", 0),
    ],
    "ResourceFlavor": [],
    "WorkloadPriorityClass": [("Value", ".value", "integer", 0)],
    "Cohort": [],
    "MultiKueueCluster": [
        ("Connected", ".status.conditions[?(@.type=='Active')].status", "string", 0),
        ("Age", ".metadata.creationTimestamp", "date", 0),
    ],
    "ProvisioningRequestConfig": [],
    "MultiKueueConfig": [],
    "Topology": [],
}


@pytest.mark.parametrize("version", VERSIONS)
def test_printer_columns(version: str) -> None:
    for kind, columns in COLUMNS.items():
        wanted = columns
        if kind == "ClusterQueue" and version == "v1beta2":
            wanted = [("Cohort", ".spec.cohortName", "string", 0), *columns[1:]]
        found = [
            (c["name"], c["jsonPath"], c["type"], c.get("priority", 0))
            for c in _columns(kind, version).values()
        ]
        assert found == wanted, kind
        assert all(c["description"] for c in _columns(kind, version).values())


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


@pytest.mark.parametrize("version", VERSIONS)
def test_printer_columns_point_at_fields_of_the_schema(version: str) -> None:
    for kind in EXPECTED:
        schema = served_schema(crds()[kind], version)
        assert schema is not None
        for column in _columns(kind, version).values():
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
    assert _prop(pod_sets, "[]", "count") == {
        "description": "Number of pods.",
        "type": "integer",
        "format": "int32",
        "default": 1,
    }
    template = _prop(pod_sets, "[]", "template")
    assert template["type"] == "object"
    assert template["x-kubernetes-preserve-unknown-fields"] is True
    conditions = _prop(wl, "status", "conditions")
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    usage = _prop(wl, "status", "admission", "podSetAssignments", "[]", "resourceUsage")
    assert usage["additionalProperties"]["x-kubernetes-int-or-string"] is True
    assert "parentName" in _prop(cohort, "spec")["properties"]
    assert "parent" not in _prop(cohort, "spec")["properties"]


@pytest.mark.parametrize("kind", sorted(INERT))
def test_an_inert_kind_says_no_controller_acts_on_it(kind: str) -> None:
    for version in VERSIONS:
        schema = served_schema(crds()[kind], version)
        assert schema is not None
        assert (
            "queuescope stores and validates it, but no queuescope controller acts on it"
            in (schema["description"])
        )
        assert "is not implemented" in schema["description"]


def test_inert_kinds_schemas_keep_kueues_fields_and_choices() -> None:
    prc = served_schema(crds()["ProvisioningRequestConfig"], "v1beta2")
    mkconf1 = served_schema(crds()["MultiKueueConfig"], "v1beta1")
    mkconf2 = served_schema(crds()["MultiKueueConfig"], "v1beta2")
    mkc1 = served_schema(crds()["MultiKueueCluster"], "v1beta1")
    mkc2 = served_schema(crds()["MultiKueueCluster"], "v1beta2")
    topo = served_schema(crds()["Topology"], "v1beta2")
    assert None not in (prc, mkconf1, mkconf2, mkc1, mkc2, topo)
    assert prc is not None and mkconf1 is not None and mkconf2 is not None
    assert mkc1 is not None and mkc2 is not None and topo is not None
    assert _prop(prc, "spec")["required"] == ["provisioningClassName"]
    assert _prop(prc, "spec", "podSetMergePolicy")["enum"] == [
        "IdenticalPodTemplates",
        "IdenticalWorkloadSchedulingRequirements",
    ]
    retry = _prop(prc, "spec", "retryStrategy")
    assert retry["default"] == {}
    assert {k: v["default"] for k, v in retry["properties"].items()} == {
        "backoffLimitCount": 3,
        "backoffBaseSeconds": 60,
        "backoffMaxSeconds": 1800,
    }
    assert _prop(prc, "spec", "managedResources")["x-kubernetes-list-type"] == "set"
    selectors = _prop(prc, "spec", "podSetUpdates", "nodeSelector")
    assert selectors["x-kubernetes-list-map-keys"] == ["key"]
    assert _prop(mkconf1, "spec", "clusters")["x-kubernetes-list-type"] == "set"
    assert _prop(mkconf2, "spec", "clusters")["x-kubernetes-list-type"] == "atomic"
    assert "quotaManagement" not in _prop(mkconf1, "spec")["properties"]
    assert _prop(mkconf2, "spec", "quotaManagement")["enum"] == ["Manual", "Automated"]
    assert _prop(mkc1, "spec")["required"] == ["kubeConfig"]
    assert _prop(mkc2, "spec")["required"] == ["clusterSource"]
    kube_config = _prop(mkc2, "spec", "clusterSource", "kubeConfig")
    assert kube_config["required"] == ["location"]
    assert _prop(kube_config, "locationType")["enum"] == ["Secret", "Path"]
    assert _prop(kube_config, "locationType")["default"] == "Secret"
    assert _prop(topo, "spec")["required"] == ["levels"]
    assert _prop(topo, "spec", "levels", "[]")["required"] == ["nodeLabel"]


def test_nothing_under_status_is_defaulted() -> None:
    def defaults(node: Any) -> bool:
        if isinstance(node, dict):
            return "default" in node or any(defaults(v) for v in node.values())
        if isinstance(node, list):
            return any(defaults(v) for v in node)
        return False

    for kind in EXPECTED:
        for version in VERSIONS:
            schema = served_schema(crds()[kind], version)
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
        for version in VERSIONS:
            root = served_schema(crds()[kind], version)
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
