"""Small constructors for RBAC objects in the authorization tests."""

from __future__ import annotations

from typing import Any, Literal

from scheduler.api.meta import ObjectMeta
from scheduler.api.rbac import (
    AggregationRule,
    ClusterRole,
    ClusterRoleBinding,
    PolicyRule,
    Role,
    RoleBinding,
    RoleRef,
    Subject,
)

RBAC = "rbac.authorization.k8s.io"
VIS = "visibility.kueue.x-k8s.io"


def rule(
    verbs: list[str],
    groups: list[str] | None = None,
    resources: list[str] | None = None,
    names: list[str] | None = None,
    urls: list[str] | None = None,
) -> PolicyRule:
    return PolicyRule(
        verbs=verbs,
        api_groups=groups or [],
        resources=resources or [],
        resource_names=names or [],
        non_resource_urls=urls or [],
    )


def cluster_role(
    name: str,
    *rules: PolicyRule,
    labels: dict[str, str] | None = None,
    selectors: list[dict[str, Any]] | None = None,
) -> ClusterRole:
    aggregation = None if selectors is None else AggregationRule(cluster_role_selectors=selectors)
    return ClusterRole(
        metadata=ObjectMeta(name=name, labels=labels or {}),
        rules=list(rules),
        aggregation_rule=aggregation,
    )


def role(namespace: str, name: str, *rules: PolicyRule) -> Role:
    return Role(metadata=ObjectMeta(name=name, namespace=namespace), rules=list(rules))


def user(name: str) -> Subject:
    return Subject(kind="User", name=name, api_group=RBAC)


def group(name: str) -> Subject:
    return Subject(kind="Group", name=name, api_group=RBAC)


def service_account(name: str, namespace: str | None = None) -> Subject:
    return Subject(kind="ServiceAccount", name=name, namespace=namespace)


def cluster_binding(name: str, cluster_role_name: str, *subjects: Subject) -> ClusterRoleBinding:
    return ClusterRoleBinding(
        metadata=ObjectMeta(name=name),
        role_ref=RoleRef(api_group=RBAC, kind="ClusterRole", name=cluster_role_name),
        subjects=list(subjects),
    )


def binding(
    namespace: str,
    name: str,
    kind: Literal["Role", "ClusterRole"],
    ref_name: str,
    *subjects: Subject,
) -> RoleBinding:
    return RoleBinding(
        metadata=ObjectMeta(name=name, namespace=namespace),
        role_ref=RoleRef(api_group=RBAC, kind=kind, name=ref_name),
        subjects=list(subjects),
    )
