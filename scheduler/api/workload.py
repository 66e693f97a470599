"""Workload (`kueue.x-k8s.io/v1beta1`, namespaced, docs/scheduling.md#workload)."""

from __future__ import annotations

from typing import Any, ClassVar, Final, Literal

from pydantic import Field

from scheduler.api.admissioncheck import CheckState
from scheduler.api.base import ApiModel, Int32, OmitEmptyModel, Timestamp
from scheduler.api.meta import Condition, KueueV1Beta1Object, condition_is_true
from scheduler.api.pod import PodTemplateSpec
from scheduler.api.quantity import QuantityField
from scheduler.api.taints import Toleration

QUOTA_RESERVED = "QuotaReserved"

WORKLOAD_PRIORITY_CLASS_SOURCE: Final = "kueue.x-k8s.io/workloadpriorityclass"
POD_PRIORITY_CLASS_SOURCE: Final = "scheduling.k8s.io/priorityclass"

PriorityClassSource = Literal[
    "kueue.x-k8s.io/workloadpriorityclass", "scheduling.k8s.io/priorityclass", ""
]


class PodSet(ApiModel):
    name: str = "main"
    count: Int32 = 1
    min_count: Int32 | None = None
    template: PodTemplateSpec
    # Accepted, ignored: topology-aware scheduling is out of scope
    # (docs/scheduling.md#out-of-scope).
    topology_request: dict[str, Any] | None = None


class WorkloadSpec(ApiModel):
    pod_sets: list[PodSet]
    queue_name: str = ""
    priority_class_name: str = ""
    priority: Int32 | None = None  # unset means 0 to the core
    priority_class_source: PriorityClassSource = ""
    active: bool = True
    maximum_execution_time_seconds: Int32 | None = None


class PodSetAssignment(ApiModel):
    name: str
    flavors: dict[str, str] = Field(default_factory=dict)  # resource -> flavor
    resource_usage: dict[str, QuantityField] = Field(default_factory=dict)  # totals
    count: Int32 | None = None
    # Accepted, ignored (TAS out of scope).
    topology_assignment: dict[str, Any] | None = None
    delayed_topology_request: str | None = None


class Admission(ApiModel):
    cluster_queue: str
    pod_set_assignments: list[PodSetAssignment] = Field(default_factory=list)


class ReclaimablePod(ApiModel):
    name: str
    count: Int32


class RequeueState(ApiModel):
    count: Int32 | None = None
    requeue_at: Timestamp | None = None


class PodSetUpdate(ApiModel):
    """What an admission check asks one pod set's pods to get
    (docs/scheduling.md#admission-checks)."""

    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)


class AdmissionCheckState(ApiModel):
    """One admission check of the Workload, as its controller last set it."""

    name: str
    state: CheckState
    last_transition_time: Timestamp
    message: str
    # Set by the controller with Retry: the earliest retry is lastTransitionTime + this.
    requeue_after_seconds: Int32 | None = None
    # Counted by queuescope: how many times the check went through Retry.
    retry_count: Int32 | None = None
    pod_set_updates: list[PodSetUpdate] | None = None


class WorkloadStatus(OmitEmptyModel):
    admission: Admission | None = None
    conditions: list[Condition] = Field(default_factory=list)
    reclaimable_pods: list[ReclaimablePod] = Field(default_factory=list)
    requeue_state: RequeueState | None = None
    # The name's misspelling is Kueue's JSON name.
    accumulated_past_exexcution_time_seconds: Int32 | None = None
    admission_checks: list[AdmissionCheckState] = Field(default_factory=list)
    # Accepted, not read: written by controllers that are out of scope, or recomputed.
    resource_requests: list[dict[str, Any]] | None = None
    scheduling_stats: dict[str, Any] | None = None
    cluster_name: str | None = None
    nominated_cluster_names: list[str] = Field(default_factory=list)
    unhealthy_nodes: list[dict[str, Any]] = Field(default_factory=list)


class Workload(KueueV1Beta1Object):
    namespaced: ClassVar[bool] = True

    kind: Literal["Workload"] = "Workload"
    spec: WorkloadSpec
    status: WorkloadStatus = Field(default_factory=WorkloadStatus)

    @property
    def has_quota_reservation(self) -> bool:
        """QuotaReserved=True: the workload arrives (or stays) holding quota."""
        return condition_is_true(self.status.conditions, QUOTA_RESERVED)

    def pod_set(self, name: str) -> PodSet | None:
        for pod_set in self.spec.pod_sets:
            if pod_set.name == name:
                return pod_set
        return None


__all__ = [
    "POD_PRIORITY_CLASS_SOURCE",
    "QUOTA_RESERVED",
    "WORKLOAD_PRIORITY_CLASS_SOURCE",
    "Admission",
    "AdmissionCheckState",
    "PodSet",
    "PodSetAssignment",
    "PodSetUpdate",
    "PriorityClassSource",
    "ReclaimablePod",
    "RequeueState",
    "Workload",
    "WorkloadSpec",
    "WorkloadStatus",
]
