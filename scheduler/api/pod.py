"""Pod templates (core/v1 PodTemplateSpec), modelled as far as the scheduler reads them.

PodSpec and Container are large, evolving Kubernetes core types: a pod template that
the cluster accepts must not be rejected here just because it uses a field this model
does not name (probes, volumes, securityContext, ...). Strict unknown-field checks
apply to Kueue's own schemas, so these two models use `extra="allow"`: other fields
are kept verbatim (and echoed back) without validation. Everything that affects
scheduling (resources, selectors, affinity, tolerations) is modelled and typed.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from scheduler.api.base import OmitEmptyModel
from scheduler.api.meta import TemplateMeta
from scheduler.api.quantity import QuantityField
from scheduler.api.taints import Toleration

ResourceList = dict[str, QuantityField]
"""Resource name -> quantity, as in `resources.requests`."""


class ResourceRequirements(OmitEmptyModel):
    requests: dict[str, QuantityField] = Field(default_factory=dict)
    limits: dict[str, QuantityField] = Field(default_factory=dict)
    claims: list[dict[str, Any]] = Field(default_factory=list)


class Container(OmitEmptyModel):
    model_config = ConfigDict(extra="allow")

    name: str
    image: str | None = None
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    # "Always" on an init container makes it a sidecar (restartable init container).
    restart_policy: str | None = None

    @property
    def is_sidecar(self) -> bool:
        return self.restart_policy == "Always"


class PodSpec(OmitEmptyModel):
    model_config = ConfigDict(extra="allow")

    containers: list[Container]
    init_containers: list[Container] = Field(default_factory=list)
    overhead: dict[str, QuantityField] = Field(default_factory=dict)
    node_selector: dict[str, str] = Field(default_factory=dict)
    # Kept raw: the core evaluates node affinity on plain dicts (camelCase).
    affinity: dict[str, Any] | None = None
    tolerations: list[Toleration] = Field(default_factory=list)
    priority_class_name: str = ""
    restart_policy: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """camelCase plain dict (unmodelled fields included), for the selector functions."""
        return super().to_dict()


class PodTemplateSpec(OmitEmptyModel):
    metadata: TemplateMeta = Field(default_factory=TemplateMeta)
    spec: PodSpec


__all__ = [
    "Container",
    "PodSpec",
    "PodTemplateSpec",
    "ResourceList",
    "ResourceRequirements",
]
