"""MultiKueueConfig and MultiKueueCluster (`kueue.x-k8s.io`, cluster-scoped;
docs/scheduling.md#kinds-stored-but-not-acted-on).

The parameters of upstream's MultiKueue admission check (the worker clusters a
ClusterQueue's Workloads are dispatched to) and one worker cluster each. queuescope
has no MultiKueue controller: the CRDs store these objects and the validating webhook
checks them, but nothing in queuescope reads them.

The models are the stored version, `v1beta2`; the `V1Beta1` models are the older
shape (a MultiKueueCluster names its kubeconfig directly in `spec`, a MultiKueueConfig
has no `quotaManagement`), converted by `scheduler.api.conversion.multikueue`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from scheduler.api.base import ApiModel
from scheduler.api.meta import Condition, KueueV1Beta1Object, KueueV1Beta2Object

LocationType = Literal["Secret", "Path"]
QuotaManagement = Literal["Manual", "Automated"]


class MultiKueueConfigSpec(ApiModel):
    clusters: list[str]
    quota_management: QuotaManagement | None = None


class MultiKueueConfig(KueueV1Beta2Object):
    kind: Literal["MultiKueueConfig"] = "MultiKueueConfig"
    spec: MultiKueueConfigSpec | None = None


class MultiKueueConfigSpecV1Beta1(ApiModel):
    clusters: list[str]


class MultiKueueConfigV1Beta1(KueueV1Beta1Object):
    kind: Literal["MultiKueueConfig"] = "MultiKueueConfig"
    spec: MultiKueueConfigSpecV1Beta1 | None = None


class KubeConfig(ApiModel):
    location: str
    location_type: LocationType = "Secret"


class ClusterProfileReference(ApiModel):
    name: str


class ClusterSource(ApiModel):
    kube_config: KubeConfig | None = None
    cluster_profile_ref: ClusterProfileReference | None = None


class MultiKueueClusterSpec(ApiModel):
    cluster_source: ClusterSource


class MultiKueueClusterStatus(ApiModel):
    conditions: list[Condition] = Field(default_factory=list)


class MultiKueueCluster(KueueV1Beta2Object):
    kind: Literal["MultiKueueCluster"] = "MultiKueueCluster"
    spec: MultiKueueClusterSpec | None = None
    status: MultiKueueClusterStatus = Field(default_factory=MultiKueueClusterStatus)


class MultiKueueClusterSpecV1Beta1(ApiModel):
    kube_config: KubeConfig
    cluster_profile_ref: ClusterProfileReference | None = None


class MultiKueueClusterV1Beta1(KueueV1Beta1Object):
    kind: Literal["MultiKueueCluster"] = "MultiKueueCluster"
    spec: MultiKueueClusterSpecV1Beta1 | None = None
    status: MultiKueueClusterStatus = Field(default_factory=MultiKueueClusterStatus)


__all__ = [
    "ClusterProfileReference",
    "ClusterSource",
    "KubeConfig",
    "LocationType",
    "MultiKueueCluster",
    "MultiKueueClusterSpec",
    "MultiKueueClusterSpecV1Beta1",
    "MultiKueueClusterStatus",
    "MultiKueueClusterV1Beta1",
    "MultiKueueConfig",
    "MultiKueueConfigSpec",
    "MultiKueueConfigSpecV1Beta1",
    "MultiKueueConfigV1Beta1",
    "QuotaManagement",
]
