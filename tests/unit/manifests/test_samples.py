"""What the model accepts, the CRDs accept: samples, Workloads made from the sample Jobs, and
every conformance fixture object that decodes."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api import (
    ApiError,
    Job,
    PriorityClass,
    WorkloadPriorityClass,
    decode_object,
    job_to_workload,
    load_documents,
)
from scheduler.api.foreign import FOREIGN_KINDS
from tests.unit.manifests.support import (
    CONFORMANCE,
    SAMPLES,
    crds,
    documents,
    validate,
    validate_object,
    yaml_files,
)

GROUP = "kueue.x-k8s.io"


def _kueue_documents(paths: list[Any]) -> list[tuple[str, int, dict[str, Any]]]:
    out = []
    for path in paths:
        for index, doc in enumerate(documents(path)):
            if isinstance(doc, dict) and str(doc.get("apiVersion", "")).startswith(f"{GROUP}/"):
                out.append((path.name, index, doc))
    return out


SAMPLE_DOCS = _kueue_documents(yaml_files(SAMPLES))


def test_samples_cover_every_kind_but_workload() -> None:
    # Workloads come from the sample Jobs (below). The kinds queuescope stores but does
    # not act on are no input of `serve --embedded`, which runs on the samples.
    kinds = {doc["kind"] for _, _, doc in SAMPLE_DOCS}
    assert kinds == set(crds()) - {"Workload"} - set(FOREIGN_KINDS)


@pytest.mark.parametrize(
    "doc", [d for _, _, d in SAMPLE_DOCS], ids=[f"{f}#{i}" for f, i, _ in SAMPLE_DOCS]
)
def test_sample_validates_against_its_crd(doc: dict[str, Any]) -> None:
    assert validate_object(doc, crds()[doc["kind"]]) == []


def test_workloads_from_the_sample_jobs_validate() -> None:
    objects = [d.obj for d in load_documents([str(SAMPLES)])]
    wpcs = {o.metadata.name: o for o in objects if isinstance(o, WorkloadPriorityClass)}
    pcs = {o.metadata.name: o for o in objects if isinstance(o, PriorityClass)}
    jobs = [o for o in objects if isinstance(o, Job)]
    assert jobs
    for job in jobs:
        workload = job_to_workload(job, wpcs, pcs).to_dict()
        assert validate_object(workload, crds()["Workload"]) == [], job.metadata.name


def _conformance_documents() -> list[tuple[str, int, dict[str, Any]]]:
    return _kueue_documents(sorted(CONFORMANCE.glob("*/input.yaml")))


def test_every_conformance_object_the_model_accepts_validates() -> None:
    checked: dict[str, int] = {}
    for name, index, doc in _conformance_documents():
        try:
            decode_object(doc)
        except ApiError:
            continue  # the fixture is about rejecting it
        where = f"{name}#{index} {doc['kind']}"
        if doc["apiVersion"] == f"{GROUP}/v1alpha1" and doc["kind"] == "Cohort":
            # Served by the embedded mode and the simulator only (tools/crdgen.py).
            continue
        assert doc["apiVersion"] == f"{GROUP}/v1beta1", where
        errors = validate_object(doc, crds()[doc["kind"]])
        assert errors == [], where
        checked[doc["kind"]] = checked.get(doc["kind"], 0) + 1
    assert set(checked) >= {"ClusterQueue", "LocalQueue", "Workload", "ResourceFlavor"}


def test_v1alpha1_cohorts_are_not_served() -> None:
    doc = {"apiVersion": f"{GROUP}/v1alpha1", "kind": "Cohort", "metadata": {"name": "x"}}
    assert validate_object(doc, crds()["Cohort"]) == [
        "kueue.x-k8s.io/v1alpha1 is not served by cohorts.kueue.x-k8s.io"
    ]


# -- the validator rejects what the API server would -----------------------------------


def _cq(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "q"},
        "spec": spec,
    }


def _group(**quota: Any) -> dict[str, Any]:
    return {
        "coveredResources": ["cpu"],
        "flavors": [{"name": "f", "resources": [{"name": "cpu", **quota}]}],
    }


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"cohort": "a", "bogus": 1}, "unknown field 'bogus'"),
        ({"queueingStrategy": "LIFO"}, "unsupported value 'LIFO'"),
        ({"resourceGroups": [_group(nominalQuota="lots")]}, "does not match"),
        ({"resourceGroups": [_group(nominalQuota=0.5)]}, "must be an integer or a string"),
        ({"resourceGroups": [_group()]}, "nominalQuota: required value"),
        (
            {
                "resourceGroups": [
                    {
                        **_group(nominalQuota=1),
                        "flavors": [{"name": "f", "resources": []}, {"name": "f", "resources": []}],
                    }
                ]
            },
            "duplicate entries",
        ),
        (
            {"preemption": {"borrowWithinCohort": {"maxPriorityThreshold": 2**31}}},
            "does not fit int32",
        ),
        ({"cohort": 3}, "must be of type string"),
    ],
)
def test_validator_rejects(spec: dict[str, Any], message: str) -> None:
    errors = validate_object(_cq(spec), crds()["ClusterQueue"])
    assert any(message in e for e in errors), errors


def test_validator_accepts_quantities_and_preserved_fields() -> None:
    spec = {
        "namespaceSelector": {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
        "resourceGroups": [_group(nominalQuota=4, borrowingLimit="500m", lendingLimit="1.5e3")],
    }
    assert validate_object(_cq(spec), crds()["ClusterQueue"]) == []
    assert validate(None, {"type": "string"}) == []  # nulls are pruned
