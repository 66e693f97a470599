"""Evaluating RBAC objects locally, with Kubernetes' semantics (docs/cluster.md#embedded-mode).

ClusterRoleBindings grant their (Cluster)Role's rules everywhere; RoleBindings grant
theirs only to requests in their own namespace, referencing a Role of that namespace
or a ClusterRole. Requests without a namespace (cluster-scoped resources, and every
non-resource request) are therefore decided by ClusterRoleBindings alone, which is
why nonResourceURLs rules only ever count through a ClusterRoleBinding.

Subjects: `User` by name, `Group` by membership, `ServiceAccount` by the username
`system:serviceaccount:<namespace>:<name>` (the namespace defaults to the binding's
for RoleBindings; a ClusterRoleBinding's ServiceAccount subject needs one). The
groups service accounts carry (`system:serviceaccounts[:<ns>]`) are ordinary
groups: they match when the identity carries them.

Bindings are indexed by subject once; a decision visits only the bindings that
apply to the caller, ClusterRoleBindings first, each list in input order, and stops
at the first rule that allows. Reasons are worded as Kubernetes' RBAC authorizer
words them, including `RBAC: <errors>` for bindings whose role does not exist.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from scheduler.api.rbac import ClusterRole, ClusterRoleBinding, Role, RoleBinding, Subject
from visibility_server.authz.aggregation import effective_cluster_role_rules
from visibility_server.authz.attributes import Attributes
from visibility_server.authz.decision import Decision
from visibility_server.authz.goquote import go_quote
from visibility_server.authz.identity import UserInfo, service_account_username
from visibility_server.authz.rules import CompiledRule

RBAC_GROUP = "rbac.authorization.k8s.io"


@dataclass(frozen=True, slots=True)
class _Binding:
    """A binding with its role resolved: the rules it grants, or why it grants nothing."""

    description: str
    subjects: tuple[str, ...]
    rules: tuple[CompiledRule, ...] = ()
    error: str = ""


@dataclass(slots=True)
class _Scope:
    """The bindings of one scope (the cluster, or one namespace), indexed by subject."""

    bindings: list[_Binding] = field(default_factory=list)
    users: defaultdict[str, list[tuple[int, int]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    groups: defaultdict[str, list[tuple[int, int]]] = field(
        default_factory=lambda: defaultdict(list)
    )

    def add(self, binding: _Binding, subjects: Iterable[Subject], namespace: str) -> None:
        position = len(self.bindings)
        self.bindings.append(binding)
        for index, subject in enumerate(subjects):
            if subject.kind == "User":
                self.users[subject.name].append((position, index))
            elif subject.kind == "Group":
                self.groups[subject.name].append((position, index))
            else:
                sa_namespace = subject.namespace or namespace
                if sa_namespace:
                    username = service_account_username(sa_namespace, subject.name)
                    self.users[username].append((position, index))

    def applicable(self, user: UserInfo) -> list[tuple[_Binding, str]]:
        """Bindings that apply to `user`, in order, each with its first matching subject."""
        first: dict[int, int] = {}
        hits = list(self.users.get(user.name, ()))
        for group in user.groups:
            hits.extend(self.groups.get(group, ()))
        for position, index in hits:
            if index < first.get(position, len(self.bindings[position].subjects)):
                first[position] = index
        return [
            (self.bindings[position], self.bindings[position].subjects[first[position]])
            for position in sorted(first)
        ]


def _describe_subject(subject: Subject, binding_namespace: str) -> str:
    if subject.kind == "ServiceAccount":
        namespace = subject.namespace or binding_namespace
        return f"{subject.kind} {go_quote(f'{subject.name}/{namespace}')}"
    return f"{subject.kind} {go_quote(subject.name)}"


def _not_found(kind: str, name: str) -> str:
    return f"{kind.lower()}.{RBAC_GROUP} {go_quote(name)} not found"


def _aggregate_errors(errors: list[str]) -> str:
    unique = list(dict.fromkeys(errors))
    if len(unique) == 1:
        return unique[0]
    return "[" + ", ".join(unique) + "]"


class RBACAuthorizer:
    """Decides requests from Roles, ClusterRoles and their bindings. Pure: no I/O."""

    def __init__(
        self,
        roles: Iterable[Role] = (),
        cluster_roles: Iterable[ClusterRole] = (),
        role_bindings: Iterable[RoleBinding] = (),
        cluster_role_bindings: Iterable[ClusterRoleBinding] = (),
    ) -> None:
        self._cluster_rules = effective_cluster_role_rules(cluster_roles)
        self._role_rules: dict[tuple[str, str], tuple[CompiledRule, ...]] = {}
        for role in roles:
            key = (role.metadata.namespace or "", role.metadata.name)
            compiled = (CompiledRule.of(rule) for rule in role.rules)
            self._role_rules[key] = tuple(dict.fromkeys(compiled))

        self._cluster = _Scope()
        for crb in cluster_role_bindings:
            self._cluster.add(self._resolve(crb, ""), crb.subjects, "")
        self._namespaces: defaultdict[str, _Scope] = defaultdict(_Scope)
        for rb in role_bindings:
            namespace = rb.metadata.namespace or ""
            self._namespaces[namespace].add(self._resolve(rb, namespace), rb.subjects, namespace)

    @classmethod
    def from_objects(cls, objects: Iterable[object]) -> RBACAuthorizer:
        """An evaluator of the RBAC objects among `objects` (other kinds are ignored)."""
        items = list(objects)
        return cls(
            roles=[o for o in items if isinstance(o, Role)],
            cluster_roles=[o for o in items if isinstance(o, ClusterRole)],
            role_bindings=[o for o in items if isinstance(o, RoleBinding)],
            cluster_role_bindings=[o for o in items if isinstance(o, ClusterRoleBinding)],
        )

    def _resolve(self, binding: RoleBinding | ClusterRoleBinding, namespace: str) -> _Binding:
        ref = binding.role_ref
        bound = f"{binding.metadata.name}/{namespace}" if namespace else binding.metadata.name
        description = f"{binding.kind} {go_quote(bound)} of {ref.kind} {go_quote(ref.name)}"
        subjects = tuple(_describe_subject(s, namespace) for s in binding.subjects)
        if ref.kind == "ClusterRole":
            rules = self._cluster_rules.get(ref.name)
        else:
            rules = self._role_rules.get((namespace, ref.name)) if namespace else None
        if rules is None:
            return _Binding(description, subjects, error=_not_found(ref.kind, ref.name))
        return _Binding(description, subjects, rules=rules)

    def authorize(self, user: UserInfo, attrs: Attributes) -> Decision:
        """Allowed if some binding that applies to `user` has a rule allowing `attrs`."""
        scopes = [self._cluster]
        if attrs.namespace and attrs.namespace in self._namespaces:
            scopes.append(self._namespaces[attrs.namespace])
        errors: list[str] = []
        for scope in scopes:
            for binding, subject in scope.applicable(user):
                if binding.error:
                    errors.append(binding.error)
                elif any(rule.allows(attrs) for rule in binding.rules):
                    return Decision.allow(f"RBAC: allowed by {binding.description} to {subject}")
        if errors:
            return Decision.deny(f"RBAC: {_aggregate_errors(errors)}")
        return Decision.deny()


__all__ = ["RBACAuthorizer"]
