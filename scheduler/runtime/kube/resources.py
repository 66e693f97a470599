"""The API resources the runtime lists and watches, and their REST paths."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class Resource:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def _prefix(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def collection(self, namespace: str | None = None) -> str:
        """The list/watch path (all namespaces unless `namespace`)."""
        if self.namespaced and namespace:
            return f"{self._prefix()}/namespaces/{namespace}/{self.plural}"
        return f"{self._prefix()}/{self.plural}"

    def item(self, name: str, namespace: str | None = None, subresource: str = "") -> str:
        path = f"{self.collection(namespace if self.namespaced else None)}/{name}"
        return f"{path}/{subresource}" if subresource else path


KUEUE = "kueue.x-k8s.io"
# The version of Kueue's resources that cluster mode lists, watches and writes. Objects
# of either version decode (scheduler.api.decode converts v1beta2 to the internal form);
# switching the stored version of the CRDs is one change here (docs/api-versions.md).
KUEUE_VERSION = "v1beta1"
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
PRIORITY_CLASSES = Resource(
    "scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False
)
RESOURCE_FLAVORS = Resource(KUEUE, KUEUE_VERSION, "resourceflavors", "ResourceFlavor", False)
COHORTS = Resource(KUEUE, KUEUE_VERSION, "cohorts", "Cohort", False)
# Read only: their controllers own them (docs/scheduling.md#admission-checks).
ADMISSION_CHECKS = Resource(KUEUE, KUEUE_VERSION, "admissionchecks", "AdmissionCheck", False)
CLUSTER_QUEUES = Resource(KUEUE, KUEUE_VERSION, "clusterqueues", "ClusterQueue", False)
LOCAL_QUEUES = Resource(KUEUE, KUEUE_VERSION, "localqueues", "LocalQueue", True)
WORKLOAD_PRIORITY_CLASSES = Resource(
    KUEUE, KUEUE_VERSION, "workloadpriorityclasses", "WorkloadPriorityClass", False
)
WORKLOADS = Resource(KUEUE, KUEUE_VERSION, "workloads", "Workload", True)
JOBS = Resource("batch", "v1", "jobs", "Job", True)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", True)
EVENTS = Resource("events.k8s.io", "v1", "events", "Event", True)  # written, never watched
# Watched only with the `pod` integration on, and only those its webhook labelled managed.
PODS = Resource("", "v1", "pods", "Pod", True)
# Watched only with the `statefulset` integration on, and only those naming a LocalQueue
# (docs/cluster.md#statefulsets).
STATEFULSETS = Resource("apps", "v1", "statefulsets", "StatefulSet", True)
# Watched only with the `jobset.x-k8s.io/jobset` integration on, and only those naming a
# LocalQueue (docs/cluster.md#jobsets).
JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", True)
# Kinds whose CRD a cluster may lack: until it is installed, their list is empty rather
# than a failure that would hold the initial sync (docs/cluster.md#jobsets).
OPTIONAL_KINDS: Final = frozenset({JOBSETS.kind})

# Dependency order for the initial sync: what a later kind refers to comes first, so
# the core never sees a Workload before its queues and priority classes.
WATCHED: tuple[Resource, ...] = (
    NAMESPACES,
    PRIORITY_CLASSES,
    WORKLOAD_PRIORITY_CLASSES,
    RESOURCE_FLAVORS,
    ADMISSION_CHECKS,
    COHORTS,
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    WORKLOADS,
    JOBS,
)


# Kind -> the label selector of its list and watch, for kinds of which only some objects
# are ours (docs/cluster.md#plain-pods).
WATCH_SELECTORS: Final[Mapping[str, str]] = {
    PODS.kind: "kueue.x-k8s.io/managed=true",
    STATEFULSETS.kind: "kueue.x-k8s.io/queue-name",
    JOBSETS.kind: "kueue.x-k8s.io/queue-name",
}


def object_key(obj: dict[str, object]) -> str:
    """`namespace/name` or `name`, from an object's metadata."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return ""
    name = str(meta.get("name", ""))
    namespace = meta.get("namespace")
    return f"{namespace}/{name}" if namespace else name


def resource_version(obj: dict[str, object]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("resourceVersion", "")) if isinstance(meta, dict) else ""
