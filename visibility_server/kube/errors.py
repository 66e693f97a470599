"""Why a delegated-auth call gave no answer, and what the caller gets (cluster.md §4.2).

The HTTP pipeline (`visibility_server.http.server`) answers an authorization error with a
`transient = True` attribute with 503 + `Retry-After: 1`, and any other with 500
`InternalError` whose cause is the exception's text. So these texts are what an operator
reads in the 500: each names the fix.
"""

from __future__ import annotations

from typing import Final

AUTH_DELEGATOR_FIX: Final = (
    'bind queuescope\'s ServiceAccount to the ClusterRole "system:auth-delegator" '
    "(ClusterRoleBinding queuescope-auth-delegator, manifests/rbac/auth-delegator.yaml)"
)
AUTH_READER_FIX: Final = (
    "bind queuescope's ServiceAccount to the Role "
    '"extension-apiserver-authentication-reader" in kube-system '
    "(RoleBinding queuescope-auth-reader, manifests/rbac/auth-reader.yaml)"
)
CREDENTIAL_FIX: Final = (
    "its ServiceAccount token is expired, revoked or unreadable "
    "(check the mounted token and --authorization-kubeconfig/--authentication-kubeconfig)"
)


class DelegationError(Exception):
    """A review or read that produced no answer. `transient` is what the HTTP pipeline
    reads to choose 503 (try again) over 500 (misconfiguration)."""

    transient: bool = False


class DelegationForbiddenError(DelegationError):
    """kube-apiserver answered 403: our identity lacks the RBAC grant named by `fix`.
    Never retried, never cached."""

    def __init__(self, what: str, fix: str, detail: str) -> None:
        super().__init__(f"kube-apiserver forbids queuescope access to {what} (403): {fix}")
        self.what = what
        self.detail = detail


class CredentialRejectedError(DelegationError):
    """kube-apiserver answered 401 twice, once after the token was re-read."""

    def __init__(self, what: str) -> None:
        super().__init__(
            f"kube-apiserver rejected queuescope's own credentials (401 Unauthorized) for "
            f"{what}: {CREDENTIAL_FIX}"
        )


class InvalidAnswerError(DelegationError):
    """An answer that cannot be used: both `allowed` and `denied`, not JSON, an
    unexpected status code."""


class UnavailableError(DelegationError):
    """Timeouts, connection errors, 429 or 5xx until the retry budget ran out."""

    transient = True


__all__ = [
    "AUTH_DELEGATOR_FIX",
    "AUTH_READER_FIX",
    "CREDENTIAL_FIX",
    "CredentialRejectedError",
    "DelegationError",
    "DelegationForbiddenError",
    "InvalidAnswerError",
    "UnavailableError",
]
