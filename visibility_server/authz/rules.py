"""One RBAC PolicyRule, compiled for matching with Kubernetes' rule semantics.

* verbs: `*` or the exact verb (case-sensitive);
* apiGroups: `*` or the exact group (`""` is the core group);
* resources: `*`, the exact `resource` (or `resource/subresource` when the request
  has a subresource), or `*/subresource`; `resource/*` is not special;
* resourceNames: empty allows every name; otherwise the request must name one of
  them (a request without a name, such as `list`, never matches);
* nonResourceURLs: `*`, the exact path, or a prefix written with a trailing `*`.

A resource request is matched against verbs, apiGroups, resources and
resourceNames; a non-resource request against verbs and nonResourceURLs.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.api.rbac import PolicyRule
from visibility_server.authz.attributes import Attributes

ALL = "*"


@dataclass(frozen=True, slots=True)
class CompiledRule:
    verbs: frozenset[str]
    groups: frozenset[str]
    resources: frozenset[str]
    names: frozenset[str]
    urls: frozenset[str]
    url_prefixes: tuple[str, ...]

    @classmethod
    def of(cls, rule: PolicyRule) -> CompiledRule:
        prefixes = sorted({u.rstrip(ALL) for u in rule.non_resource_urls if u.endswith(ALL)})
        return cls(
            verbs=frozenset(rule.verbs),
            groups=frozenset(rule.api_groups),
            resources=frozenset(rule.resources),
            names=frozenset(rule.resource_names),
            urls=frozenset(rule.non_resource_urls),
            url_prefixes=tuple(prefixes),
        )

    def _verb_matches(self, verb: str) -> bool:
        return ALL in self.verbs or verb in self.verbs

    def _resource_matches(self, attrs: Attributes) -> bool:
        resources = self.resources
        if ALL in resources or attrs.combined_resource in resources:
            return True
        return bool(attrs.subresource) and f"*/{attrs.subresource}" in resources

    def _name_matches(self, name: str) -> bool:
        if not self.names:
            return True
        return bool(name) and name in self.names

    def _url_matches(self, path: str) -> bool:
        if ALL in self.urls or path in self.urls:
            return True
        return any(path.startswith(prefix) for prefix in self.url_prefixes)

    def allows(self, attrs: Attributes) -> bool:
        """Whether this rule grants the request."""
        if not self._verb_matches(attrs.verb):
            return False
        if not attrs.resource_request:
            return self._url_matches(attrs.path)
        return (
            (ALL in self.groups or attrs.group in self.groups)
            and self._resource_matches(attrs)
            and self._name_matches(attrs.name)
        )


__all__ = ["ALL", "CompiledRule"]
