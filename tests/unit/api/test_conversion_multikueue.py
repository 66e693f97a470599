"""MultiKueueCluster and MultiKueueConfig between v1beta1 and v1beta2, and the kinds that
are the same in both (docs/api-versions.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scheduler.api.conversion import STASH_ANNOTATION, convert_document
from scheduler.api.versions import KUEUE_V1BETA1 as V1
from scheduler.api.versions import KUEUE_V1BETA2 as V2


def doc(api_version: str, kind: str, **parts: Any) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}, **parts}


KUBE_CONFIG = {"location": "worker1-secret", "locationType": "Secret"}


def test_cluster_kubeconfig_moves_under_cluster_source() -> None:
    old = doc(V1, "MultiKueueCluster", spec={"kubeConfig": KUBE_CONFIG})
    up = convert_document(old, V2)
    assert up == doc(V2, "MultiKueueCluster", spec={"clusterSource": {"kubeConfig": KUBE_CONFIG}})
    assert convert_document(up, V1) == old


def test_cluster_profile_without_kubeconfig_reads_as_an_empty_location_in_v1beta1() -> None:
    new = doc(V2, "MultiKueueCluster", spec={"clusterSource": {"clusterProfileRef": {"name": "p"}}})
    down = convert_document(new, V1)
    assert down["spec"] == {"kubeConfig": {"location": ""}, "clusterProfileRef": {"name": "p"}}
    # An empty location means no kubeconfig going back up: the round trip is exact.
    assert convert_document(down, V2) == new


def test_an_empty_v1beta1_location_comes_back_as_written() -> None:
    empty = {"location": "", "locationType": "Path"}
    old = doc(
        V1, "MultiKueueCluster", spec={"kubeConfig": empty, "clusterProfileRef": {"name": "p"}}
    )
    up = convert_document(old, V2)
    assert up["spec"] == {"clusterSource": {"clusterProfileRef": {"name": "p"}}}
    assert STASH_ANNOTATION in up["metadata"]["annotations"]
    assert convert_document(up, V1) == old


def test_cluster_status_is_the_same_in_both() -> None:
    status = {"conditions": [{"type": "Active", "status": "True", "reason": "Active"}]}
    old = doc(V1, "MultiKueueCluster", spec={"kubeConfig": KUBE_CONFIG}, status=status)
    assert convert_document(old, V2)["status"] == status


def test_config_quota_management_is_kept_in_the_annotation_in_v1beta1() -> None:
    new = doc(V2, "MultiKueueConfig", spec={"clusters": ["a", "b"], "quotaManagement": "Manual"})
    down = convert_document(new, V1)
    assert down["spec"] == {"clusters": ["a", "b"]}
    kept = json.loads(down["metadata"]["annotations"][STASH_ANNOTATION])
    assert kept["fields"] == [{"path": ["spec", "quotaManagement"], "value": "Manual"}]
    assert convert_document(down, V2) == new
    # Output meant to be read drops it.
    assert "annotations" not in convert_document(new, V1, keep=False)["metadata"]


@pytest.mark.parametrize(
    ("kind", "spec"),
    [
        ("Topology", {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}),
        ("ProvisioningRequestConfig", {"provisioningClassName": "c", "parameters": {"a": "b"}}),
    ],
)
def test_kinds_with_the_same_fields_only_change_api_version(kind: str, spec: Any) -> None:
    assert convert_document(doc(V1, kind, spec=spec), V2) == doc(V2, kind, spec=spec)
    assert convert_document(doc(V2, kind, spec=spec), V1) == doc(V1, kind, spec=spec)
