"""Upstream Kueue v0.19.2's example manifests in `simulate` (docs/simulate.md).

Every example file made only of the kinds queuescope implements (ResourceFlavor,
ClusterQueue, LocalQueue, Cohort, WorkloadPriorityClass, batch/v1 Job, plus Namespaces
and RBAC) must load; every other file must fail with exit status 2 naming the file,
the document and the first kind queuescope does not implement. The counts are pinned,
so an example that stops loading (or a file that goes missing) fails the test. The two
Pod files are their own case (docs/simulate.md#pods): the single Pod loads with a
Configuration that lists `pod`, and the pod group is refused naming its keys. So is the
StatefulSet file (docs/simulate.md#statefulsets): it loads with a Configuration that
lists `statefulset`, its LocalQueue `user-queue` left dangling or given by the admin
example that defines it; and the JobSet file (docs/simulate.md#jobsets), with one that
lists `jobset.x-k8s.io/jobset`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from queuescope.cli import main

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO.parent / "shared" / "kueue-examples" / "v0.19.2"

IMPLEMENTED = frozenset(
    {
        ("kueue.x-k8s.io", "ResourceFlavor"),
        ("kueue.x-k8s.io", "ClusterQueue"),
        ("kueue.x-k8s.io", "LocalQueue"),
        ("kueue.x-k8s.io", "Cohort"),
        ("kueue.x-k8s.io", "WorkloadPriorityClass"),
        ("kueue.x-k8s.io", "AdmissionCheck"),
        ("batch", "Job"),
        ("", "Namespace"),
        ("rbac.authorization.k8s.io", "Role"),
        ("rbac.authorization.k8s.io", "ClusterRole"),
        ("rbac.authorization.k8s.io", "RoleBinding"),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    }
)

# Determined by classifying the v0.19.2 examples (87 files, 85 of them YAML): 36
# loadable, the two Pod files, the StatefulSet file, the JobSet file, and 45 others.
LOADABLE_FILES = 36
UNSUPPORTED_FILES = 45
SITE_EXAMPLES = EXAMPLES / "site" / "static" / "examples"
POD_EXAMPLES = SITE_EXAMPLES / "pods-kueue"
POD_FILES = frozenset({POD_EXAMPLES / "kueue-pod.yaml", POD_EXAMPLES / "kueue-pod-group.yaml"})
STATEFULSET_FILE = SITE_EXAMPLES / "serving-workloads" / "sample-statefulset.yaml"
JOBSET_FILE = SITE_EXAMPLES / "jobs" / "sample-jobset.yaml"
# The files tested on their own, below.
OWN_CASES = POD_FILES | {STATEFULSET_FILE, JOBSET_FILE}
# Where the StatefulSet's LocalQueue `user-queue` (and its ClusterQueue) are defined.
USER_QUEUE_SETUP = SITE_EXAMPLES / "admin" / "single-clusterqueue-setup.yaml"
# Job files whose WorkloadPriorityClass is defined in another file of their directory
# (kueueviz's numbered set, meant to be applied together): alone they are an input
# error naming the missing class; with their directory's setup files they load.
NEED_SETUP = frozenset(
    {
        "cmd/kueueviz/examples/03-agi-job.yaml",
        "cmd/kueueviz/examples/04-llm-job.yaml",
        "cmd/kueueviz/examples/05-cancer-cure-research.yaml",
    }
)

pytestmark = pytest.mark.skipif(
    not EXAMPLES.is_dir(), reason=f"Kueue's example manifests are not at {EXAMPLES}"
)


@dataclass(frozen=True)
class Example:
    path: Path
    kinds: tuple[tuple[str, str], ...]  # (group, kind) per non-empty document

    @property
    def name(self) -> str:
        return self.path.relative_to(EXAMPLES).as_posix()

    @property
    def loadable(self) -> bool:
        return bool(self.kinds) and all(k in IMPLEMENTED for k in self.kinds)

    @property
    def has_job(self) -> bool:
        return ("batch", "Job") in self.kinds

    def first_unsupported(self) -> tuple[int, str]:
        for index, kind in enumerate(self.kinds):
            if kind not in IMPLEMENTED:
                return index, kind[1]
        raise AssertionError(f"{self.name} has only implemented kinds")


def _group(document: dict[str, Any]) -> str:
    api_version = str(document.get("apiVersion", ""))
    return api_version.rpartition("/")[0]


def _examples() -> list[Example]:
    if not EXAMPLES.is_dir():
        return []
    found = []
    for path in sorted(EXAMPLES.rglob("*")):
        if path.suffix not in (".yaml", ".yml") or not path.is_file():
            continue
        documents = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
        kinds = tuple((_group(d), str(d.get("kind"))) for d in documents)
        found.append(Example(path, kinds))
    return found


def _simulate(capsys: pytest.CaptureFixture[str], *paths: Path) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["simulate", *(str(p) for p in paths), "-o", "json"])
    return code, capsys.readouterr().err


def _setup_files(example: Example, examples: list[Example]) -> list[Path]:
    """The directory's loadable files without Jobs (queues, flavors, priority classes)."""
    return [
        other.path
        for other in examples
        if other.path.parent == example.path.parent
        and other.loadable
        and not other.has_job
        and other.path != example.path
    ]


def test_every_loadable_example_loads(capsys: pytest.CaptureFixture[str]) -> None:
    examples = _examples()
    loadable = [e for e in examples if e.loadable]
    loaded_alone: list[str] = []
    failures: list[str] = []
    for example in loadable:
        code, err = _simulate(capsys, example.path)
        if code == 0:
            loaded_alone.append(example.name)
            continue
        if example.name not in NEED_SETUP:
            failures.append(f"{example.name}: exit {code}: {err.strip()}")
            continue
        assert "WorkloadPriorityClass" in err and "not found" in err, err
        code, err = _simulate(capsys, *_setup_files(example, examples), example.path)
        if code != 0:
            failures.append(f"{example.name} (with its setup files): exit {code}: {err.strip()}")
    assert not failures, "\n".join(failures)
    assert len(loadable) == LOADABLE_FILES
    assert sorted(set(e.name for e in loadable) - set(loaded_alone)) == sorted(NEED_SETUP)


def test_every_other_example_names_its_unsupported_kind(
    capsys: pytest.CaptureFixture[str],
) -> None:
    others = [e for e in _examples() if not e.loadable and e.path not in OWN_CASES]
    failures: list[str] = []
    for example in others:
        code, err = _simulate(capsys, example.path)
        index, kind = example.first_unsupported()
        expected = f"{example.path}: document {index} ({kind}"
        if code != 2 or expected not in err or kind not in err.partition("):")[2]:
            failures.append(f"{example.name}: exit {code}, stderr {err.strip()!r}")
    assert not failures, "\n".join(failures)
    assert len(others) == UNSUPPORTED_FILES
    kueue_kinds = {k for e in others for g, k in e.kinds if g == "kueue.x-k8s.io"}
    # The Kueue kinds queuescope does not implement, all met and all refused.
    assert {"Topology", "AdmissionCheck", "MultiKueueConfig", "MultiKueueCluster"} <= kueue_kinds
    assert "ProvisioningRequestConfig" in kueue_kinds


def _configuration(tmp_path: Path, framework: str) -> Path:
    """A Configuration file that lists `framework` beside the Job integration."""
    path = tmp_path / "config.yaml"
    path.write_text(
        "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"
        f"integrations:\n  frameworks: [batch/job, {framework}]\n"
    )
    return path


def _refused_without(
    capsys: pytest.CaptureFixture[str], example: Path, kind: str, framework: str
) -> None:
    """Alone, the example names a LocalQueue its integration is off for: exit 2, said."""
    code, err = _simulate(capsys, example)
    assert code == 2
    assert f"{example}: document 0 ({kind} " in err
    assert f"does not list `{framework}` in integrations.frameworks" in err


def _only_workload(capsys: pytest.CaptureFixture[str], *paths: Path) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["simulate", *(str(p) for p in paths), "-o", "json"]) == 0
    objects = json.loads(capsys.readouterr().out)["items"]
    [workload] = [o for o in objects if o["kind"] == "Workload"]
    assert isinstance(workload, dict)
    return workload


def test_kueues_single_pod_loads_where_the_pod_integration_is_on(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    single = POD_EXAMPLES / "kueue-pod.yaml"
    assert {e.path for e in _examples() if ("", "Pod") in e.kinds} == POD_FILES
    _refused_without(capsys, single, "Pod", "pod")
    workload = _only_workload(capsys, _configuration(tmp_path, "pod"), single)
    assert workload["metadata"]["name"].startswith("pod-kueue-sleep-")
    assert workload["metadata"]["ownerReferences"][0]["kind"] == "Pod"
    assert workload["spec"]["queueName"] == "user-queue"
    assert workload["spec"]["podSets"][0]["count"] == 1


def test_kueues_pod_group_is_refused_offline_naming_its_keys(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Pod groups are cluster mode's (docs/simulate.md#pods): said, not skipped."""
    group = POD_EXAMPLES / "kueue-pod-group.yaml"
    code, err = _simulate(capsys, _configuration(tmp_path, "pod"), group)
    assert code == 2
    assert f"{group}: document 0 (Pod " in err
    assert (
        "metadata.labels[kueue.x-k8s.io/pod-group-name]: Forbidden: pod groups are taken in "
        "cluster mode only (docs/simulate.md#pods)"
    ) in err


def test_kueues_statefulset_loads_where_the_statefulset_integration_is_on(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert {e.path for e in _examples() if ("apps", "StatefulSet") in e.kinds} == {STATEFULSET_FILE}
    _refused_without(capsys, STATEFULSET_FILE, "StatefulSet", "statefulset")
    config = _configuration(tmp_path, "statefulset")
    # Alone, its LocalQueue does not exist: a normal state of a cluster, it waits.
    alone = _only_workload(capsys, config, STATEFULSET_FILE)
    assert alone["metadata"]["name"].startswith("statefulset-nginx-statefulset-")
    assert alone["metadata"]["ownerReferences"][0]["kind"] == "StatefulSet"
    assert alone["spec"]["queueName"] == "user-queue"
    assert alone["spec"]["podSets"][0]["name"] == "main"
    assert alone["spec"]["podSets"][0]["count"] == 3
    assert "admission" not in alone.get("status", {})
    # With the admin example that defines `user-queue`, it is admitted.
    queued = _only_workload(capsys, config, USER_QUEUE_SETUP, STATEFULSET_FILE)
    assert queued["metadata"]["name"] == alone["metadata"]["name"]
    assert queued["status"]["admission"]["clusterQueue"] == "cluster-queue"


def test_kueues_jobset_loads_where_the_jobset_integration_is_on(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert {e.path for e in _examples() if ("jobset.x-k8s.io", "JobSet") in e.kinds} == {
        JOBSET_FILE
    }
    _refused_without(capsys, JOBSET_FILE, "JobSet", "jobset.x-k8s.io/jobset")
    config = _configuration(tmp_path, "jobset.x-k8s.io/jobset")
    queued = _only_workload(capsys, config, USER_QUEUE_SETUP, JOBSET_FILE)
    assert queued["metadata"]["name"].startswith("jobset-sleep-job-")
    assert queued["metadata"]["ownerReferences"][0]["kind"] == "JobSet"
    assert [(p["name"], p["count"]) for p in queued["spec"]["podSets"]] == [
        ("workers", 1),
        ("driver", 1),
    ]
    admission = queued["status"]["admission"]
    assert admission["clusterQueue"] == "cluster-queue"
    assert [a["name"] for a in admission["podSetAssignments"]] == ["workers", "driver"]
