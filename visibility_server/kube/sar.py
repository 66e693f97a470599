"""The cluster-mode authorization backend: a SubjectAccessReview per undecided request
(docs/cluster.md#request-attributes, #decision-pipeline).

It plugs into `visibility_server.authz.pipeline.Authorizer`, which owns the always-allowed
paths, `system:masters`, the authenticated short-cut, the decision cache and the
coalescing of identical reviews; this class only makes the call and reads the answer:

* `status.allowed: true`: allow (cached by the Authorizer);
* `allowed: false`, with or without `denied: true`: deny, so 403 with `status.reason`
  appended as kube-apiserver does (cached);
* `allowed` and `denied` both true: `InvalidAnswerError`, so 500, not cached.

Call failures follow `calls.ApiCaller` (403 → 500 naming `system:auth-delegator`,
401 → token re-read and one retry, unreachable → retries then 503); the Authorizer never
caches an exception.
"""

from __future__ import annotations

from visibility_server.authz.attributes import Attributes, subject_access_review
from visibility_server.authz.decision import Decision
from visibility_server.authz.identity import UserInfo
from visibility_server.kube.calls import SUBJECT_ACCESS_REVIEW, Reviewer, review_status
from visibility_server.kube.errors import InvalidAnswerError


class SubjectAccessReviewBackend(Reviewer):
    """An authz `Backend` asking kube-apiserver (`POST .../subjectaccessreviews`)."""

    async def review(self, user: UserInfo, attrs: Attributes) -> Decision:
        doc = await self._calls.create(SUBJECT_ACCESS_REVIEW, subject_access_review(user, attrs))
        status = review_status(doc)
        allowed = status.get("allowed") is True
        denied = status.get("denied") is True
        reason = status.get("reason")
        reason = reason if isinstance(reason, str) else ""
        if allowed and denied:
            raise InvalidAnswerError(
                "kube-apiserver's SubjectAccessReview answer is both allowed and denied"
            )
        return Decision.allow(reason) if allowed else Decision.deny(reason)


__all__ = ["SubjectAccessReviewBackend"]
