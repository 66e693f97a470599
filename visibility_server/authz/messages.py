"""kube-apiserver's 403 Forbidden message and details (docs/visibility-api.md#errors).

The message is built as kube-apiserver builds it: an inner sentence
(`User "u" cannot <verb> resource "<res>[/<sub>]" in API group "<g>" at the cluster
scope` / `in the namespace "<ns>"`, or `User "u" cannot <verb> path "<path>"`) with
`&`, `<`, `>` HTML-escaped, then `: <reason>` when the authorizer gave a reason, all
wrapped by `NewForbidden`: `<resource>.<group> "<name>" is forbidden: ...`, without the
name part when there is no name, or `forbidden: ...` when there is no resource.
Quoted values use Go's `%q`.
"""

from __future__ import annotations

from visibility_server.authz.attributes import Attributes
from visibility_server.authz.goquote import go_quote
from visibility_server.authz.identity import UserInfo

_HTML_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def _sentence(user: UserInfo, attrs: Attributes) -> str:
    who = f"User {go_quote(user.name)} cannot {attrs.verb}"
    if not attrs.resource_request:
        return f"{who} path {go_quote(attrs.path)}"
    what = (
        f"{who} resource {go_quote(attrs.combined_resource)} in API group {go_quote(attrs.group)}"
    )
    if attrs.namespace:
        return f"{what} in the namespace {go_quote(attrs.namespace)}"
    return f"{what} at the cluster scope"


def qualified_resource(attrs: Attributes) -> str:
    """`<resource>.<group>`, or `<resource>` for the core group (Go's GroupResource.String)."""
    if not attrs.group:
        return attrs.resource
    return f"{attrs.resource}.{attrs.group}"


def forbidden_message(user: UserInfo, attrs: Attributes, reason: str = "") -> str:
    """The `message` of the 403 Status kube-apiserver would send for this denial."""
    inner = _sentence(user, attrs).translate(_HTML_ESCAPES)
    if reason:
        inner = f"{inner}: {reason}"
    if not attrs.group and not attrs.resource:
        return f"forbidden: {inner}"
    if not attrs.name:
        return f"{qualified_resource(attrs)} is forbidden: {inner}"
    return f"{qualified_resource(attrs)} {go_quote(attrs.name)} is forbidden: {inner}"


def forbidden_details(attrs: Attributes) -> dict[str, str]:
    """The 403 Status `details`: name, group and plural resource as `kind`, empty ones out."""
    fields = (("name", attrs.name), ("group", attrs.group), ("kind", attrs.resource))
    return {key: value for key, value in fields if value}


__all__ = ["forbidden_details", "forbidden_message", "qualified_resource"]
