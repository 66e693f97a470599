"""Every manifest parses, names itself, and states its namespace; kustomizations are sound."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.unit.manifests.support import MANIFESTS, REPO, documents, yaml_files

CLUSTER_SCOPED = frozenset(
    {
        "Namespace",
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
        "APIService",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "ClusterQueue",
        "ResourceFlavor",
        "Cohort",
        "WorkloadPriorityClass",
        "PriorityClass",
        "FlowSchema",
        "PriorityLevelConfiguration",
    }
)
KUSTOMIZE_KINDS = frozenset({"Kustomization", "Component"})
# A file that is not an object: Kueue's process configuration has no metadata.
KUEUE_CONFIGURATION = ("config.kueue.x-k8s.io/v1beta2", "Configuration")
BASES = ("crds", "rbac", "deploy", "apiservice", "webhooks")
COMPONENTS = ("ha", "apf", "self-managed-certs", "configuration")
OVERLAYS = ("default", "app-only", "e2e")
OWN_FOLDERS = (
    *BASES,
    *(f"components/{c}" for c in COMPONENTS),
    *(f"overlays/{o}" for o in OVERLAYS),
)


def _kustomizations() -> list[Path]:
    return sorted(MANIFESTS.rglob("kustomization.yaml"))


@pytest.mark.parametrize("path", yaml_files(), ids=lambda p: str(p.relative_to(MANIFESTS)))
def test_yaml_parses_into_named_objects(path: Path) -> None:
    docs = documents(path)
    assert docs, "empty file"
    for doc in docs:
        assert isinstance(doc, dict)
        assert doc.get("apiVersion") and doc.get("kind"), doc
        if (
            doc["kind"] in KUSTOMIZE_KINDS
            or (doc["apiVersion"], doc["kind"]) == KUEUE_CONFIGURATION
        ):
            continue
        metadata = doc.get("metadata") or {}
        assert metadata.get("name"), doc
        if doc["kind"] in CLUSTER_SCOPED or path.parent.name == "samples":
            continue
        # The kustomize `namespace:` transformer is never used, so every namespaced object
        # says where it lives (docs/cluster.md#manifests).
        assert metadata.get("namespace"), f"{doc['kind']} {metadata['name']}: no namespace"


def _subfolders(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if p.is_dir()}


def test_the_folders_are_exactly_those_of_the_layout() -> None:
    """docs/cluster.md#manifests: the bases (docs/product.md's and the admission
    webhooks), four components, three overlays."""
    assert _subfolders(MANIFESTS) == {*BASES, "samples", "components", "overlays"}
    assert _subfolders(MANIFESTS / "components") == set(COMPONENTS)
    # overlays/default/certs/ exists once `make deploy` or `certs generate` has run.
    assert _subfolders(MANIFESTS / "overlays") == set(OVERLAYS)
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
        assert "path" in patch or "patch" in patch, patch
        if "path" not in patch:
            continue  # inline
        if path.parent == MANIFESTS / "overlays" / "default" and patch["path"].startswith("certs/"):
            continue  # written by `queuescope certs generate`
        assert (path.parent / patch["path"]).is_file(), patch


@pytest.mark.parametrize("name", ["ca.key", "tls.key", "apiservice-cabundle.yaml"])
def test_generated_certificates_are_ignored_by_git(name: str) -> None:
    target = MANIFESTS / "overlays" / "default" / "certs" / name
    result = subprocess.run(
        ["git", "check-ignore", "--no-index", "--quiet", str(target)], cwd=REPO, check=False
    )
    assert result.returncode == 0, f"{target} is not git-ignored"
