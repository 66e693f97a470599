"""The rules of ClusterRoles, with aggregation resolved as Kubernetes' controller would.

A ClusterRole with an `aggregationRule` gets, as its rules, the union of the rules
of every other ClusterRole selected by any of its `clusterRoleSelectors`; its own
`rules` are replaced, as kube-controller-manager's aggregation controller replaces
them. Selected roles that aggregate themselves contribute their aggregated rules,
so the result is the rules of every plain ClusterRole reachable through the
selection graph (cycles included, each role visited once). Without a controller
running, this is the state the cluster converges to.

When several ClusterRoles share a name, the last one wins (as `kubectl apply`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from scheduler.api.rbac import ClusterRole
from visibility_server.authz.rules import CompiledRule
from visibility_server.authz.selectors import LabelPredicate, compile_selector


def _selected(
    role: ClusterRole,
    others: Sequence[ClusterRole],
    predicates: Sequence[LabelPredicate],
) -> list[str]:
    names: list[str] = []
    for predicate in predicates:
        for other in others:
            name = other.metadata.name
            if name != role.metadata.name and predicate(other.metadata.labels):
                names.append(name)
    return names


def _dedupe(rules: Iterable[CompiledRule]) -> tuple[CompiledRule, ...]:
    return tuple(dict.fromkeys(rules))


def effective_cluster_role_rules(
    cluster_roles: Iterable[ClusterRole],
) -> dict[str, tuple[CompiledRule, ...]]:
    """Name → the rules the ClusterRole grants, aggregation applied."""
    by_name = {role.metadata.name: role for role in cluster_roles}
    ordered = sorted(by_name.values(), key=lambda role: role.metadata.name)
    own = {
        name: _dedupe(CompiledRule.of(rule) for rule in role.rules)
        for name, role in by_name.items()
    }

    edges: dict[str, list[str]] = {}
    for role in ordered:
        if role.aggregation_rule is not None:
            predicates = [compile_selector(s) for s in role.aggregation_rule.cluster_role_selectors]
            edges[role.metadata.name] = _selected(role, ordered, predicates)

    effective: dict[str, tuple[CompiledRule, ...]] = {}
    for name in by_name:
        effective[name] = own[name] if name not in edges else _aggregate(name, edges, own)
    return effective


def _aggregate(
    root: str,
    edges: Mapping[str, list[str]],
    own: Mapping[str, tuple[CompiledRule, ...]],
) -> tuple[CompiledRule, ...]:
    """Rules of the plain roles reachable from `root`, in depth-first selection order."""
    collected: list[CompiledRule] = []
    seen = {root}
    stack = list(reversed(edges[root]))
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in edges:
            stack.extend(reversed(edges[name]))
        else:
            collected.extend(own[name])
    return _dedupe(collected)


__all__ = ["effective_cluster_role_rules"]
