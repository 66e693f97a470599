"""Calls to kube-apiserver with the outcome rules of docs/cluster.md#decision-pipeline: creating
reviews (SubjectAccessReview, TokenReview, SelfSubjectAccessReview) and reading the
authentication ConfigMap.

* 2xx with a JSON object: returned; 404, on a read that allows it: None;
* 403: `DelegationForbiddenError` naming the missing grant (`Endpoint.fix`), not retried;
* 401: the credential refresher re-reads our token and we try once more; a second 401 is
  `CredentialRejectedError`;
* timeout, connection error, 429, 5xx: retried on the `RetryPolicy`, then
  `UnavailableError` (503);
* any other status, or a body that is not a JSON object: `InvalidAnswerError` (500).

Reviews are `create`s of objects kube-apiserver does not store, so retrying one is safe.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Final

from scheduler.kubeapi.client import Call, KubeRest, Reply
from scheduler.kubeapi.errors import KubeError
from visibility_server.kube.errors import (
    SERVICE_ACCOUNT,
    CredentialRejectedError,
    DelegationForbiddenError,
    InvalidAnswerError,
    UnavailableError,
    auth_delegator_fix,
    auth_reader_fix,
)
from visibility_server.kube.metrics import (
    SUBJECT_ACCESS_REVIEWS,
    TOKEN_REVIEWS,
    DelegatedAuthMetrics,
)
from visibility_server.kube.retry import RetryPolicy
from visibility_server.kube.transport import (
    CredentialRefresher,
    KubeTransport,
    as_transport,
)

logger = logging.getLogger(__name__)

TOO_MANY_REQUESTS: Final = 429


@dataclass(frozen=True, slots=True)
class Endpoint:
    path: str
    what: str  # how messages name it: `<plural>.<group>`, or the object
    fix: Callable[[str], str]  # what to grant the named identity when kube-apiserver says 403
    metric_resource: str | None = None  # the `resource` label of the permitted gauge


SUBJECT_ACCESS_REVIEW: Final = Endpoint(
    "/apis/authorization.k8s.io/v1/subjectaccessreviews",
    "subjectaccessreviews.authorization.k8s.io",
    auth_delegator_fix,
    SUBJECT_ACCESS_REVIEWS,
)
TOKEN_REVIEW: Final = Endpoint(
    "/apis/authentication.k8s.io/v1/tokenreviews",
    "tokenreviews.authentication.k8s.io",
    auth_delegator_fix,
    TOKEN_REVIEWS,
)
SELF_SUBJECT_ACCESS_REVIEW: Final = Endpoint(
    "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
    "selfsubjectaccessreviews.authorization.k8s.io",
    lambda who: (
        f"{who} should have it, as every authenticated identity does, through the ClusterRole "
        '"system:basic-user"'
    ),
)


def configmap_endpoint(namespace: str, name: str) -> Endpoint:
    """A ConfigMap read; 403 means the `extension-apiserver-authentication-reader` grant."""
    return Endpoint(
        f"/api/v1/namespaces/{namespace}/configmaps/{name}",
        f"configmap {namespace}/{name}",
        auth_reader_fix,
    )


@dataclass(frozen=True, eq=False)
class ApiCaller:
    """One set of outcome rules for the SAR backend, the TokenReview client, the
    self-check and the ConfigMap reader. `who` names the identity the transport's
    credentials belong to in the errors that say what to grant it."""

    transport: KubeTransport
    _: KW_ONLY
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    refresh_credentials: CredentialRefresher | None = None
    metrics: DelegatedAuthMetrics | None = None
    who: str = SERVICE_ACCOUNT

    async def create(self, endpoint: Endpoint, body: dict[str, Any]) -> dict[str, Any]:
        """The created review as kube-apiserver returned it (its `status` filled in)."""
        doc = await self._call("POST", endpoint, body, missing_ok=False)
        assert doc is not None  # only a 404 with missing_ok gives None
        return doc

    async def get(self, endpoint: Endpoint) -> dict[str, Any] | None:
        """The object, or None when kube-apiserver says it does not exist."""
        return await self._call("GET", endpoint, None, missing_ok=True)

    async def _call(
        self, method: str, endpoint: Endpoint, body: dict[str, Any] | None, *, missing_ok: bool
    ) -> dict[str, Any] | None:
        schedule = self.policy.schedule()
        refreshed = False
        while True:
            timeout = schedule.attempt_timeout()
            try:
                response = await self.transport.request(
                    Call(method, endpoint.path, body=body, timeout=timeout)
                )
            except KubeError as err:
                problem = err.detail
            else:
                if response.ok:
                    return self._answered(endpoint, response)
                if response.status == 401 and not refreshed:
                    refreshed = True
                    if self.refresh_credentials is not None:
                        await self.refresh_credentials()
                    continue
                if response.status == 401:
                    raise CredentialRejectedError(endpoint.what, self.who)
                if response.status == 403:
                    raise self._forbidden(endpoint, response)
                if response.status == 404 and missing_ok:
                    return None
                if response.status != TOO_MANY_REQUESTS and response.status < 500:
                    raise InvalidAnswerError(
                        f"unexpected answer to a {endpoint.what} request: "
                        f"{response.status}: {response.message()}"
                    )
                problem = f"kube-apiserver answered {response.status}: {response.message()}"
            if not await schedule.pause():
                raise UnavailableError(
                    f"no answer for {endpoint.what} after {schedule.attempts} attempt(s): {problem}"
                )

    def record_permitted(self, resource: str | None, permitted: bool, detail: str = "") -> None:
        """Set the permitted gauge; a change to denied is logged at ERROR once."""
        if resource is None or self.metrics is None:
            return
        if self.metrics.set_permitted(resource, permitted) and not permitted:
            logger.error(
                "queuescope may not create %s (%s): %s",
                resource,
                detail or "denied",
                auth_delegator_fix(self.who),
            )

    def _answered(self, endpoint: Endpoint, response: Reply) -> dict[str, Any]:
        doc = response.json()
        if not isinstance(doc, dict):
            raise InvalidAnswerError(
                f"kube-apiserver's answer for {endpoint.what} is not a JSON object"
            )
        self.record_permitted(endpoint.metric_resource, True)
        return doc

    def _forbidden(self, endpoint: Endpoint, response: Reply) -> DelegationForbiddenError:
        detail = response.message()
        self.record_permitted(endpoint.metric_resource, False, detail)
        return DelegationForbiddenError(endpoint.what, endpoint.fix(self.who), detail)


def as_caller(api: KubeRest | KubeTransport | ApiCaller) -> ApiCaller:
    """`api` itself when it is an `ApiCaller`, else one with the default policy."""
    return api if isinstance(api, ApiCaller) else ApiCaller(as_transport(api))


class Reviewer:
    """Base of the SAR backend and the TokenReview client: built from a `KubeRest` or a
    transport (with a default `ApiCaller`), or from an `ApiCaller` it shares (as
    `DelegatedAuth` does, so that every call feeds one gauge)."""

    def __init__(self, api: KubeRest | KubeTransport | ApiCaller) -> None:
        self._calls = as_caller(api)


def review_status(doc: dict[str, Any]) -> dict[str, Any]:
    """A review's `status`, `{}` when absent or not an object."""
    status = doc.get("status")
    return status if isinstance(status, dict) else {}


__all__ = [
    "SELF_SUBJECT_ACCESS_REVIEW",
    "SUBJECT_ACCESS_REVIEW",
    "TOKEN_REVIEW",
    "ApiCaller",
    "Endpoint",
    "Reviewer",
    "configmap_endpoint",
    "review_status",
]
