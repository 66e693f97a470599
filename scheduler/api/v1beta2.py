"""The `kueue.x-k8s.io/v1beta2` wire models (docs/api-versions.md).

A v1beta2 document is decoded strictly with these models first, so that type errors,
unknown fields and enum values are reported with v1beta2's field names and rules.
The object the rest of queuescope reads is the internal form (the v1beta1 models,
which hold everything both versions can say): `scheduler.api.decode` converts the
checked document with `scheduler.api.conversion` and decodes that.

Kinds whose fields are the same in both versions subclass the internal model and only
change `apiVersion`; ClusterQueue and Workload have their own specs.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from scheduler.api.admissioncheck import (
    AdmissionCheckParametersReference,
    AdmissionCheckStatus,
)
from scheduler.api.base import ApiModel, Int32, Timestamp
from scheduler.api.clusterqueue import (
    AdmissionChecksStrategy,
    AdmissionScope,
    ClusterQueuePreemption,
    FlavorFungibilityPreference,
    QueueingStrategy,
    StopPolicy,
)
from scheduler.api.cohort import Cohort
from scheduler.api.flavor import ResourceFlavor
from scheduler.api.localqueue import LocalQueue
from scheduler.api.meta import KubeObject, KueueV1Beta2Object
from scheduler.api.priority import WorkloadPriorityClass
from scheduler.api.quota import FairSharing, ResourceGroup
from scheduler.api.workload import PodSet, WorkloadStatus

V1BETA2 = Literal["kueue.x-k8s.io/v1beta2"]
API_VERSION: V1BETA2 = "kueue.x-k8s.io/v1beta2"


class ResourceFlavorV1Beta2(ResourceFlavor):
    api_version: V1BETA2 = API_VERSION  # type: ignore[assignment]


class WorkloadPriorityClassV1Beta2(WorkloadPriorityClass):
    api_version: V1BETA2 = API_VERSION  # type: ignore[assignment]


class CohortV1Beta2(Cohort):
    api_version: V1BETA2 = API_VERSION  # type: ignore[assignment]


class LocalQueueV1Beta2(LocalQueue):
    api_version: V1BETA2 = API_VERSION  # type: ignore[assignment]


# ---------------------------------------------------------------------------
# ClusterQueue

FungibilityPolicy = Literal["MayStopSearch", "TryNextFlavor"]


class FlavorFungibilityV1Beta2(ApiModel):
    when_can_borrow: FungibilityPolicy = "MayStopSearch"
    when_can_preempt: FungibilityPolicy = "TryNextFlavor"
    preference: FlavorFungibilityPreference | None = None


class ConcurrentAdmissionConstraints(ApiModel):
    last_acceptable_flavor_name: str | None = None


class ConcurrentAdmissionMigration(ApiModel):
    mode: Literal["TryPreferredFlavors", "RetainFirstAdmission"]
    constraints: ConcurrentAdmissionConstraints | None = None


class ConcurrentAdmissionPolicy(ApiModel):
    """Accepted and kept (converted and stored); concurrent admission is not implemented."""

    migration: ConcurrentAdmissionMigration


class ClusterQueueSpecV1Beta2(ApiModel):
    resource_groups: list[ResourceGroup] = Field(default_factory=list)
    cohort_name: str = ""
    queueing_strategy: QueueingStrategy = "BestEffortFIFO"
    namespace_selector: dict[str, Any] | None = None
    flavor_fungibility: FlavorFungibilityV1Beta2 = Field(default_factory=FlavorFungibilityV1Beta2)
    preemption: ClusterQueuePreemption = Field(default_factory=ClusterQueuePreemption)
    admission_checks_strategy: AdmissionChecksStrategy | None = None
    stop_policy: StopPolicy = "None"
    fair_sharing: FairSharing = Field(default_factory=FairSharing)
    admission_scope: AdmissionScope | None = None
    concurrent_admission_policy: ConcurrentAdmissionPolicy | None = None


class ClusterQueueV1Beta2(KueueV1Beta2Object):
    kind: Literal["ClusterQueue"] = "ClusterQueue"
    spec: ClusterQueueSpecV1Beta2 = Field(default_factory=ClusterQueueSpecV1Beta2)
    status: dict[str, Any] | None = None


# ---------------------------------------------------------------------------
# Workload


class PriorityClassRef(ApiModel):
    group: Literal["kueue.x-k8s.io", "scheduling.k8s.io"]
    kind: Literal["WorkloadPriorityClass", "PriorityClass"]
    name: str


class PreemptionGate(ApiModel):
    name: str


class PreemptionGateState(ApiModel):
    name: str
    position: Literal["Closed", "Open"] | None = None
    last_transition_time: Timestamp | None = None


class WorkloadSpecV1Beta2(ApiModel):
    pod_sets: list[PodSet]
    queue_name: str = ""
    priority_class_ref: PriorityClassRef | None = None
    priority: Int32 | None = None
    active: bool = True
    maximum_execution_time_seconds: Int32 | None = None
    preemption_gates: list[PreemptionGate] = Field(default_factory=list)


class WorkloadStatusV1Beta2(WorkloadStatus):
    # v1beta2 fixes the spelling of v1beta1's `accumulatedPastExexcutionTimeSeconds`.
    accumulated_past_exexcution_time_seconds: Int32 | None = Field(
        default=None, alias="accumulatedPastExecutionTimeSeconds"
    )
    preemption_gates: list[PreemptionGateState] = Field(default_factory=list)


class WorkloadV1Beta2(KueueV1Beta2Object):
    namespaced: ClassVar[bool] = True

    kind: Literal["Workload"] = "Workload"
    spec: WorkloadSpecV1Beta2
    status: WorkloadStatusV1Beta2 = Field(default_factory=WorkloadStatusV1Beta2)


# ---------------------------------------------------------------------------
# AdmissionCheck: v1beta2 drops the deprecated `retryDelayMinutes`.


class AdmissionCheckSpecV1Beta2(ApiModel):
    controller_name: str
    parameters: AdmissionCheckParametersReference | None = None


class AdmissionCheckV1Beta2(KueueV1Beta2Object):
    kind: Literal["AdmissionCheck"] = "AdmissionCheck"
    spec: AdmissionCheckSpecV1Beta2 | None = None
    status: AdmissionCheckStatus = Field(default_factory=AdmissionCheckStatus)


V1BETA2_MODELS: dict[str, type[KubeObject]] = {
    "ResourceFlavor": ResourceFlavorV1Beta2,
    "ClusterQueue": ClusterQueueV1Beta2,
    "LocalQueue": LocalQueueV1Beta2,
    "Cohort": CohortV1Beta2,
    "WorkloadPriorityClass": WorkloadPriorityClassV1Beta2,
    "Workload": WorkloadV1Beta2,
    "AdmissionCheck": AdmissionCheckV1Beta2,
}
