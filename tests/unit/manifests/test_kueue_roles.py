"""Kueue's user-facing ClusterRoles under Kueue's names (docs/operations.md, "Switching from
Kueue"): bindings made for Kueue v0.19.2 keep granting the same rights after the switch.

The table below is Kueue v0.19.2's roles (name, rules, aggregation labels), written out
as facts; our only addition is `workloads/pendingposition` beside LocalQueue pending
workloads.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.manifests.support import MANIFESTS, find, folder_objects

RBAC = folder_objects(MANIFESTS / "rbac")
ALL = ("create", "delete", "get", "list", "patch", "update", "watch")
VIEW = ("get", "list", "watch")
KUEUE = "kueue.x-k8s.io"
VISIBILITY = "visibility.kueue.x-k8s.io"
VIEW_EDIT_ADMIN = ("view", "edit", "admin")

# name -> ({(group, resource, verb)}, batch-user?, aggregate-to-*)
Expected = tuple[set[tuple[str, str, str]], bool, tuple[str, ...]]


def grants(group: str, resource: str, verbs: tuple[str, ...]) -> set[tuple[str, str, str]]:
    return {(group, resource, verb) for verb in verbs}


def editor(resource: str, status: bool = True) -> set[tuple[str, str, str]]:
    out = grants(KUEUE, resource, ALL)
    return out | grants(KUEUE, f"{resource}/status", ("get",)) if status else out


def viewer(resource: str, status: bool = True) -> set[tuple[str, str, str]]:
    out = grants(KUEUE, resource, VIEW)
    return out | grants(KUEUE, f"{resource}/status", ("get",)) if status else out


ROLES: dict[str, Expected] = {
    "kueue-clusterqueue-editor-role": (editor("clusterqueues"), False, ()),
    "kueue-clusterqueue-viewer-role": (viewer("clusterqueues"), False, ("admin",)),
    "kueue-cohort-editor-role": (editor("cohorts", status=False), False, ()),
    "kueue-cohort-viewer-role": (viewer("cohorts", status=False), False, ("admin",)),
    "kueue-localqueue-editor-role": (editor("localqueues"), False, ()),
    "kueue-localqueue-viewer-role": (viewer("localqueues"), True, VIEW_EDIT_ADMIN),
    "kueue-resourceflavor-editor-role": (editor("resourceflavors", status=False), False, ()),
    "kueue-resourceflavor-viewer-role": (
        viewer("resourceflavors", status=False),
        False,
        ("admin",),
    ),
    "kueue-workload-editor-role": (editor("workloads"), False, ()),
    "kueue-workload-viewer-role": (viewer("workloads"), True, VIEW_EDIT_ADMIN),
    "kueue-job-editor-role": (
        grants("batch", "jobs", ALL) | grants("batch", "jobs/status", ("get",)),
        True,
        (),
    ),
    "kueue-job-viewer-role": (
        grants("batch", "jobs", VIEW) | grants("batch", "jobs/status", ("get",)),
        True,
        VIEW_EDIT_ADMIN,
    ),
    "kueue-pending-workloads-cq-viewer-role": (
        grants(VISIBILITY, "clusterqueues/pendingworkloads", VIEW),
        False,
        VIEW_EDIT_ADMIN,
    ),
    "kueue-pending-workloads-lq-viewer-role": (
        grants(VISIBILITY, "localqueues/pendingworkloads", VIEW)
        | grants(VISIBILITY, "workloads/pendingposition", VIEW),
        True,
        VIEW_EDIT_ADMIN,
    ),
}


def expanded(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    out: set[tuple[str, str, str]] = set()
    for rule in rules:
        assert set(rule) == {"apiGroups", "resources", "verbs"}, rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                out |= {(group, resource, verb) for verb in rule["verbs"]}
    return out


@pytest.mark.parametrize("name", sorted(ROLES))
def test_role_rules_and_labels_are_kueues(name: str) -> None:
    rules, batch_user, aggregate_to = ROLES[name]
    role = find(RBAC, "ClusterRole", name)
    assert expanded(role["rules"]) == rules
    labels = role["metadata"]["labels"]
    short = name.removeprefix("kueue-").removesuffix("-role")
    wanted = {
        "app.kubernetes.io/name": "queuescope",
        "rbac.kueue.x-k8s.io/role": short,
        "rbac.kueue.x-k8s.io/batch-admin": "true",
        **({"rbac.kueue.x-k8s.io/batch-user": "true"} if batch_user else {}),
        **{f"rbac.authorization.k8s.io/aggregate-to-{r}": "true" for r in aggregate_to},
    }
    assert labels == wanted


@pytest.mark.parametrize("who", ["admin", "user"])
def test_batch_roles_aggregate_kueues_labels(who: str) -> None:
    role = find(RBAC, "ClusterRole", f"kueue-batch-{who}-role")
    assert role["aggregationRule"]["clusterRoleSelectors"] == [
        {"matchLabels": {f"rbac.kueue.x-k8s.io/batch-{who}": "true"}}
    ]
    assert role["rules"] == []


def test_batch_user_gets_exactly_what_kueues_batch_user_gets_plus_our_extensions() -> None:
    """Kueue's batch-user, plus [EXT] pendingposition and what-if (docs/visibility-api.md)."""
    members = [
        o
        for o in RBAC
        if o["kind"] == "ClusterRole"
        and o["metadata"].get("labels", {}).get("rbac.kueue.x-k8s.io/batch-user") == "true"
    ]
    granted = set().union(*(expanded(o["rules"]) for o in members))
    assert granted == (
        viewer("localqueues")
        | viewer("workloads")
        | grants("batch", "jobs", ALL)
        | grants("batch", "jobs/status", ("get",))
        | grants(VISIBILITY, "localqueues/pendingworkloads", VIEW)
        | grants(VISIBILITY, "workloads/pendingposition", VIEW)
        | grants(VISIBILITY, "localqueues/whatif", ("create",))
    )


def test_every_kueue_named_role_is_in_the_table() -> None:
    named = {
        o["metadata"]["name"]
        for o in RBAC
        if o["kind"] == "ClusterRole" and o["metadata"]["name"].startswith("kueue-")
    }
    assert named == set(ROLES) | {"kueue-batch-admin-role", "kueue-batch-user-role"}
