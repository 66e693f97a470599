"""Every manifest parses, names itself, and states its namespace; kustomizations are sound."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.manifests.support import MANIFESTS, documents, yaml_files

CLUSTER_SCOPED = frozenset(
    {
        "Namespace",
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
        "APIService",
        "ClusterQueue",
        "ResourceFlavor",
        "Cohort",
        "WorkloadPriorityClass",
        "PriorityClass",
    }
)
KUSTOMIZE_KINDS = frozenset({"Kustomization", "Component"})
OWN_FOLDERS = ("crds", "rbac", "deploy", "apiservice", "default")


def _kustomizations() -> list[Path]:
    return sorted(MANIFESTS.rglob("kustomization.yaml"))


@pytest.mark.parametrize("path", yaml_files(), ids=lambda p: str(p.relative_to(MANIFESTS)))
def test_yaml_parses_into_named_objects(path: Path) -> None:
    docs = documents(path)
    assert docs, "empty file"
    for doc in docs:
        assert isinstance(doc, dict)
        assert doc.get("apiVersion") and doc.get("kind"), doc
        if doc["kind"] in KUSTOMIZE_KINDS:
            continue
        metadata = doc.get("metadata") or {}
        assert metadata.get("name"), doc
        if doc["kind"] == "Deployment" and path.parent.name == "ha":
            continue  # a patch: names its target only
        if doc["kind"] in CLUSTER_SCOPED or path.parent.name == "samples":
            continue
        # The kustomize `namespace:` transformer is never used, so every namespaced object
        # says where it lives (cluster.md §5).
        assert metadata.get("namespace"), f"{doc['kind']} {metadata['name']}: no namespace"


def test_the_folders_exist() -> None:
    for folder in (*OWN_FOLDERS, "samples"):
        assert (MANIFESTS / folder).is_dir(), folder
    for folder in OWN_FOLDERS:
        assert (MANIFESTS / folder / "kustomization.yaml").is_file(), folder


@pytest.mark.parametrize("path", _kustomizations(), ids=lambda p: str(p.relative_to(MANIFESTS)))
def test_kustomization_is_sound(path: Path) -> None:
    (kustomization,) = documents(path)
    assert kustomization["kind"] in KUSTOMIZE_KINDS
    assert "namespace" not in kustomization  # it would move the kube-system RoleBinding
    for entry in [*kustomization.get("resources", []), *kustomization.get("components", [])]:
        assert (path.parent / entry).exists(), entry
    for patch in kustomization.get("patches", []):
        if path.parent.name == "default" and patch["path"].startswith("certs/"):
            continue  # written by `queuescope certs generate`
        assert (path.parent / patch["path"]).is_file(), patch


def test_generated_certificates_are_ignored_by_git() -> None:
    assert "/certs/" in (MANIFESTS / "default" / ".gitignore").read_text().split()
