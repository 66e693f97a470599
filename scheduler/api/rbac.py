"""RBAC objects (`rbac.authorization.k8s.io/v1`).

The simulator ignores them; `serve --embedded` evaluates them (docs/cluster.md#embedded-mode).
They are modelled fully enough to be evaluated and validated loosely.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final, Literal

from pydantic import Field

from scheduler.api.base import ApiModel
from scheduler.api.meta import KubeObject

RBAC_V1: Final = "rbac.authorization.k8s.io/v1"


class PolicyRule(ApiModel):
    verbs: list[str]
    api_groups: list[str] = Field(default_factory=list)
    resources: list[str] = Field(default_factory=list)
    resource_names: list[str] = Field(default_factory=list)
    # Kubernetes spells it with capital URLs; the camelCase generator would not.
    non_resource_urls: list[str] = Field(default_factory=list, alias="nonResourceURLs")


class AggregationRule(ApiModel):
    # Raw LabelSelectors, evaluated with the core's selector functions.
    cluster_role_selectors: list[dict[str, Any]] = Field(default_factory=list)


class Subject(ApiModel):
    kind: Literal["User", "Group", "ServiceAccount"]
    name: str
    namespace: str | None = None
    api_group: str | None = None


class RoleRef(ApiModel):
    api_group: str
    kind: Literal["Role", "ClusterRole"]
    name: str


class Role(KubeObject):
    namespaced: ClassVar[bool] = True

    api_version: Literal["rbac.authorization.k8s.io/v1"] = RBAC_V1
    kind: Literal["Role"] = "Role"
    rules: list[PolicyRule] = Field(default_factory=list)


class ClusterRole(KubeObject):
    api_version: Literal["rbac.authorization.k8s.io/v1"] = RBAC_V1
    kind: Literal["ClusterRole"] = "ClusterRole"
    rules: list[PolicyRule] = Field(default_factory=list)
    aggregation_rule: AggregationRule | None = None


class RoleBinding(KubeObject):
    namespaced: ClassVar[bool] = True

    api_version: Literal["rbac.authorization.k8s.io/v1"] = RBAC_V1
    kind: Literal["RoleBinding"] = "RoleBinding"
    subjects: list[Subject] = Field(default_factory=list)
    role_ref: RoleRef


class ClusterRoleBinding(KubeObject):
    api_version: Literal["rbac.authorization.k8s.io/v1"] = RBAC_V1
    kind: Literal["ClusterRoleBinding"] = "ClusterRoleBinding"
    subjects: list[Subject] = Field(default_factory=list)
    role_ref: RoleRef
