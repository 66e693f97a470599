"""The delegated-auth self-check (cluster.md §4.3).

At startup and every 5 minutes, two SelfSubjectAccessReviews (every authenticated
identity may create them, through `system:basic-user`) ask whether our identity may
`create` `subjectaccessreviews.authorization.k8s.io` and
`tokenreviews.authentication.k8s.io`. The answer sets
`queuescope_delegated_auth_permitted{resource}`; a denial also logs an ERROR naming the
fix. It is deliberately not a readiness condition: an unready pod takes the APIService
down (stale discovery, stuck namespace deletion cluster-wide), which is far worse than
clear 500s on visibility requests.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from kubernetes_asyncio.client import ApiClient

from visibility_server.kube.calls import SELF_SUBJECT_ACCESS_REVIEW, ApiCaller, review_status
from visibility_server.kube.errors import AUTH_DELEGATOR_FIX, DelegationError
from visibility_server.kube.metrics import (
    SUBJECT_ACCESS_REVIEWS,
    TOKEN_REVIEWS,
    DelegatedAuthMetrics,
)
from visibility_server.kube.retry import RetryPolicy
from visibility_server.kube.transport import CredentialRefresher, KubeTransport, as_transport

logger = logging.getLogger(__name__)

DEFAULT_INTERVAL: Final = 300.0
# (gauge label, API group) of each review we must be allowed to create.
CHECKED: Final = (
    (SUBJECT_ACCESS_REVIEWS, "authorization.k8s.io"),
    (TOKEN_REVIEWS, "authentication.k8s.io"),
)


def self_subject_access_review(resource: str, group: str) -> dict[str, Any]:
    """ "May I create `<resource>.<group>`?" as a SelfSubjectAccessReview body."""
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "create", "group": group, "resource": resource}},
    }


class SelfCheck:
    def __init__(
        self,
        api: ApiClient | KubeTransport,
        metrics: DelegatedAuthMetrics,
        *,
        interval: float = DEFAULT_INTERVAL,
        policy: RetryPolicy | None = None,
        refresh_credentials: CredentialRefresher | None = None,
    ) -> None:
        self._caller = ApiCaller(
            as_transport(api), policy=policy, refresh_credentials=refresh_credentials
        )
        self._metrics = metrics
        self._interval = interval

    async def check_once(self) -> dict[str, bool | None]:
        """Each resource: permitted, or None when kube-apiserver could not say (the gauge
        then keeps its value and a warning is logged)."""
        results: dict[str, bool | None] = {}
        for resource, group in CHECKED:
            results[resource] = await self._check(resource, group)
        return results

    async def run(self) -> None:
        """Check now, then every `interval` seconds, until cancelled."""
        while True:
            try:
                await self.check_once()
            except Exception:
                # A bug here must not end the task, which lives as long as the server.
                logger.exception("the delegated-auth self-check failed unexpectedly")
            await self._caller.policy.sleep(self._interval)

    async def _check(self, resource: str, group: str) -> bool | None:
        try:
            doc = await self._caller.create(
                SELF_SUBJECT_ACCESS_REVIEW, self_subject_access_review(resource, group)
            )
        except DelegationError as err:
            logger.warning("self-check of %s.%s failed: %s", resource, group, err)
            return None
        status = review_status(doc)
        permitted = status.get("allowed") is True and status.get("denied") is not True
        self._metrics.set_permitted(resource, permitted)
        if not permitted:
            reason = status.get("reason") or "no rule allows it"
            logger.error(
                "self-check: queuescope may not create %s.%s (%s), so every visibility "
                "request that needs it will fail with 500: %s",
                resource,
                group,
                reason,
                AUTH_DELEGATOR_FIX,
            )
        return permitted


__all__ = ["CHECKED", "DEFAULT_INTERVAL", "SelfCheck", "self_subject_access_review"]
