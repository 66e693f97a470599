"""RBAC (docs/cluster.md#manifests): the controller gets exactly what the spec lists, users get
`get`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.unit.manifests.support import (
    MANIFESTS,
    NAMESPACE,
    SERVICE_ACCOUNT,
    find,
    folder_objects,
)

RBAC = folder_objects(MANIFESTS / "rbac")
SELF_MANAGED_CERTS = folder_objects(MANIFESTS / "components" / "self-managed-certs")

# Roles kube-apiserver bootstraps; the manifests only bind them.
BUILTIN_CLUSTER_ROLES: dict[str, list[dict[str, Any]]] = {
    "system:auth-delegator": [
        {
            "apiGroups": ["authentication.k8s.io"],
            "resources": ["tokenreviews"],
            "verbs": ["create"],
        },
        {
            "apiGroups": ["authorization.k8s.io"],
            "resources": ["subjectaccessreviews"],
            "verbs": ["create"],
        },
    ],
}
BUILTIN_ROLES: dict[tuple[str, str], list[dict[str, Any]]] = {
    ("kube-system", "extension-apiserver-authentication-reader"): [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["extension-apiserver-authentication"],
            "verbs": ["get", "list", "watch"],
        },
    ],
}


@dataclass(frozen=True)
class Request:
    verb: str
    group: str
    resource: str  # "resource" or "resource/subresource"
    namespace: str | None = None  # None: a cluster-wide request
    name: str | None = None


def _matches(rule: dict[str, Any], request: Request) -> bool:
    def has(values: Iterable[str], value: str) -> bool:
        return "*" in values or value in values

    return (
        has(rule.get("verbs", []), request.verb)
        and has(rule.get("apiGroups", []), request.group)
        and has(rule.get("resources", []), request.resource)
        and (not rule.get("resourceNames") or request.name in rule["resourceNames"])
    )


def _binds_controller(binding: dict[str, Any]) -> bool:
    return any(
        s.get("kind") == "ServiceAccount"
        and s.get("name") == SERVICE_ACCOUNT
        and s.get("namespace") == NAMESPACE
        for s in binding.get("subjects", [])
    )


def _cluster_role_rules(objects: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    if name in BUILTIN_CLUSTER_ROLES:
        return BUILTIN_CLUSTER_ROLES[name]
    rules: list[dict[str, Any]] = find(objects, "ClusterRole", name)["rules"]
    return rules


def controller_allowed(request: Request, objects: list[dict[str, Any]] = RBAC) -> bool:
    """Kubernetes' RBAC evaluation for the controller's ServiceAccount over `objects`."""
    for binding in objects:
        if not _binds_controller(binding):
            continue
        ref = binding["roleRef"]
        if binding["kind"] == "ClusterRoleBinding":
            rules = _cluster_role_rules(objects, ref["name"])
        elif binding["kind"] == "RoleBinding":
            if binding["metadata"]["namespace"] != request.namespace:
                continue
            if ref["kind"] == "ClusterRole":
                rules = _cluster_role_rules(objects, ref["name"])
            else:
                key = (binding["metadata"]["namespace"], ref["name"])
                rules = (
                    BUILTIN_ROLES.get(key)
                    or find(
                        [o for o in objects if o["metadata"].get("namespace") == key[0]],
                        "Role",
                        ref["name"],
                    )["rules"]
                )
        else:
            continue
        if any(_matches(rule, request) for rule in rules):
            return True
    return False


def _grants(verbs: str, group: str, resources: str, **where: str) -> list[Request]:
    return [
        Request(verb, group, resource, where.get("namespace"), where.get("name"))
        for verb in verbs.split()
        for resource in resources.split()
    ]


KUEUE = "kueue.x-k8s.io"
APISERVICES = "v1beta1.visibility.kueue.x-k8s.io v1beta2.visibility.kueue.x-k8s.io"
V1BETA1, V1BETA2 = APISERVICES.split()
# The controller ClusterRole table of docs/cluster.md#manifests, the leader-election Role, the two
# bindings to kube-apiserver's own roles.
EXPECTED = [
    *_grants(
        "get list watch update patch",
        KUEUE,
        "clusterqueues localqueues resourceflavors workloadpriorityclasses cohorts",
    ),
    *_grants("get list watch create update patch delete", KUEUE, "workloads"),
    *_grants("get list watch", KUEUE, "admissionchecks"),
    *_grants(
        "get update patch",
        KUEUE,
        "clusterqueues/status localqueues/status workloads/status cohorts/status",
    ),
    *_grants(
        "update", KUEUE, "clusterqueues/finalizers resourceflavors/finalizers workloads/finalizers"
    ),
    *_grants("get list watch", "scheduling.k8s.io", "priorityclasses"),
    *_grants("get list watch", "", "namespaces"),
    *_grants("create patch update", "", "events"),
    *_grants("create patch update", "events.k8s.io", "events"),
    *_grants("get list watch update patch delete", "batch", "jobs"),
    *_grants("get update patch", "batch", "jobs/status"),
    *_grants("update", "batch", "jobs/finalizers"),
    *_grants("get list watch update patch delete", "", "pods"),
    *_grants("get patch", "", "pods/status"),
    *_grants("get update", "", "pods/finalizers"),
    *_grants("get list watch", "apps", "statefulsets"),
    *_grants("get list watch update patch", "jobset.x-k8s.io", "jobsets"),
    *_grants("get update", "jobset.x-k8s.io", "jobsets/finalizers"),
    *[
        r
        for name in APISERVICES.split()
        for r in _grants("get", "apiregistration.k8s.io", "apiservices", name=name)
    ],
    *_grants(
        "get list watch create update patch",
        "coordination.k8s.io",
        "leases",
        namespace=NAMESPACE,
    ),
    *_grants("create", "authentication.k8s.io", "tokenreviews"),
    *_grants("create", "authorization.k8s.io", "subjectaccessreviews"),
    *_grants(
        "get list watch",
        "",
        "configmaps",
        namespace="kube-system",
        name="extension-apiserver-authentication",
    ),
]


@pytest.mark.parametrize("request_", EXPECTED, ids=lambda r: f"{r.verb}-{r.group}-{r.resource}")
def test_controller_is_granted(request_: Request) -> None:
    assert controller_allowed(request_)


@pytest.mark.parametrize(
    "request_",
    [
        Request("get", "", "secrets", NAMESPACE),
        Request("list", "", "configmaps", "kube-system"),
        Request("get", "", "configmaps", "kube-system", "other"),
        Request("patch", "apiregistration.k8s.io", "apiservices", name="v1beta1.metrics.k8s.io"),
        Request("delete", KUEUE, "clusterqueues"),
        Request("create", KUEUE, "clusterqueues"),
        Request("create", "batch", "jobs"),
        Request("create", "", "pods"),
        Request("update", "", "pods/status"),
        Request("update", "coordination.k8s.io", "leases", "default"),
        Request("list", "flowcontrol.apiserver.k8s.io", "flowschemas"),
    ],
    ids=lambda r: f"{r.verb}-{r.group}-{r.resource}",
)
def test_controller_is_not_granted(request_: Request) -> None:
    assert not controller_allowed(request_)


def _expanded(rules: list[dict[str, Any]]) -> set[tuple[str, str, str, str]]:
    return {
        (group, resource, verb, name)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
        for name in rule.get("resourceNames") or ["*"]
    }


def test_controller_cluster_role_is_exactly_the_spec_table() -> None:
    role = find(RBAC, "ClusterRole", "queuescope-controller")
    cluster_wide = [
        r
        for r in EXPECTED
        if r.namespace is None and r.group not in ("authentication.k8s.io", "authorization.k8s.io")
    ]
    expected = {(r.group, r.resource, r.verb, r.name or "*") for r in cluster_wide}
    assert _expanded(role["rules"]) == expected
    assert all("*" not in rule["verbs"] + rule["resources"] for rule in role["rules"])


def test_bindings_are_where_the_spec_puts_them() -> None:
    reader = find(RBAC, "RoleBinding", "queuescope-auth-reader")
    assert reader["metadata"]["namespace"] == "kube-system"
    assert reader["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "extension-apiserver-authentication-reader",
    }
    delegator = find(RBAC, "ClusterRoleBinding", "queuescope-auth-delegator")
    assert delegator["roleRef"]["name"] == "system:auth-delegator"
    leader = find(RBAC, "RoleBinding", "queuescope-leader-election")
    assert leader["metadata"]["namespace"] == NAMESPACE
    for obj in RBAC:
        if obj["kind"].endswith("Binding"):
            assert _binds_controller(obj), obj["metadata"]["name"]
    account = find(RBAC, "ServiceAccount", SERVICE_ACCOUNT)
    assert account["metadata"]["namespace"] == NAMESPACE
    assert account["automountServiceAccountToken"] is True


AGGREGATE = {
    f"rbac.authorization.k8s.io/aggregate-to-{r}": "true" for r in ("view", "edit", "admin")
}


def _labels(name: str) -> dict[str, str]:
    labels: dict[str, str] = find(RBAC, "ClusterRole", name)["metadata"]["labels"]
    return labels


def test_localqueue_viewer_is_aggregated_everywhere() -> None:
    role = find(RBAC, "ClusterRole", "queuescope-pending-workloads-lq-viewer")
    assert (
        _labels(role["metadata"]["name"]).items()
        >= {
            **AGGREGATE,
            "rbac.queuescope.io/batch-user": "true",
            "rbac.queuescope.io/batch-admin": "true",
            "rbac.kueue.x-k8s.io/batch-user": "true",
            "rbac.kueue.x-k8s.io/batch-admin": "true",
        }.items()
    )
    assert _expanded(role["rules"]) == {
        ("visibility.kueue.x-k8s.io", "localqueues/pendingworkloads", "get", "*"),
        ("visibility.kueue.x-k8s.io", "workloads/pendingposition", "get", "*"),
    }


def test_clusterqueue_viewer_is_not_aggregated_into_view_edit_admin() -> None:
    role = find(RBAC, "ClusterRole", "queuescope-pending-workloads-cq-viewer")
    labels = _labels(role["metadata"]["name"])
    assert not set(labels) & set(AGGREGATE)
    assert (
        labels.items()
        >= {
            "rbac.queuescope.io/batch-admin": "true",
            "rbac.kueue.x-k8s.io/batch-admin": "true",
        }.items()
    )
    assert "rbac.queuescope.io/batch-user" not in labels
    assert _expanded(role["rules"]) == {
        ("visibility.kueue.x-k8s.io", "clusterqueues/pendingworkloads", "get", "*"),
    }


@pytest.mark.parametrize("who", ["admin", "user"])
def test_batch_roles_aggregate_by_label(who: str) -> None:
    role = find(RBAC, "ClusterRole", f"queuescope-batch-{who}")
    assert role["aggregationRule"]["clusterRoleSelectors"] == [
        {"matchLabels": {f"rbac.queuescope.io/batch-{who}": "true"}}
    ]


def test_metrics_reader() -> None:
    role = find(RBAC, "ClusterRole", "queuescope-metrics-reader")
    assert role["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]


SECRET = "queuescope-visibility-tls"
# docs/cluster.md#tls-and-certificates, component self-managed-certs: get and update on that Secret,
# get and patch on the two APIServices, by name.
SELF_MANAGED_EXTRA = [
    *_grants("get update", "", "secrets", namespace=NAMESPACE, name=SECRET),
    *[
        r
        for name in APISERVICES.split()
        for r in _grants("get patch", "apiregistration.k8s.io", "apiservices", name=name)
    ],
]


@pytest.mark.parametrize(
    "request_", SELF_MANAGED_EXTRA, ids=lambda r: f"{r.verb}-{r.resource}-{r.name}"
)
def test_self_managed_certs_grants(request_: Request) -> None:
    assert controller_allowed(request_, RBAC + SELF_MANAGED_CERTS)
    if request_.verb != "get" or request_.resource != "apiservices":
        assert not controller_allowed(request_)  # not without the component


@pytest.mark.parametrize(
    "request_",
    [
        Request("get", "", "secrets", NAMESPACE, "other"),
        Request("list", "", "secrets", NAMESPACE),
        Request("create", "", "secrets", NAMESPACE, SECRET),
        Request("delete", "", "secrets", NAMESPACE, SECRET),
        Request("update", "", "secrets", "kube-system", SECRET),
        Request("create", "apiregistration.k8s.io", "apiservices"),
        Request("delete", "apiregistration.k8s.io", "apiservices", name=V1BETA1),
        Request("update", "apiregistration.k8s.io", "apiservices", name=V1BETA2),
        Request("patch", "apiregistration.k8s.io", "apiservices", name="v1beta1.metrics.k8s.io"),
    ],
    ids=lambda r: f"{r.verb}-{r.resource}-{r.namespace}-{r.name}",
)
def test_self_managed_certs_grants_nothing_more(request_: Request) -> None:
    assert not controller_allowed(request_, RBAC + SELF_MANAGED_CERTS)


def test_self_managed_certs_objects() -> None:
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in SELF_MANAGED_CERTS)
    assert kinds == sorted(
        (kind, "queuescope-self-managed-certs")
        for kind in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
    )
    for obj in SELF_MANAGED_CERTS:
        if obj["kind"].endswith("Binding"):
            assert _binds_controller(obj)
        if obj["kind"] in ("Role", "RoleBinding"):
            assert obj["metadata"]["namespace"] == NAMESPACE
