"""Authorization for the visibility server (docs/cluster.md#authorization).

`identity` (who), `attributes` (what, as a SubjectAccessReview would carry it),
`rbac` (embedded evaluation of RBAC objects), `pipeline` (the decision pipeline in
front of a SAR or embedded backend) and `messages` (kube-apiserver's 403 wording).
"""

from __future__ import annotations

from visibility_server.authz.attributes import (
    Attributes,
    request_attributes,
    subject_access_review,
)
from visibility_server.authz.decision import Decision
from visibility_server.authz.embedded import EmbeddedBackend
from visibility_server.authz.identity import (
    ANONYMOUS,
    UserInfo,
    authenticated_user,
    is_anonymous,
    service_account_user,
    with_authenticated_group,
)
from visibility_server.authz.messages import forbidden_details, forbidden_message
from visibility_server.authz.pipeline import Authorizer, Backend
from visibility_server.authz.rbac import RBACAuthorizer

__all__ = [
    "ANONYMOUS",
    "Attributes",
    "Authorizer",
    "Backend",
    "Decision",
    "EmbeddedBackend",
    "RBACAuthorizer",
    "UserInfo",
    "authenticated_user",
    "forbidden_details",
    "forbidden_message",
    "is_anonymous",
    "request_attributes",
    "service_account_user",
    "subject_access_review",
    "with_authenticated_group",
]
