"""kueuectl v0.19.2, Kueue's own command line, against queuescope in cluster mode (issue
12): list, create, stop, resume and delete ClusterQueues, LocalQueues, Workloads and
ResourceFlavors, and `list workload`'s position column, which kueuectl reads from the
visibility API (ours). kueuectl speaks kueue.x-k8s.io/v1beta2 only; the checks read back
with kubectl in both versions.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.aggregated import Aggregated, lq_path
from tests.e2e.cluster import wait_json
from tests.e2e.harness import ControlPlane, wait_for

pytestmark = pytest.mark.realcluster

V2 = "kueue.x-k8s.io/v1beta2"


def run(plane: ControlPlane, kueuectl: Path, *args: str) -> str:
    result = subprocess.run(
        [str(kueuectl), f"--kubeconfig={plane.admin.kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"HOME": str(plane.workdir), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert result.returncode == 0, f"kueuectl {' '.join(args)}: {result.stderr}{result.stdout}"
    return result.stdout


def table(text: str) -> list[dict[str, str]]:
    """A kubectl-style table as rows of {HEADER: cell}, cut at the headers' columns (cells
    may be empty)."""
    lines = [line for line in text.splitlines() if line.strip()]
    header = lines[0]
    starts = [m.start() for m in re.finditer(r"(?:^|(?<=\s\s))\S", header)]
    names = [header[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
    return [
        {
            name: line[a:b].strip() if b is not None else line[a:].strip()
            for name, a, b in zip(names, starts, [*starts[1:], None], strict=True)
        }
        for line in lines[1:]
    ]


def row(rows: list[dict[str, str]], name: str) -> dict[str, str]:
    (found,) = [r for r in rows if r["NAME"] == name]
    return found


def test_list(aggregated: Aggregated, kueuectl: Path) -> None:
    plane = aggregated.plane
    wait_json(
        plane,
        "cq-a's status: 4 pending (the fixture's)",
        lambda cq: (cq.get("status") or {}).get("pendingWorkloads") == 4,
        "clusterqueue",
        "cq-a",
    )
    cq = row(table(run(plane, kueuectl, "list", "clusterqueue")), "cq-a")
    assert (cq["PENDING WORKLOADS"], cq["ADMITTED WORKLOADS"]) == ("4", "0")
    lqs = table(run(plane, kueuectl, "list", "localqueue", "-n", "team-a"))
    assert {(r["NAME"], r["CLUSTERQUEUE"]) for r in lqs} >= {("lq-a", "cq-a"), ("lq-b", "cq-a")}
    assert row(lqs, "lq-a")["PENDING WORKLOADS"] == "2"
    flavors = table(run(plane, kueuectl, "list", "resourceflavor"))
    assert "default" in {r["NAME"] for r in flavors}


def test_list_workload_position_is_the_visibility_apis(
    aggregated: Aggregated, kueuectl: Path
) -> None:
    plane = aggregated.plane
    for namespace, queue in (("team-a", "lq-a"), ("team-b", "lq-c")):
        pending = aggregated.get(lq_path("v1beta2", namespace, queue)).json()["items"]
        expected = {w["metadata"]["name"]: str(w["positionInLocalQueue"]) for w in pending}
        assert len(expected) == 2
        rows = table(run(plane, kueuectl, "list", "workload", "-n", namespace))
        shown = {r["NAME"]: r["POSITION IN QUEUE"] for r in rows if r["LOCALQUEUE"] == queue}
        assert shown == expected
        assert all(r["CLUSTERQUEUE"] == "cq-a" for r in rows if r["LOCALQUEUE"] == queue)


def get(plane: ControlPlane, version: str, kind: str, name: str, ns: str = "") -> Any:
    args = [f"{kind}.{version}.kueue.x-k8s.io", name, *(["-n", ns] if ns else [])]
    return plane.get_json(*args)


def test_create_stop_resume_delete(aggregated: Aggregated, kueuectl: Path) -> None:
    plane = aggregated.plane
    run(plane, kueuectl, "create", "resourceflavor", "kctl-rf", "--node-labels", "pool=kctl")
    run(
        plane,
        kueuectl,
        "create",
        "clusterqueue",
        "kctl-cq",
        "--cohort",
        "kctl-cohort",
        "--nominal-quota",
        "kctl-rf:cpu=2",
    )
    run(plane, kueuectl, "create", "localqueue", "kctl-lq", "-c", "kctl-cq", "-n", "team-a")
    assert get(plane, "v1beta2", "resourceflavors", "kctl-rf")["spec"]["nodeLabels"] == {
        "pool": "kctl"
    }
    cq2 = get(plane, "v1beta2", "clusterqueues", "kctl-cq")["spec"]
    cq1 = get(plane, "v1beta1", "clusterqueues", "kctl-cq")["spec"]
    assert cq2["cohortName"] == cq1["cohort"] == "kctl-cohort"
    quota = cq2["resourceGroups"][0]["flavors"][0]
    assert quota["name"] == "kctl-rf"
    assert quota["resources"] == [{"name": "cpu", "nominalQuota": "2"}]
    assert get(plane, "v1beta1", "localqueues", "kctl-lq", "team-a")["spec"]["clusterQueue"] == (
        "kctl-cq"
    )
    listed = row(table(run(plane, kueuectl, "list", "clusterqueue")), "kctl-cq")
    assert listed["COHORT"] == "kctl-cohort"

    for kind, extra in (("clusterqueue", []), ("localqueue", ["-n", "team-a"])):
        name = f"kctl-{'cq' if kind == 'clusterqueue' else 'lq'}"
        plural = f"{kind}s"
        run(plane, kueuectl, "stop", kind, name, *extra)
        spec = get(plane, "v1beta2", plural, name, *extra[1:])["spec"]
        assert spec["stopPolicy"] == "HoldAndDrain"
        run(plane, kueuectl, "resume", kind, name, *extra)
        spec = get(plane, "v1beta2", plural, name, *extra[1:])["spec"]
        assert spec.get("stopPolicy", "None") == "None"

    workload = {
        "apiVersion": V2,
        "kind": "Workload",
        "metadata": {"name": "kctl-wl", "namespace": "team-a"},
        "spec": {
            "queueName": "kctl-lq",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]
                        }
                    },
                }
            ],
        },
    }
    plane.apply(json.dumps(workload))
    wait_json(
        plane,
        "kctl-wl admitted by queuescope",
        lambda wl: (wl.get("status") or {}).get("admission") is not None,
        "workload",
        "kctl-wl",
        "-n",
        "team-a",
    )
    rows = table(
        run(plane, kueuectl, "list", "workload", "-n", "team-a", "--localqueue", "kctl-lq")
    )
    assert row(rows, "kctl-wl")["STATUS"] == "ADMITTED"
    run(plane, kueuectl, "stop", "workload", "kctl-wl", "-n", "team-a")
    assert get(plane, "v1beta1", "workloads", "kctl-wl", "team-a")["spec"]["active"] is False
    wait_json(
        plane,
        "kctl-wl evicted after kueuectl stop",
        lambda wl: (wl.get("status") or {}).get("admission") is None,
        "workload",
        "kctl-wl",
        "-n",
        "team-a",
    )
    run(plane, kueuectl, "resume", "workload", "kctl-wl", "-n", "team-a")
    assert get(plane, "v1beta2", "workloads", "kctl-wl", "team-a")["spec"]["active"] is True
    wait_json(
        plane,
        "kctl-wl admitted again after kueuectl resume",
        lambda wl: (wl.get("status") or {}).get("admission") is not None,
        "workload",
        "kctl-wl",
        "-n",
        "team-a",
    )
    run(plane, kueuectl, "delete", "workload", "kctl-wl", "-n", "team-a", "--yes")
    wait_for(
        lambda: (
            True
            if plane.kubectl("get", "workload", "kctl-wl", "-n", "team-a", check=False).returncode
            else None
        ),
        timeout=30,
        what="kctl-wl deleted",
    )


def test_v1beta1_clients_are_warned_and_explain_documents_every_field(
    aggregated: Aggregated,
) -> None:
    plane = aggregated.plane
    old = plane.kubectl("get", "clusterqueues.v1beta1.kueue.x-k8s.io", "cq-a", "-o", "json")
    assert "This version is deprecated. Use v1beta2 instead." in old.stderr
    assert json.loads(old.stdout)["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    new = plane.kubectl("get", "clusterqueues", "cq-a", "-o", "json")
    assert "deprecated" not in new.stderr
    assert json.loads(new.stdout)["apiVersion"] == V2
    explained = plane.kubectl("explain", "clusterqueue.spec.resourceGroups").stdout
    assert "VERSION:    v1beta2" in explained
    fields = re.findall(r"^  (\w+)\t", explained, re.MULTILINE)
    assert fields == ["coveredResources", "flavors"]
    for path in (
        "clusterqueue.spec.resourceGroups",
        "clusterqueue.spec.resourceGroups.flavors",
        "clusterqueue.spec.resourceGroups.flavors.resources",
    ):
        text = plane.kubectl("explain", path).stdout
        blocks = re.split(r"^  (?=\w+\t)", text.split("FIELDS:", 1)[1], flags=re.MULTILINE)[1:]
        assert blocks, path
        for block in blocks:
            name, _, description = block.partition("\n")
            assert description.strip(), f"{path}.{name.split()[0]} has no description"


def test_a_failing_conversion_is_refused_and_stores_nothing(aggregated: Aggregated) -> None:
    """A v1beta1 write our webhook cannot convert (both admissionChecks and
    admissionChecksStrategy: v1beta2 has only the latter) is refused by kube-apiserver with
    our reason, and the stored object stays exactly as it was."""
    plane = aggregated.plane
    before = plane.get_json("clusterqueues.v1beta2.kueue.x-k8s.io", "cq-b")
    broken = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq-b"},
        "spec": {
            "admissionChecks": ["check-a"],
            "admissionChecksStrategy": {"admissionChecks": [{"name": "check-b"}]},
        },
    }
    result = plane.kubectl(
        "patch",
        "clusterqueues.v1beta1.kueue.x-k8s.io",
        "cq-b",
        "--type=merge",
        "-p",
        json.dumps({"spec": broken["spec"]}),
        check=False,
    )
    assert result.returncode != 0
    assert "conversion webhook" in result.stderr, result.stderr
    assert "Either AdmissionChecks or AdmissionCheckStrategy can be set" in result.stderr
    after = plane.get_json("clusterqueues.v1beta2.kueue.x-k8s.io", "cq-b")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["spec"] == before["spec"]
