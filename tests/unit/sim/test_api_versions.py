"""`simulate` with kueue.x-k8s.io/v1beta2 input, `--api-version`, generated names and
unsupported kinds (docs/simulate.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from queuescope.cli import main
from scheduler.api.generated_names import ALPHABET, generated_name

SETUP = """\
apiVersion: kueue.x-k8s.io/{v}
kind: ResourceFlavor
metadata: {{name: default}}
---
apiVersion: kueue.x-k8s.io/{v}
kind: ClusterQueue
metadata: {{name: cq}}
spec:
  {cohort}: team
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{{name: default, resources: [{{name: cpu, nominalQuota: 4}}]}}]
---
apiVersion: kueue.x-k8s.io/{v}
kind: LocalQueue
metadata: {{name: lq, namespace: ns}}
spec: {{clusterQueue: cq}}
"""
JOB = """\
---
apiVersion: batch/v1
kind: Job
metadata:
  generateName: sample-job-
  namespace: ns
  labels: {kueue.x-k8s.io/queue-name: lq}
spec:
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox, resources: {requests: {cpu: 1}}}]
"""


def setup(version: str) -> str:
    return SETUP.format(v=version, cohort="cohort" if version == "v1beta1" else "cohortName")


def simulate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, *args: str
) -> tuple[int, str, str]:
    path = tmp_path / "input.yaml"
    path.write_text(text, encoding="utf-8")
    capsys.readouterr()
    code = main(["simulate", str(path), *args])
    out, err = capsys.readouterr()
    return code, out, err


def items(out: str) -> dict[str, dict[str, Any]]:
    return {item["kind"]: item for item in json.loads(out)["items"]}


def test_v1beta2_input_prints_v1beta2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = simulate(tmp_path, capsys, setup("v1beta2") + JOB)
    assert code == 0, err
    by_kind = items(out)
    for kind in ("Workload", "ClusterQueue", "LocalQueue"):
        assert by_kind[kind]["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    cq = by_kind["ClusterQueue"]
    assert cq["spec"]["cohortName"] == "team" and "cohort" not in cq["spec"]
    assert cq["spec"]["flavorFungibility"]["whenCanBorrow"] == "MayStopSearch"
    assert "flavorsUsage" in by_kind["LocalQueue"]["status"]
    assert "flavorUsage" not in by_kind["LocalQueue"]["status"]


@pytest.mark.parametrize(
    ("written", "flag", "printed"),
    [
        ("v1beta2", "v1beta1", "v1beta1"),
        ("v1beta1", "v1beta2", "v1beta2"),
        ("v1beta1", None, "v1beta1"),
    ],
)
def test_api_version_flag(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    written: str,
    flag: str | None,
    printed: str,
) -> None:
    args = ["--api-version", flag] if flag else []
    code, out, err = simulate(tmp_path, capsys, setup(written) + JOB, *args)
    assert code == 0, err
    cq = items(out)["ClusterQueue"]
    assert cq["apiVersion"] == f"kueue.x-k8s.io/{printed}"
    assert ("cohort" if printed == "v1beta1" else "cohortName") in cq["spec"]


def test_one_v1beta2_object_makes_the_output_v1beta2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = setup("v1beta1").replace(
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue",
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue",
    )
    code, out, err = simulate(tmp_path, capsys, text)
    assert code == 0, err
    assert items(out)["ClusterQueue"]["apiVersion"] == "kueue.x-k8s.io/v1beta2"


def test_an_unknown_api_version_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        simulate(tmp_path, capsys, setup("v1beta1"), "--api-version", "v1alpha1")
    assert info.value.code == 2


def test_generate_name_gets_a_stable_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = setup("v1beta1") + JOB + JOB
    code, out, err = simulate(tmp_path, capsys, text)
    assert code == 0, err
    workloads = [i for i in json.loads(out)["items"] if i["kind"] == "Workload"]
    owners = sorted(w["metadata"]["ownerReferences"][0]["name"] for w in workloads)
    assert len(set(owners)) == 2
    for owner in owners:
        assert re.fullmatch(f"sample-job-[{ALPHABET}]{{5}}", owner), owner
    path = str(tmp_path / "input.yaml")
    assert owners == sorted(generated_name("sample-job-", path, i, None) for i in (3, 4))
    again = simulate(tmp_path, capsys, text)
    assert again[1] == out


def test_generated_names_fit_kubernetes_limits() -> None:
    name = generated_name("x" * 80, "f.yaml", 0, None)
    assert len(name) == 63 and name.startswith("x" * 58)
    assert generated_name("a-", "f.yaml", 0, None) != generated_name("a-", "f.yaml", 0, 1)
    assert generated_name("a-", "f.yaml", 0, None) != generated_name("a-", "g.yaml", 0, None)


def test_an_explicit_name_wins_over_generate_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = JOB.replace("generateName: sample-job-", "generateName: sample-job-\n  name: fixed")
    code, out, err = simulate(tmp_path, capsys, setup("v1beta1") + job)
    assert code == 0, err
    assert items(out)["Workload"]["metadata"]["ownerReferences"][0]["name"] == "fixed"


@pytest.mark.parametrize(
    "kind",
    [
        "Topology",
        "MultiKueueCluster",
        "MultiKueueConfig",
        "ProvisioningRequestConfig",
    ],
)
def test_unsupported_kueue_kinds_exit_2_naming_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    text = setup("v1beta2") + f"---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: {kind}\n"
    text += "metadata: {name: thing}\nspec: {}\n"
    code, out, err = simulate(tmp_path, capsys, text)
    assert code == 2
    assert out == ""
    assert err.startswith(f'error: {tmp_path / "input.yaml"}: document 3 ({kind} "thing"): kind:')
    assert f"kind {kind} (kueue.x-k8s.io/v1beta2) is not supported by queuescope" in err


def test_a_v1beta2_object_applied_by_a_scenario_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = """\
---
apiVersion: simulation.queuescope.io/v1alpha1
kind: Scenario
metadata: {name: s}
spec:
  events:
  - at: 10s
    apply:
      apiVersion: kueue.x-k8s.io/v1beta2
      kind: LocalQueue
      metadata: {name: late, namespace: ns}
      spec: {clusterQueue: cq}
"""
    code, out, err = simulate(tmp_path, capsys, setup("v1beta1") + scenario)
    assert code == 0, err
    queues = [i for i in json.loads(out)["items"] if i["kind"] == "LocalQueue"]
    assert {q["metadata"]["name"] for q in queues} == {"lq", "late"}
    assert {q["apiVersion"] for q in queues} == {"kueue.x-k8s.io/v1beta2"}
