"""Topology (`kueue.x-k8s.io`, cluster-scoped; docs/scheduling.md#kinds-stored-but-not-acted-on).

The node-label hierarchy of topology-aware scheduling, which queuescope does not
implement: the CRD stores Topology objects and the validating webhook checks them, but
nothing in queuescope reads them. Both versions have the same fields; the model is the
stored version, `v1beta2`.
"""

from __future__ import annotations

from typing import Literal

from scheduler.api.base import ApiModel
from scheduler.api.meta import KueueV1Beta2Object


class TopologyLevel(ApiModel):
    node_label: str


class TopologySpec(ApiModel):
    levels: list[TopologyLevel]


class Topology(KueueV1Beta2Object):
    kind: Literal["Topology"] = "Topology"
    spec: TopologySpec | None = None


class TopologyV1Beta1(Topology):
    api_version: Literal["kueue.x-k8s.io/v1beta1"] = "kueue.x-k8s.io/v1beta1"  # type: ignore[assignment]


__all__ = ["Topology", "TopologyLevel", "TopologySpec", "TopologyV1Beta1"]
