"""Done means (issue 12): every ResourceFlavor, ClusterQueue, LocalQueue, Cohort,
WorkloadPriorityClass and batch/v1 Job document of Kueue v0.19.2's example manifests
applies unchanged to the real kube-apiserver with queuescope's CRDs installed.

Each document is created with server-side dry run and strict field validation: the API
server runs its whole admission and validation chain, and a field our schema lacks is an
error rather than silently pruned. The examples are kueue.x-k8s.io/v1beta2, the stored
version, so no conversion is involved. The documents are counted, so an example that
disappears (or a kind that stops being selected) fails the test too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.cluster import install, subset
from tests.e2e.harness import ControlPlane

pytestmark = pytest.mark.realcluster

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO.parent / "shared" / "kueue-examples" / "v0.19.2"
KUEUE_KINDS = {"ResourceFlavor", "ClusterQueue", "LocalQueue", "Cohort", "WorkloadPriorityClass"}
# Counted in the v0.19.2 examples: 25 ResourceFlavors, 20 ClusterQueues, 19 LocalQueues,
# 5 Cohorts, 3 WorkloadPriorityClasses, 20 batch/v1 Jobs.
EXPECTED = {
    "ResourceFlavor": 25,
    "ClusterQueue": 20,
    "LocalQueue": 19,
    "Cohort": 5,
    "WorkloadPriorityClass": 3,
    "Job": 20,
}


def selected(doc: Any) -> bool:
    if not isinstance(doc, dict):
        return False
    api_version, kind = doc.get("apiVersion", ""), doc.get("kind")
    if api_version.startswith("kueue.x-k8s.io/"):
        return kind in KUEUE_KINDS
    return (api_version, kind) == ("batch/v1", "Job")


def example_documents() -> list[tuple[str, int, dict[str, Any]]]:
    found: list[tuple[str, int, dict[str, Any]]] = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        for index, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if selected(doc):
                found.append((str(path.relative_to(EXAMPLES)), index, doc))
    return found


def test_every_example_of_our_kinds_applies_unchanged(control_plane: ControlPlane) -> None:
    if not EXAMPLES.is_dir():
        pytest.fail(f"Kueue's examples are missing: {EXAMPLES}")
    plane = control_plane
    install(plane)
    documents = example_documents()
    counts: dict[str, int] = {}
    for _, _, doc in documents:
        counts[doc["kind"]] = counts.get(doc["kind"], 0) + 1
    assert counts == EXPECTED
    namespaces = {
        doc["metadata"].get("namespace", "default")
        for _, _, doc in documents
        if doc["kind"] in ("LocalQueue", "Job")
    }
    plane.apply(
        "\n---\n".join(
            json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            for ns in sorted(namespaces)
        )
    )
    refused: list[str] = []
    for source, index, doc in documents:
        result = plane.kubectl(
            "create",
            "--dry-run=server",
            "--validate=strict",
            "-o",
            "json",
            "-f",
            "-",
            input=json.dumps(doc),
            check=False,
        )
        if result.returncode != 0:
            refused.append(f"{source}: document {index} ({doc['kind']}): {result.stderr.strip()}")
            continue
        created = json.loads(result.stdout)
        # Unchanged: every field given is kept as given (defaults may only add fields).
        given = {k: v for k, v in doc.items() if k != "metadata"}
        assert subset(given, created), (source, index, created)
    assert refused == [], "\n".join(refused)
