"""Authorization attributes of a request (docs/cluster.md#request-attributes).

`request_attributes` mirrors kube-apiserver's request-info rules, so the
SubjectAccessReview we send for a request is the one kube-apiserver would build
for it:

* the path is percent-decoded once, as a whole, then trimmed of leading and
  trailing slashes and split on `/` (so an encoded `%2F` separates segments, as in
  Go's `URL.Path` and in the ASGI `path` the router matches on);
* `/apis/<group>/<version>/...` (and the group-less `/api/<version>/...`) with at
  least one segment after the version is a resource request; everything else is a
  non-resource request whose verb is the lower-case method;
* `watch` or `proxy` right after the version is the verb itself (when something
  follows it); otherwise the verb comes from the method: GET/HEAD `get`, POST
  `create`, PUT `update`, PATCH `patch`, DELETE `delete`, any other method none;
* `namespaces/<ns>/<rest>` sets the namespace and continues with `<rest>`, unless
  `<rest>` is a namespace subresource (`status`, `finalize`), in which case the
  resource is the namespace itself;
* what remains is `<resource>[/<name>[/<subresource>]]` (`proxy` has no
  subresource); without a name, `get` becomes `list` and `delete` becomes
  `deletecollection`.

Query parameters are not read: the `watch=true` and `fieldSelector=metadata.name=`
refinements of collection requests do not apply to a server that serves no
collection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import unquote

from visibility_server.authz.identity import UserInfo

SAR_API_VERSION: Final = "authorization.k8s.io/v1"
SAR_KIND: Final = "SubjectAccessReview"

API_PREFIXES: Final = frozenset({"api", "apis"})
GROUPLESS_API_PREFIXES: Final = frozenset({"api"})
SPECIAL_VERBS: Final = frozenset({"proxy", "watch"})
SPECIAL_VERBS_WITHOUT_SUBRESOURCES: Final = frozenset({"proxy"})
NAMESPACE_SUBRESOURCES: Final = frozenset({"status", "finalize"})

METHOD_VERBS: Final = {
    "GET": "get",
    "HEAD": "get",
    "POST": "create",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}

AttributesKey = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Attributes:
    """What is being asked: a resource request or a non-resource request.

    Field names follow the SubjectAccessReview spec. `path` is the decoded URL path
    in both cases; it is part of the decision only for non-resource requests.
    """

    verb: str
    path: str
    resource_request: bool
    namespace: str = ""
    group: str = ""
    version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""

    @property
    def key(self) -> AttributesKey:
        """Canonical form of exactly what a SubjectAccessReview would carry."""
        if self.resource_request:
            return (
                "resource",
                self.verb,
                self.namespace,
                self.group,
                self.version,
                self.resource,
                self.subresource,
                self.name,
            )
        return ("nonResource", self.verb, self.path)

    @property
    def combined_resource(self) -> str:
        """`resource/subresource`, or `resource` alone: the name RBAC rules match."""
        if self.subresource:
            return f"{self.resource}/{self.subresource}"
        return self.resource

    def sar_attributes(self) -> dict[str, dict[str, str]]:
        """`{"resourceAttributes": ...}` or `{"nonResourceAttributes": ...}`, empty fields out."""
        if self.resource_request:
            fields = (
                ("namespace", self.namespace),
                ("verb", self.verb),
                ("group", self.group),
                ("version", self.version),
                ("resource", self.resource),
                ("subresource", self.subresource),
                ("name", self.name),
            )
            return {"resourceAttributes": {k: v for k, v in fields if v}}
        return {
            "nonResourceAttributes": {
                k: v for k, v in (("path", self.path), ("verb", self.verb)) if v
            }
        }

    def to_sar_spec(self, user: UserInfo) -> dict[str, Any]:
        """The SubjectAccessReview `spec` for `user` asking this, empty fields left out.

        Keys are in the order Go's encoder writes them: attributes, `user`,
        `groups`, `extra`, `uid`.
        """
        spec: dict[str, Any] = dict(self.sar_attributes())
        if user.name:
            spec["user"] = user.name
        if user.groups:
            spec["groups"] = list(user.groups)
        if user.extra:
            spec["extra"] = {key: list(values) for key, values in user.extra.items()}
        if user.uid:
            spec["uid"] = user.uid
        return spec


def subject_access_review(user: UserInfo, attrs: Attributes) -> dict[str, Any]:
    """The full SubjectAccessReview request body."""
    return {"apiVersion": SAR_API_VERSION, "kind": SAR_KIND, "spec": attrs.to_sar_spec(user)}


def _split(path: str) -> list[str]:
    trimmed = path.strip("/")
    return trimmed.split("/") if trimmed else []


def request_attributes(method: str, path: str) -> Attributes:
    """The attributes kube-apiserver would compute for `method` on `path`.

    `path` is the path as sent (percent-encoded, like ASGI's `raw_path`); anything
    from a `?` on is ignored. It is decoded exactly once here.
    """
    decoded = unquote(path.partition("?")[0])
    non_resource = Attributes(verb=method.lower(), path=decoded, resource_request=False)

    parts = _split(decoded)
    if len(parts) < 3 or parts[0] not in API_PREFIXES:
        return non_resource
    prefix, parts = parts[0], parts[1:]
    group = ""
    if prefix not in GROUPLESS_API_PREFIXES:
        if len(parts) < 3:
            return non_resource
        group, parts = parts[0], parts[1:]
    version, parts = parts[0], parts[1:]

    if parts[0] in SPECIAL_VERBS and len(parts) > 1:
        verb, parts = parts[0], parts[1:]
    else:
        verb = METHOD_VERBS.get(method.upper(), "")

    namespace = ""
    if parts[0] == "namespaces" and len(parts) > 1:
        namespace = parts[1]
        if len(parts) > 2 and parts[2] not in NAMESPACE_SUBRESOURCES:
            parts = parts[2:]

    resource = parts[0]
    name = parts[1] if len(parts) > 1 else ""
    subresource = ""
    if len(parts) > 2 and verb not in SPECIAL_VERBS_WITHOUT_SUBRESOURCES:
        subresource = parts[2]

    if not name and verb == "get":
        verb = "list"
    elif not name and verb == "delete":
        verb = "deletecollection"

    return Attributes(
        verb=verb,
        path=decoded,
        resource_request=True,
        namespace=namespace,
        group=group,
        version=version,
        resource=resource,
        subresource=subresource,
        name=name,
    )


__all__ = [
    "SAR_API_VERSION",
    "SAR_KIND",
    "Attributes",
    "AttributesKey",
    "request_attributes",
    "subject_access_review",
]
