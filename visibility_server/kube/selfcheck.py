"""The delegated-auth self-check (docs/cluster.md#self-check).

At startup and every 5 minutes, SelfSubjectAccessReviews (every authenticated identity
may create them, through `system:basic-user`) ask whether each identity may make the calls
it is used for. A SelfSubjectAccessReview answers for whoever sends it, so each one is sent
with the credentials of the client that makes those calls (`Checked.caller`):

* the authorization client (`--authorization-kubeconfig`, else the main one): `create`
  `subjectaccessreviews.authorization.k8s.io`;
* the authentication client (`--authentication-kubeconfig`, else the main one): `create`
  `tokenreviews.authentication.k8s.io`, and `get`, `list`, `watch` on the ConfigMap
  `kube-system/extension-apiserver-authentication` unless `--authentication-skip-lookup`.

The answer sets `queuescope_delegated_auth_permitted{resource}` (1 only when every verb
of that permission is allowed); a denial also logs an ERROR naming the identity and the
fix. It is deliberately not a readiness condition: an unready pod takes the APIService
down (stale discovery, stuck namespace deletion cluster-wide), which is far worse than
clear 500s on visibility requests.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from visibility_server.authn.config import CONFIGMAP_NAME, CONFIGMAP_NAMESPACE
from visibility_server.kube.calls import SELF_SUBJECT_ACCESS_REVIEW, ApiCaller, review_status
from visibility_server.kube.errors import DelegationError, auth_delegator_fix, auth_reader_fix
from visibility_server.kube.metrics import (
    CONFIGMAPS,
    SUBJECT_ACCESS_REVIEWS,
    TOKEN_REVIEWS,
    DelegatedAuthMetrics,
)
from visibility_server.kube.periodic import check_forever
from visibility_server.kube.retry import RetryPolicy

logger = logging.getLogger(__name__)

DEFAULT_INTERVAL: Final = 300.0
_REVIEWS_FAIL: Final = "every visibility request that needs it will fail with 500"


@dataclass(frozen=True, slots=True)
class Permission:
    """What one kind of call needs: every `resourceAttributes` in `attributes` allowed."""

    label: str  # the gauge's `resource` label
    what: str  # how messages name it
    attributes: tuple[Mapping[str, str], ...]
    consequence: str  # what goes wrong without it
    fix: Callable[[str], str]  # what to grant the named identity


def _create(resource: str, group: str) -> Permission:
    return Permission(
        resource,
        f"create {resource}.{group}",
        ({"verb": "create", "group": group, "resource": resource},),
        _REVIEWS_FAIL,
        auth_delegator_fix,
    )


CREATE_SUBJECT_ACCESS_REVIEWS: Final = _create(SUBJECT_ACCESS_REVIEWS, "authorization.k8s.io")
CREATE_TOKEN_REVIEWS: Final = _create(TOKEN_REVIEWS, "authentication.k8s.io")
READ_AUTHENTICATION_CONFIGMAP: Final = Permission(
    CONFIGMAPS,
    f"get, list and watch configmap {CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME}",
    tuple(
        {
            "verb": verb,
            "resource": "configmaps",
            "namespace": CONFIGMAP_NAMESPACE,
            "name": CONFIGMAP_NAME,
        }
        for verb in ("get", "list", "watch")
    ),
    "a restart fails, and front-proxy CA changes are not followed (or only polled)",
    auth_reader_fix,
)


@dataclass(frozen=True, slots=True)
class Checked:
    """The permissions one client needs, asked with that client's own credentials."""

    caller: ApiCaller
    permissions: tuple[Permission, ...]


def self_subject_access_review(attributes: Mapping[str, str]) -> dict[str, Any]:
    """ "May I do this?" as a SelfSubjectAccessReview body (empty fields left out)."""
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {k: v for k, v in attributes.items() if v}},
    }


class SelfCheck:
    def __init__(
        self,
        checked: Sequence[Checked],
        metrics: DelegatedAuthMetrics,
        *,
        interval: float = DEFAULT_INTERVAL,
        policy: RetryPolicy | None = None,
    ) -> None:
        self._checked = tuple(checked)
        self._metrics = metrics
        self._interval = interval
        self._policy = policy or RetryPolicy()

    async def check_once(self) -> dict[str, bool | None]:
        """Each permission's label: permitted, or None when kube-apiserver could not say
        (the gauge then keeps its value and a warning is logged)."""
        results: dict[str, bool | None] = {}
        for checked in self._checked:
            for permission in checked.permissions:
                results[permission.label] = await self._check(checked.caller, permission)
        return results

    async def run(self) -> None:
        """Check now, then every `interval` seconds, until cancelled."""
        await check_forever(
            self.check_once,
            lambda: self._policy.sleep(self._interval),
            log=logger,
            failure="the delegated-auth self-check failed unexpectedly",
        )

    async def _check(self, caller: ApiCaller, permission: Permission) -> bool | None:
        denied: list[str] = []
        reasons: list[str] = []
        unknown = False
        for attributes in permission.attributes:
            try:
                doc = await caller.create(
                    SELF_SUBJECT_ACCESS_REVIEW, self_subject_access_review(attributes)
                )
            except DelegationError as err:
                logger.warning(
                    "self-check of %s by %s failed: %s", permission.what, caller.who, err
                )
                unknown = True
                continue
            status = review_status(doc)
            if status.get("allowed") is not True or status.get("denied") is True:
                denied.append(attributes["verb"])
                if status.get("reason"):
                    reasons.append(str(status["reason"]))
        if unknown and not denied:
            return None
        permitted = not denied
        self._metrics.set_permitted(permission.label, permitted)
        if not permitted:
            logger.error(
                "self-check: %s may not %s (denied: %s; %s), so %s: %s",
                caller.who,
                permission.what,
                ", ".join(denied),
                "; ".join(reasons) or "no rule allows it",
                permission.consequence,
                permission.fix(caller.who),
            )
        return permitted


__all__ = [
    "CREATE_SUBJECT_ACCESS_REVIEWS",
    "CREATE_TOKEN_REVIEWS",
    "DEFAULT_INTERVAL",
    "READ_AUTHENTICATION_CONFIGMAP",
    "Checked",
    "Permission",
    "SelfCheck",
    "self_subject_access_review",
]
