"""The `serve --embedded` backend: RBAC objects evaluated in process
(docs/cluster.md#embedded-mode)."""

from __future__ import annotations

from visibility_server.authz.attributes import Attributes
from visibility_server.authz.decision import Decision
from visibility_server.authz.identity import UserInfo, is_anonymous
from visibility_server.authz.rbac import RBACAuthorizer


class EmbeddedBackend:
    """A `Backend` answering from an `RBACAuthorizer`.

    Anonymous callers are denied whatever the RBAC objects say (embedded mode gives
    them the always-allowed health paths only) unless `allow_anonymous` is set.
    """

    def __init__(self, rbac: RBACAuthorizer, *, allow_anonymous: bool = False) -> None:
        self._rbac = rbac
        self._allow_anonymous = allow_anonymous

    @property
    def rbac(self) -> RBACAuthorizer:
        return self._rbac

    def replace(self, rbac: RBACAuthorizer) -> None:
        """Evaluate new RBAC objects from now on (clear the Authorizer's cache too)."""
        self._rbac = rbac

    async def review(self, user: UserInfo, attrs: Attributes) -> Decision:
        if is_anonymous(user) and not self._allow_anonymous:
            return Decision.deny()
        return self._rbac.authorize(user, attrs)


__all__ = ["EmbeddedBackend"]
