"""REST paths of the watched resources, and keys and resourceVersions of raw objects."""

from __future__ import annotations

from scheduler.runtime.kube.resources import (
    CLUSTER_QUEUES,
    JOBS,
    LEASES,
    LOCAL_QUEUES,
    NAMESPACES,
    WATCHED,
    WORKLOADS,
    object_key,
    resource_version,
)


def test_core_group_paths() -> None:
    assert NAMESPACES.api_version == "v1"
    assert NAMESPACES.collection() == "/api/v1/namespaces"
    assert NAMESPACES.item("team") == "/api/v1/namespaces/team"
    # A namespace argument means nothing for a cluster-scoped resource.
    assert NAMESPACES.collection("other") == "/api/v1/namespaces"
    assert NAMESPACES.item("team", "other") == "/api/v1/namespaces/team"


def test_named_group_paths() -> None:
    assert WORKLOADS.api_version == "kueue.x-k8s.io/v1beta1"
    assert WORKLOADS.collection() == "/apis/kueue.x-k8s.io/v1beta1/workloads"
    assert WORKLOADS.collection("team") == "/apis/kueue.x-k8s.io/v1beta1/namespaces/team/workloads"
    assert (
        WORKLOADS.item("w1", "team", "status")
        == "/apis/kueue.x-k8s.io/v1beta1/namespaces/team/workloads/w1/status"
    )
    assert CLUSTER_QUEUES.item("cq", subresource="status") == (
        "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/cq/status"
    )
    assert JOBS.item("j", "team") == "/apis/batch/v1/namespaces/team/jobs/j"
    assert LEASES.item("lead", "sys") == "/apis/coordination.k8s.io/v1/namespaces/sys/leases/lead"


def test_initial_sync_order_puts_references_first() -> None:
    kinds = [r.kind for r in WATCHED]
    assert kinds.index("Namespace") < kinds.index("LocalQueue")
    assert kinds.index("ResourceFlavor") < kinds.index("ClusterQueue")
    assert kinds.index("Cohort") < kinds.index("ClusterQueue")
    assert kinds.index("ClusterQueue") < kinds.index("LocalQueue") < kinds.index("Workload")
    assert kinds.index("WorkloadPriorityClass") < kinds.index("Workload")
    assert kinds.index("PriorityClass") < kinds.index("Job")
    assert LEASES not in WATCHED
    assert LOCAL_QUEUES.namespaced and not CLUSTER_QUEUES.namespaced


def test_object_key_and_resource_version() -> None:
    assert object_key({"metadata": {"name": "w", "namespace": "team"}}) == "team/w"
    assert object_key({"metadata": {"name": "cq"}}) == "cq"
    assert object_key({"metadata": {"name": "cq", "namespace": ""}}) == "cq"
    assert object_key({"metadata": "broken"}) == ""
    assert object_key({}) == ""
    assert resource_version({"metadata": {"resourceVersion": "42"}}) == "42"
    assert resource_version({"metadata": {}}) == ""
    assert resource_version({}) == ""
