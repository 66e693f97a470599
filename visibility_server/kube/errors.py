"""Why a delegated-auth call gave no answer, and what the caller gets
(docs/cluster.md#decision-pipeline).

The HTTP pipeline (`visibility_server.http.app_state`) answers an authorization error with a
`transient = True` attribute with 503 + `Retry-After: 1`, and any other with 500
`InternalError` whose cause is the exception's text. So these texts are what an operator
reads in the 500: each names the fix.
"""

from __future__ import annotations

from typing import Final

# How messages name the identity of a client built from the in-cluster configuration;
# a client from a kubeconfig flag is named after the flag (`KubeClient.identity`).
SERVICE_ACCOUNT: Final = "queuescope's ServiceAccount"


def _binding_fix(who: str, role: str, binding: str) -> str:
    """`bind WHO to ROLE`, and where the default install does that for the ServiceAccount."""
    if who == SERVICE_ACCOUNT:
        return f"bind {who} to {role} ({binding})"
    return f"bind {who} to {role} (as {binding} does for {SERVICE_ACCOUNT})"


def auth_delegator_fix(who: str = SERVICE_ACCOUNT) -> str:
    """What to grant `who` when kube-apiserver forbids it a SubjectAccessReview or a
    TokenReview."""
    return _binding_fix(
        who,
        'the ClusterRole "system:auth-delegator"',
        "ClusterRoleBinding queuescope-auth-delegator, manifests/rbac/auth-delegator.yaml",
    )


def auth_reader_fix(who: str = SERVICE_ACCOUNT) -> str:
    """What to grant `who` when kube-apiserver forbids it the authentication ConfigMap."""
    return _binding_fix(
        who,
        'the Role "extension-apiserver-authentication-reader" in kube-system',
        "RoleBinding queuescope-auth-reader, manifests/rbac/auth-reader.yaml",
    )


def credential_fix(who: str = SERVICE_ACCOUNT) -> str:
    """What to check when kube-apiserver rejects `who`'s own credentials twice."""
    if who == SERVICE_ACCOUNT:
        return f"the token of {who} is expired, revoked or unreadable (check the mounted token)"
    return f"the token of {who} is expired, revoked or unreadable (check that kubeconfig)"


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

    def __init__(self, what: str, who: str = SERVICE_ACCOUNT) -> None:
        super().__init__(
            f"kube-apiserver rejected queuescope's own credentials (401 Unauthorized) for "
            f"{what}: {credential_fix(who)}"
        )


class InvalidAnswerError(DelegationError):
    """An answer that cannot be used: both `allowed` and `denied`, not JSON, an
    unexpected status code."""


class UnavailableError(DelegationError):
    """Timeouts, connection errors, 429 or 5xx until the retry budget ran out."""

    transient = True


__all__ = [
    "SERVICE_ACCOUNT",
    "CredentialRejectedError",
    "DelegationError",
    "DelegationForbiddenError",
    "InvalidAnswerError",
    "UnavailableError",
    "auth_delegator_fix",
    "auth_reader_fix",
    "credential_fix",
]
