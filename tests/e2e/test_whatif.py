"""[EXT] what-if through the real kube-apiserver aggregation layer, with RBAC on both sides
(docs/visibility-api.md#what-if): `kubectl create --raw` POSTs a Job to the LocalQueue's
`whatif` subresource, and `kubectl pending what-if -f` prints the answer.

The fixture's cq-a has 1 CPU and four pending Workloads of 2 CPUs each (never admissible,
so parked): a new 1-CPU Job would be admitted by the next cycle although it is listed
after all four. alice may only `get` pending workloads (no what-if); wendy also has the
`queuescope-localqueue-whatif` role of manifests/rbac/user-roles.yaml in team-a.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from tests.e2e.aggregated import GROUP, VERSIONS, Aggregated
from tests.e2e.harness import User, wait_for
from tests.e2e.test_scenarios_api import OPENAPI_SECONDS, unresolved_refs

REPO: Final = Path(__file__).resolve().parents[2]
PLUGIN_DIR: Final = Path(sys.executable).parent
LABEL: Final = "queuescope.io/e2e=whatif"
WHATIF_ROLE: Final = "queuescope-localqueue-whatif"


def _path(version: str = "v1beta2", namespace: str = "team-a", queue: str = "lq-a") -> str:
    return f"/apis/{GROUP}/{version}/namespaces/{namespace}/localqueues/{queue}/whatif"


def _job(cpu: str, name: str = "train") -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": name,
                "namespace": "team-a",
                "labels": {"kueue.x-k8s.io/queue-name": "lq-a"},
            },
            "spec": {
                "parallelism": 1,
                "suspend": True,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "c",
                                "image": "busybox",
                                "resources": {"requests": {"cpu": cpu}},
                            }
                        ],
                    }
                },
            },
        }
    )


def _whatif_rbac() -> str:
    roles = [
        d
        for d in yaml.safe_load_all((REPO / "manifests" / "rbac" / "user-roles.yaml").read_text())
        if d and d["metadata"]["name"] in (WHATIF_ROLE, "queuescope-pending-workloads-lq-viewer")
    ]
    assert len(roles) == 2, "the user-facing roles must define the what-if role"
    for role in roles:
        role["metadata"].setdefault("labels", {})["queuescope.io/e2e"] = "whatif"
    bindings = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {
                "name": f"wendy-{role}",
                "namespace": "team-a",
                "labels": {"queuescope.io/e2e": "whatif"},
            },
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "wendy"}
            ],
        }
        for role in (WHATIF_ROLE, "queuescope-pending-workloads-lq-viewer")
    ]
    return "\n---\n".join(json.dumps(d) for d in [*roles, *bindings])


@pytest.fixture(scope="module")
def env(aggregated: Aggregated) -> Iterator[tuple[Aggregated, User]]:
    plane = aggregated.plane
    plane.apply(_whatif_rbac())
    wendy = plane.user("wendy", ("team-a-devs",))
    try:
        yield aggregated, wendy
    finally:
        for kind in ("rolebinding", "clusterrole"):
            plane.kubectl("delete", kind, "-A", "-l", LABEL, "--ignore-not-found", check=False)


def _post(
    aggregated: Aggregated, user: User, body: str, path: str, tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    """`kubectl create --raw PATH -f FILE`: kubectl sends the file's bytes as they are."""
    manifest = tmp_path / "body.yaml"
    manifest.write_text(body)
    return aggregated.plane.kubectl(
        "create", "--raw", path, "-f", str(manifest), user=user, check=False
    )


def test_the_discovery_of_kube_apiserver_lists_the_subresource(
    env: tuple[Aggregated, User],
) -> None:
    aggregated, _ = env
    for version in ("v1beta1", "v1beta2"):
        listing = json.loads(
            aggregated.plane.kubectl("get", "--raw", f"/apis/{GROUP}/{version}").stdout
        )
        entries = {r["name"]: r for r in listing["resources"]}
        assert entries["localqueues/whatif"]["verbs"] == ["create"]


def test_kube_apiservers_merged_openapi_has_the_operation(env: tuple[Aggregated, User]) -> None:
    aggregated, _ = env
    paths = [
        f"/apis/{GROUP}/{v}/namespaces/{{namespace}}/localqueues/{{name}}/whatif" for v in VERSIONS
    ]

    def merged() -> dict[str, Any] | None:
        response = aggregated.get("/openapi/v2", headers={"Accept": "application/json"})
        assert response.status == 200, response.body[:300]
        document: dict[str, Any] = response.json()
        return document if all(p in document.get("paths", {}) for p in paths) else None

    document = wait_for(merged, timeout=OPENAPI_SECONDS, what="what-if in /openapi/v2", interval=2)
    for path in paths:
        assert document["paths"][path]["post"]["x-kubernetes-action"] == "post"
    roots = [document["paths"][p] for p in paths]
    assert unresolved_refs(document, roots, "#/definitions/") == []


def test_get_on_pending_workloads_does_not_grant_what_if(
    env: tuple[Aggregated, User], tmp_path: Path
) -> None:
    aggregated, _ = env
    alice = aggregated.alice
    # alice may read the queue ...
    aggregated.plane.kubectl(
        "get", "--raw", _path().replace("whatif", "pendingworkloads"), user=alice
    )
    # ... but not ask what-if, and a queue that does not exist answers the same.
    for queue in ("lq-a", "no-such-queue"):
        result = _post(aggregated, alice, _job("1"), _path(queue=queue), tmp_path)
        assert result.returncode != 0
        assert (
            f'User "alice" cannot create resource "localqueues/whatif" in API group '
            f'"{GROUP}" in the namespace "team-a"' in result.stderr
        ), result.stderr


def test_a_job_that_fits_would_be_admitted_although_listed_last(
    env: tuple[Aggregated, User], tmp_path: Path
) -> None:
    aggregated, wendy = env
    for version in ("v1beta2", "v1beta1"):
        result = _post(aggregated, wendy, _job("1"), _path(version), tmp_path)
        assert result.returncode == 0, result.stderr
        answer: dict[str, Any] = json.loads(result.stdout)
        assert answer["kind"] == "WorkloadWhatIf"
        assert answer["apiVersion"] == f"{GROUP}/{version}"
        assert answer["decision"] == "Admitted", answer
        assert answer["workload"]["clusterQueueName"] == "cq-a"
        assert answer["positionInClusterQueue"] == 4
        assert answer["positionInLocalQueue"] == 2
        assert answer["assignment"]["podSets"][0]["flavors"] == {"cpu": "default"}
    # Nothing was created.
    jobs = aggregated.plane.get_json("jobs.batch", "-n", "team-a")
    assert [j["metadata"]["name"] for j in jobs["items"] if j["metadata"]["name"] == "train"] == []


def test_a_job_too_big_for_the_queue_names_its_blocker(
    env: tuple[Aggregated, User], tmp_path: Path
) -> None:
    aggregated, wendy = env
    result = _post(aggregated, wendy, _job("2"), _path(), tmp_path)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["decision"] == "Pending"
    blockers = answer["pendingReason"]["blockers"]
    assert [(b["kind"], b["resource"], b["amount"]) for b in blockers] == [("Capacity", "cpu", "1")]


def test_an_invalid_job_is_refused_naming_the_field(
    env: tuple[Aggregated, User], tmp_path: Path
) -> None:
    aggregated, wendy = env
    bad = yaml.safe_load(_job("1"))
    bad["spec"]["parallelism"] = "many"
    result = _post(aggregated, wendy, yaml.safe_dump(bad), _path(), tmp_path)
    assert result.returncode != 0
    assert "spec.parallelism" in result.stderr, result.stderr


def _kubectl_pending(
    aggregated: Aggregated, user: User, *args: str
) -> subprocess.CompletedProcess[str]:
    """kubectl passes no flags before a plugin's name: the kubeconfig goes by KUBECONFIG."""
    plane = aggregated.plane
    environment = {
        **os.environ,
        "HOME": str(plane.workdir),
        "KUBECONFIG": str(user.kubeconfig),
        "PATH": f"{PLUGIN_DIR}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    return subprocess.run(
        [str(plane.kubectl_binary), "pending", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
        check=False,
    )


def test_kubectl_pending_what_if(env: tuple[Aggregated, User], tmp_path: Path) -> None:
    aggregated, wendy = env
    job = tmp_path / "job.yaml"
    job.write_text(_job("1"))
    result = _kubectl_pending(aggregated, wendy, "what-if", "-f", str(job))
    assert result.returncode == 0, result.stderr
    assert "Decision:   Admitted: the next scheduling cycle would admit it now" in result.stdout
    assert "Position:   4 of 5 in the ClusterQueue, 2 of 3 in the LocalQueue" in result.stdout
    assert "Flavors:    main x1: cpu=default (1)" in result.stdout
    refused = _kubectl_pending(aggregated, aggregated.alice, "what-if", "-f", str(job))
    assert refused.returncode == 1
    assert "cannot create resource" in refused.stderr, refused.stderr
