from __future__ import annotations

import pytest

from scheduler.api.rbac import ClusterRole, PolicyRule, Role, RoleBinding
from tests.unit.visibility_server.authz.builders import (
    VIS,
    binding,
    cluster_binding,
    cluster_role,
    group,
    role,
    rule,
    service_account,
    user,
)
from visibility_server.authz.attributes import Attributes, request_attributes
from visibility_server.authz.decision import Decision
from visibility_server.authz.identity import UserInfo, service_account_user
from visibility_server.authz.rbac import RBACAuthorizer

G = f"/apis/{VIS}/v1beta2"
CQ = f"{G}/clusterqueues/cq/pendingworkloads"
ALICE = UserInfo("alice", groups=("system:authenticated",))


def lq(namespace: str, name: str = "lq") -> str:
    return f"{G}/namespaces/{namespace}/localqueues/{name}/pendingworkloads"


def attrs(path: str, method: str = "GET") -> Attributes:
    return request_attributes(method, path)


def granting(*rules: PolicyRule, who: UserInfo = ALICE) -> RBACAuthorizer:
    """alice bound cluster-wide to a ClusterRole with `rules`."""
    return RBACAuthorizer(
        cluster_roles=[cluster_role("r", *rules)],
        cluster_role_bindings=[cluster_binding("b", "r", user(who.name))],
    )


def allowed(authz: RBACAuthorizer, path: str, method: str = "GET", who: UserInfo = ALICE) -> bool:
    return authz.authorize(who, attrs(path, method)).allowed


def test_nothing_loaded_denies_everything() -> None:
    authz = RBACAuthorizer()
    assert authz.authorize(ALICE, attrs(CQ)) == Decision(False, "")
    assert not allowed(authz, "/metrics")


@pytest.mark.parametrize(
    ("verbs", "method", "expected"),
    [
        (["get"], "GET", True),
        (["get"], "HEAD", True),
        (["list"], "GET", False),
        (["*"], "DELETE", True),
        (["create"], "POST", True),
        (["Get"], "GET", False),
    ],
)
def test_verbs(verbs: list[str], method: str, expected: bool) -> None:
    authz = granting(rule(verbs, [VIS], ["clusterqueues/pendingworkloads"]))
    assert allowed(authz, CQ, method) is expected


@pytest.mark.parametrize(
    ("groups", "expected"),
    [([VIS], True), (["*"], True), ([""], False), (["kueue.x-k8s.io"], False), ([], False)],
)
def test_api_groups(groups: list[str], expected: bool) -> None:
    authz = granting(rule(["get"], groups, ["clusterqueues/pendingworkloads"]))
    assert allowed(authz, CQ) is expected


def test_core_group_is_the_empty_string() -> None:
    authz = granting(rule(["get"], [""], ["pods"]))
    assert allowed(authz, "/api/v1/namespaces/ns/pods/p")
    assert not allowed(authz, f"{G}/pods/p")


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        (["clusterqueues/pendingworkloads"], True),
        (["*"], True),
        (["*/pendingworkloads"], True),
        (["clusterqueues"], False),
        (["clusterqueues/*"], False),
        (["localqueues/pendingworkloads"], False),
        (["*/status"], False),
        (["clusterqueues/pendingworkloads/"], False),
    ],
)
def test_resources_with_subresources(resources: list[str], expected: bool) -> None:
    authz = granting(rule(["get"], [VIS], resources))
    assert allowed(authz, CQ) is expected


def test_subresource_rule_does_not_grant_the_parent_and_vice_versa() -> None:
    parent = granting(rule(["get", "list"], [VIS], ["clusterqueues"]))
    assert allowed(parent, f"{G}/clusterqueues/cq")
    assert allowed(parent, f"{G}/clusterqueues")
    assert not allowed(parent, CQ)
    star_sub = granting(rule(["get", "list"], [VIS], ["*/pendingworkloads"]))
    assert not allowed(star_sub, f"{G}/clusterqueues/cq")


@pytest.mark.parametrize(
    ("names", "path", "expected"),
    [
        ([], CQ, True),
        (["cq"], CQ, True),
        (["other", "cq"], CQ, True),
        (["other"], CQ, False),
        (["cq"], f"{G}/clusterqueues", False),
        ([""], f"{G}/clusterqueues", False),
        ([], f"{G}/clusterqueues", True),
    ],
)
def test_resource_names(names: list[str], path: str, expected: bool) -> None:
    authz = granting(
        rule(["get", "list"], [VIS], ["clusterqueues/pendingworkloads", "clusterqueues"], names)
    )
    assert allowed(authz, path) is expected


@pytest.mark.parametrize(
    ("urls", "path", "expected"),
    [
        (["/metrics"], "/metrics", True),
        (["/metrics"], "/metrics/extra", False),
        (["/metrics"], "/metric", False),
        (["*"], "/anything/at/all", True),
        (["/openapi/*"], "/openapi/v3/apis", True),
        (["/openapi/*"], "/openapi/", True),
        (["/openapi/*"], "/openapi", False),
        (["/open*"], "/openapi", True),
        (["/apis"], "/apis/", False),
    ],
)
def test_non_resource_urls(urls: list[str], path: str, expected: bool) -> None:
    authz = granting(rule(["get"], urls=urls))
    assert allowed(authz, path) is expected


def test_non_resource_rules_do_not_grant_resources() -> None:
    authz = granting(rule(["get"], urls=["*"]))
    assert not allowed(authz, CQ)
    resources = granting(rule(["get"], ["*"], ["*"]))
    assert not allowed(resources, "/metrics")


def test_non_resource_rules_only_through_cluster_role_bindings() -> None:
    authz = RBACAuthorizer(
        cluster_roles=[cluster_role("metrics", rule(["get"], urls=["/metrics"]))],
        role_bindings=[binding("team-a", "b", "ClusterRole", "metrics", user("alice"))],
    )
    assert not allowed(authz, "/metrics")
    bound = RBACAuthorizer(
        cluster_roles=[cluster_role("metrics", rule(["get"], urls=["/metrics"]))],
        cluster_role_bindings=[cluster_binding("b", "metrics", user("alice"))],
    )
    assert allowed(bound, "/metrics")


def _viewer() -> ClusterRole:
    return cluster_role("viewer", rule(["get"], [VIS], ["localqueues/pendingworkloads"]))


def test_role_binding_to_cluster_role_is_scoped_to_its_namespace() -> None:
    authz = RBACAuthorizer(
        cluster_roles=[
            _viewer(),
            cluster_role("cq-viewer", rule(["get"], [VIS], ["clusterqueues/pendingworkloads"])),
        ],
        role_bindings=[
            binding("team-a", "b", "ClusterRole", "viewer", user("alice")),
            binding("team-a", "c", "ClusterRole", "cq-viewer", user("alice")),
        ],
    )
    assert allowed(authz, lq("team-a"))
    assert not allowed(authz, lq("team-b"))
    # a cluster-scoped resource has no namespace: RoleBindings never apply to it
    assert not allowed(authz, CQ)


def test_role_in_another_namespace_does_not_apply() -> None:
    lq_rule = rule(["get"], [VIS], ["localqueues/pendingworkloads"])
    authz = RBACAuthorizer(
        roles=[role("team-b", "viewer", lq_rule)],
        role_bindings=[binding("team-a", "b", "Role", "viewer", user("alice"))],
    )
    assert not allowed(authz, lq("team-a"))
    assert not allowed(authz, lq("team-b"))
    decision = authz.authorize(ALICE, attrs(lq("team-a")))
    assert decision.reason == 'RBAC: role.rbac.authorization.k8s.io "viewer" not found'
    same_ns = RBACAuthorizer(
        roles=[role("team-a", "viewer", lq_rule)],
        role_bindings=[binding("team-a", "b", "Role", "viewer", user("alice"))],
    )
    assert allowed(same_ns, lq("team-a"))
    assert not allowed(same_ns, lq("team-b"))


def test_cluster_role_binding_grants_in_every_namespace() -> None:
    authz = RBACAuthorizer(
        cluster_roles=[_viewer()],
        cluster_role_bindings=[cluster_binding("b", "viewer", user("alice"))],
    )
    assert allowed(authz, lq("team-a"))
    assert allowed(authz, lq("anywhere"))


def test_subject_kinds() -> None:
    authz = RBACAuthorizer(
        cluster_roles=[_viewer()],
        role_bindings=[
            binding("team-a", "by-group", "ClusterRole", "viewer", group("devs")),
            binding("team-a", "local-sa", "ClusterRole", "viewer", service_account("runner")),
            binding("team-a", "remote-sa", "ClusterRole", "viewer", service_account("ci", "tools")),
            binding(
                "team-a", "sa-group", "ClusterRole", "viewer", group("system:serviceaccounts:ops")
            ),
        ],
    )
    assert allowed(authz, lq("team-a"), who=UserInfo("bob", groups=("devs",)))
    assert not allowed(authz, lq("team-a"), who=UserInfo("devs"))  # a user named like the group
    assert allowed(authz, lq("team-a"), who=service_account_user("team-a", "runner"))
    assert not allowed(authz, lq("team-a"), who=service_account_user("team-b", "runner"))
    assert allowed(authz, lq("team-a"), who=UserInfo("system:serviceaccount:tools:ci"))
    assert allowed(authz, lq("team-a"), who=service_account_user("ops", "anything"))
    assert not allowed(authz, lq("team-a"), who=UserInfo("system:serviceaccount:ops:anything"))


def test_service_account_in_cluster_role_binding_needs_a_namespace() -> None:
    sa = service_account("ci")
    authz = RBACAuthorizer(
        cluster_roles=[_viewer()],
        cluster_role_bindings=[cluster_binding("b", "viewer", sa)],
    )
    assert not allowed(authz, lq("team-a"), who=UserInfo("system:serviceaccount::ci"))
    assert not allowed(authz, lq("team-a"), who=UserInfo("system:serviceaccount:default:ci"))


def test_allow_reasons_are_worded_as_kubernetes() -> None:
    authz = RBACAuthorizer(
        cluster_roles=[_viewer()],
        role_bindings=[binding("team-a", "rb", "ClusterRole", "viewer", service_account("runner"))],
        cluster_role_bindings=[
            cluster_binding("crb", "viewer", user("x"), group("devs"), user("bob"))
        ],
    )
    decision = authz.authorize(UserInfo("bob", groups=("devs",)), attrs(lq("team-a")))
    assert decision == Decision(
        True, 'RBAC: allowed by ClusterRoleBinding "crb" of ClusterRole "viewer" to Group "devs"'
    )
    sa = authz.authorize(service_account_user("team-a", "runner"), attrs(lq("team-a")))
    assert sa.reason == (
        'RBAC: allowed by RoleBinding "rb/team-a" of ClusterRole "viewer" '
        'to ServiceAccount "runner/team-a"'
    )


def test_missing_roles_are_reported_deduplicated() -> None:
    authz = RBACAuthorizer(
        cluster_role_bindings=[
            cluster_binding("a", "ghost", user("alice")),
            cluster_binding("b", "ghost", user("alice")),
            cluster_binding("c", "phantom", user("alice")),
            cluster_binding("d", "other", user("someone-else")),
        ],
    )
    assert authz.authorize(ALICE, attrs(CQ)).reason == (
        'RBAC: [clusterrole.rbac.authorization.k8s.io "ghost" not found, '
        'clusterrole.rbac.authorization.k8s.io "phantom" not found]'
    )
    # a binding that grants wins over broken ones
    fixed = RBACAuthorizer(
        cluster_roles=[cluster_role("real", rule(["get"], [VIS], ["*"]))],
        cluster_role_bindings=[
            cluster_binding("a", "ghost", user("alice")),
            cluster_binding("z", "real", user("alice")),
        ],
    )
    assert fixed.authorize(ALICE, attrs(CQ)).allowed


def test_bindings_are_visited_in_order() -> None:
    authz = RBACAuthorizer(
        cluster_roles=[_viewer()],
        cluster_role_bindings=[
            cluster_binding("second-by-name-first-in-input", "viewer", group("devs")),
            cluster_binding("a-first-by-name", "viewer", user("alice")),
        ],
    )
    decision = authz.authorize(UserInfo("alice", groups=("devs",)), attrs(lq("x")))
    assert '"second-by-name-first-in-input"' in decision.reason


def _aggregated(*selectors: dict[str, object]) -> ClusterRole:
    return cluster_role(
        "aggregate",
        rule(["*"], ["*"], ["secrets"]),  # replaced by the aggregation, as the controller does
        selectors=list(selectors),
    )


def _authz_for(*cluster_roles: ClusterRole) -> RBACAuthorizer:
    return RBACAuthorizer(
        cluster_roles=cluster_roles,
        cluster_role_bindings=[cluster_binding("b", "aggregate", user("alice"))],
    )


CQ_RULE = rule(["get"], [VIS], ["clusterqueues/pendingworkloads"])
LQ_RULE = rule(["get"], [VIS], ["localqueues/pendingworkloads"])


def test_aggregation_by_match_labels() -> None:
    authz = _authz_for(
        _aggregated({"matchLabels": {"agg": "view"}}),
        cluster_role("cq", CQ_RULE, labels={"agg": "view"}),
        cluster_role("lq", LQ_RULE, labels={"agg": "edit"}),
    )
    assert allowed(authz, CQ)
    assert not allowed(authz, lq("team-a"))
    assert not allowed(authz, "/api/v1/namespaces/ns/secrets/s")  # own rules replaced


def test_aggregation_selectors_are_ored_and_expressions_anded() -> None:
    authz = _authz_for(
        _aggregated(
            {"matchLabels": {"agg": "view"}},
            {
                "matchExpressions": [
                    {"key": "tier", "operator": "In", "values": ["gold", "silver"]},
                    {"key": "legacy", "operator": "DoesNotExist"},
                ]
            },
        ),
        cluster_role("cq", CQ_RULE, labels={"agg": "view"}),
        cluster_role("lq", LQ_RULE, labels={"tier": "gold"}),
        cluster_role(
            "metrics", rule(["get"], urls=["/metrics"]), labels={"tier": "gold", "legacy": ""}
        ),
    )
    assert allowed(authz, CQ)
    assert allowed(authz, lq("team-a"))
    assert not allowed(authz, "/metrics")


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ({}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["bronze"]}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["gold"]}]}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "nope", "operator": "NotIn", "values": ["x"]}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": []}]}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists", "values": ["gold"]}]}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "Gt", "values": ["1"]}]}, False),
        (
            {
                "matchLabels": {"tier": "gold"},
                "matchExpressions": [{"key": "x", "operator": "Exists"}],
            },
            False,
        ),
    ],
)
def test_label_selector_semantics(selector: dict[str, object], expected: bool) -> None:
    authz = _authz_for(_aggregated(selector), cluster_role("cq", CQ_RULE, labels={"tier": "gold"}))
    assert allowed(authz, CQ) is expected


def test_aggregation_is_transitive_and_survives_cycles() -> None:
    authz = _authz_for(
        _aggregated({"matchLabels": {"level": "1"}}),
        cluster_role("middle", selectors=[{"matchLabels": {"level": "2"}}], labels={"level": "1"}),
        cluster_role("leaf", CQ_RULE, labels={"level": "2"}),
        cluster_role("loop", selectors=[{"matchLabels": {"level": "1"}}], labels={"level": "2"}),
    )
    assert allowed(authz, CQ)
    middle_bound = RBACAuthorizer(
        cluster_roles=[
            cluster_role(
                "middle", selectors=[{"matchLabels": {"level": "2"}}], labels={"level": "1"}
            ),
            cluster_role("leaf", CQ_RULE, labels={"level": "2"}),
            cluster_role(
                "loop", selectors=[{"matchLabels": {"level": "1"}}], labels={"level": "2"}
            ),
        ],
        cluster_role_bindings=[cluster_binding("b", "loop", user("alice"))],
    )
    assert allowed(middle_bound, CQ)


def test_aggregated_role_does_not_select_itself() -> None:
    authz = _authz_for(
        cluster_role(
            "aggregate", CQ_RULE, labels={"agg": "x"}, selectors=[{"matchLabels": {"agg": "x"}}]
        ),
    )
    assert not allowed(authz, CQ)


def test_aggregated_role_through_role_binding() -> None:
    authz = RBACAuthorizer(
        cluster_roles=[
            cluster_role("agg", selectors=[{"matchLabels": {"agg": "view"}}]),
            cluster_role("lq", LQ_RULE, labels={"agg": "view"}),
        ],
        role_bindings=[binding("team-a", "b", "ClusterRole", "agg", user("alice"))],
    )
    assert allowed(authz, lq("team-a"))
    assert not allowed(authz, lq("team-b"))


def test_from_objects_sorts_kinds() -> None:
    objects: list[object] = [
        _viewer(),
        binding("team-a", "b", "ClusterRole", "viewer", user("alice")),
        "not rbac",
    ]
    authz = RBACAuthorizer.from_objects(objects)
    assert allowed(authz, lq("team-a"))


def test_accepts_any_iterables() -> None:
    roles: tuple[Role, ...] = ()
    bindings: tuple[RoleBinding, ...] = ()
    authz = RBACAuthorizer(
        roles, iter([_viewer()]), bindings, iter([cluster_binding("b", "viewer", user("alice"))])
    )
    assert allowed(authz, lq("x"))
