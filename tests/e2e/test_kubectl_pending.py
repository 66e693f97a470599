"""`kubectl pending` through a real kube-apiserver: kubectl finds the plugin on PATH, the
plugin reads the user's kubeconfig, lists Kueue's LocalQueues from kube-apiserver and
reads positions, why-pending and estimates through the aggregation layer, where both
kube-apiserver's RBAC and our server's decide."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.aggregated import Aggregated
from tests.e2e.cluster import install_crds
from tests.e2e.harness import User

PLUGIN_DIR = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]
LABEL = "queuescope.io/e2e=kubectl-pending"
# Kueue's LocalQueues as kube-apiserver holds them: the ones the server was started with.
LOCAL_QUEUES = "\n---\n".join(
    json.dumps(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "LocalQueue",
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": {"queuescope.io/e2e": "kubectl-pending"},
            },
            "spec": {"clusterQueue": cq},
        }
    )
    for ns, name, cq in (
        ("team-a", "lq-a", "cq-a"),
        ("team-a", "lq-b", "cq-a"),
        ("team-b", "lq-c", "cq-a"),
        ("team-b", "lq-d", "cq-b"),
    )
)
# What Kueue's batch-user role grants: listing the LocalQueues of one's namespace.
ALICE_LISTS_TEAM_A = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: localqueue-reader
  namespace: team-a
  labels: {queuescope.io/e2e: kubectl-pending}
rules:
- apiGroups: [kueue.x-k8s.io]
  resources: [localqueues]
  verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: alice-lists-localqueues
  namespace: team-a
  labels: {queuescope.io/e2e: kubectl-pending}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: localqueue-reader}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
"""


@pytest.fixture(scope="module")
def kueue(aggregated: Aggregated) -> Iterator[Aggregated]:
    plane = aggregated.plane
    install_crds(plane, aggregated.server.port, aggregated.server.certs.ca_cert.read_bytes())
    plane.apply(LOCAL_QUEUES)  # v1beta1: through our conversion webhook
    plane.apply(ALICE_LISTS_TEAM_A)
    try:
        yield aggregated
    finally:
        for kind in ("localqueues.kueue.x-k8s.io", "rolebinding", "role"):
            plane.kubectl("delete", kind, "-A", "-l", LABEL, "--ignore-not-found", check=False)


def kubectl_pending(env: Aggregated, user: User, *args: str) -> subprocess.CompletedProcess[str]:
    """`kubectl pending ARGS` as `user`: kubectl passes no flags before a plugin's name,
    so the kubeconfig goes by KUBECONFIG, as a user's shell would have it."""
    plane = env.plane
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


def items(result: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert result.returncode == 0, result.stderr
    return list(json.loads(result.stdout)["items"])


def test_a_user_lists_their_namespace(kueue: Aggregated) -> None:
    found = items(kubectl_pending(kueue, kueue.alice, "-n", "team-a", "-o", "json"))
    ours = [r for r in found if r["localQueue"] in ("lq-a", "lq-b")]
    assert [
        (r["name"], r["localQueue"], r["positionInLocalQueue"], r["positionInClusterQueue"])
        for r in ours
    ] == [("a-high", "lq-a", 0, 0), ("a-low", "lq-a", 1, 2)]
    for r in ours:
        assert r["clusterQueue"] == "cq-a"
        kinds = [(b["kind"], b["resource"], b["amount"]) for b in r["whyPending"]["blockers"]]
        assert kinds == [("Capacity", "cpu", "1")]


def test_the_table(kueue: Aggregated) -> None:
    result = kubectl_pending(kueue, kueue.plane.admin, "-n", "team-b", "-o", "wide")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:5] == ["NAME", "LOCALQUEUE", "CLUSTERQUEUE", "POS(LQ)", "POS(CQ)"]
    body = [line.split()[:5] for line in lines[1:] if line.split()[1] in ("lq-c", "lq-d")]
    assert body == [["b-high", "lq-c", "cq-a", "0", "1"], ["b-low", "lq-c", "cq-a", "1", "3"]]


def test_other_namespaces_are_refused(kueue: Aggregated) -> None:
    listing = kubectl_pending(kueue, kueue.alice, "-n", "team-b")
    assert listing.returncode == 1
    assert "cannot list LocalQueues" in listing.stderr, listing.stderr
    named = kubectl_pending(kueue, kueue.alice, "-n", "team-b", "-q", "lq-c")
    assert named.returncode == 1
    assert "forbidden" in named.stderr.lower(), named.stderr
