"""ProvisioningRequestConfig (`kueue.x-k8s.io`, cluster-scoped;
docs/scheduling.md#kinds-stored-but-not-acted-on).

The parameters object of upstream's ProvisioningRequest admission check
(`AdmissionCheck.spec.parameters`). queuescope has no ProvisioningRequest controller:
the CRD stores these objects and the validating webhook checks them, but nothing in
queuescope reads them. Both versions have the same fields; the model is the stored
version, `v1beta2`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from scheduler.api.base import ApiModel, Int32
from scheduler.api.meta import KueueV1Beta2Object

PodSetMergePolicy = Literal["IdenticalPodTemplates", "IdenticalWorkloadSchedulingRequirements"]


class ProvisioningRequestRetryStrategy(ApiModel):
    backoff_limit_count: Int32 = 3
    backoff_base_seconds: Int32 = 60
    backoff_max_seconds: Int32 = 1800


class ProvisioningRequestPodSetUpdatesNodeSelector(ApiModel):
    key: str
    value_from_provisioning_class_detail: str


class ProvisioningRequestPodSetUpdates(ApiModel):
    node_selector: list[ProvisioningRequestPodSetUpdatesNodeSelector] = Field(default_factory=list)


class ProvisioningRequestConfigSpec(ApiModel):
    provisioning_class_name: str
    parameters: dict[str, str] = Field(default_factory=dict)
    managed_resources: list[str] = Field(default_factory=list)
    retry_strategy: ProvisioningRequestRetryStrategy = Field(
        default_factory=ProvisioningRequestRetryStrategy
    )
    pod_set_updates: ProvisioningRequestPodSetUpdates | None = None
    pod_set_merge_policy: PodSetMergePolicy | None = None


class ProvisioningRequestConfig(KueueV1Beta2Object):
    kind: Literal["ProvisioningRequestConfig"] = "ProvisioningRequestConfig"
    spec: ProvisioningRequestConfigSpec | None = None


class ProvisioningRequestConfigV1Beta1(ProvisioningRequestConfig):
    api_version: Literal["kueue.x-k8s.io/v1beta1"] = "kueue.x-k8s.io/v1beta1"  # type: ignore[assignment]


__all__ = [
    "PodSetMergePolicy",
    "ProvisioningRequestConfig",
    "ProvisioningRequestConfigSpec",
    "ProvisioningRequestConfigV1Beta1",
    "ProvisioningRequestPodSetUpdates",
    "ProvisioningRequestPodSetUpdatesNodeSelector",
    "ProvisioningRequestRetryStrategy",
]
