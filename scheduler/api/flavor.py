"""ResourceFlavor (`kueue.x-k8s.io/v1beta1`, cluster-scoped, docs/scheduling.md#resourceflavor)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from scheduler.api.base import ApiModel
from scheduler.api.meta import KueueV1Beta1Object
from scheduler.api.taints import Taint, Toleration


class ResourceFlavorSpec(ApiModel):
    node_labels: dict[str, str] = Field(default_factory=dict)
    node_taints: list[Taint] = Field(default_factory=list)
    tolerations: list[Toleration] = Field(default_factory=list)
    # Accepted, ignored: topology-aware scheduling is out of scope
    # (docs/scheduling.md#out-of-scope).
    topology_name: str | None = None


class ResourceFlavor(KueueV1Beta1Object):
    kind: Literal["ResourceFlavor"] = "ResourceFlavor"
    # Kueue's CRD defaults an omitted spec to {}.
    spec: ResourceFlavorSpec = Field(default_factory=ResourceFlavorSpec)
