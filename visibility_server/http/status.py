"""Kubernetes `Status` errors (docs/visibility-api.md#errors).

Every error leaves the server as a `Status` object whose keys are in the order Go's
encoder writes `metav1.Status`: kind, apiVersion, metadata, status, message, reason,
details, code. `details` is absent when Go would omit it (401, 400, 406) and `{}` when
Go sends an empty `StatusDetails` (path NotFound, 405, non-resource 403), which is why
it is a tri-state here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from visibility_server.authz.goquote import go_quote

VISIBILITY_GROUP: Final = "visibility.kueue.x-k8s.io"

NOT_FOUND_PATH_MESSAGE: Final = "the server could not find the requested resource"
METHOD_NOT_ALLOWED_MESSAGE: Final = (
    "the server does not allow this method on the requested resource"
)
NOT_ACCEPTABLE_MESSAGE: Final = (
    "only the following media types are accepted: "
    "application/json, application/yaml, application/json;as=Table;v=v1;g=meta.k8s.io"
)
TOO_MANY_REQUESTS_MESSAGE: Final = "too many requests, please try again later"
NOT_SYNCED_MESSAGE: Final = "the visibility cache has not completed its initial sync"
IMPERSONATION_MESSAGE: Final = (
    "impersonation is not supported by this server; send the request through kube-apiserver"
)
ALLOWED_METHODS: Final = "GET, HEAD"

# client-go retries 429 and 5xx answers carrying Retry-After by itself.
RETRY_AFTER_SECONDS: Final = 1


class StatusError(Exception):
    """An error answer: HTTP code, `reason`, `message`, optional `details`, extra headers."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: Mapping[str, Any] | None = None,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers

    def body(self) -> dict[str, Any]:
        """The Status object, keys in Go's order."""
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details is not None:
            status["details"] = dict(self.details)
        status["code"] = self.code
        return status


def _retry_after() -> tuple[tuple[str, str], ...]:
    return (("retry-after", str(RETRY_AFTER_SECONDS)),)


def bad_query_value(parameter: str, value: str) -> StatusError:
    # Go's %q, so a value with quotes or control characters reads as it does upstream.
    message = (
        f"invalid value {go_quote(value)} for query parameter {go_quote(parameter)}: "
        "must be a base-10 integer"
    )
    return StatusError(400, "BadRequest", message)


def unauthorized() -> StatusError:
    return StatusError(401, "Unauthorized", "Unauthorized")


def forbidden(message: str, details: Mapping[str, str]) -> StatusError:
    return StatusError(403, "Forbidden", message, details)


def impersonation_forbidden() -> StatusError:
    return StatusError(403, "Forbidden", IMPERSONATION_MESSAGE, {})


def path_not_found() -> StatusError:
    return StatusError(404, "NotFound", NOT_FOUND_PATH_MESSAGE, {})


def object_not_found(singular: str, name: str) -> StatusError:
    """Upstream's `NewNotFound`: `details.kind` is the lower-case singular resource."""
    message = f"{singular}.{VISIBILITY_GROUP} {go_quote(name)} not found"
    details = {"name": name, "group": VISIBILITY_GROUP, "kind": singular}
    return StatusError(404, "NotFound", message, details)


def method_not_allowed() -> StatusError:
    headers = (("allow", ALLOWED_METHODS),)
    return StatusError(405, "MethodNotAllowed", METHOD_NOT_ALLOWED_MESSAGE, {}, headers)


def not_acceptable() -> StatusError:
    return StatusError(406, "NotAcceptable", NOT_ACCEPTABLE_MESSAGE)


def too_many_requests() -> StatusError:
    details = {"retryAfterSeconds": RETRY_AFTER_SECONDS}
    return StatusError(429, "TooManyRequests", TOO_MANY_REQUESTS_MESSAGE, details, _retry_after())


def internal_error(cause: str) -> StatusError:
    message = f"Internal error occurred: {cause}"
    return StatusError(500, "InternalError", message, {"causes": [{"message": cause}]})


def service_unavailable(message: str) -> StatusError:
    details = {"retryAfterSeconds": RETRY_AFTER_SECONDS}
    return StatusError(503, "ServiceUnavailable", message, details, _retry_after())


def not_synced() -> StatusError:
    return service_unavailable(NOT_SYNCED_MESSAGE)


def authorization_unavailable(cause: str) -> StatusError:
    return service_unavailable(f"authorization is temporarily unavailable: {cause}")


def authentication_unavailable(cause: str) -> StatusError:
    return service_unavailable(f"authentication is temporarily unavailable: {cause}")
