"""The bearer-token authenticator's reviewer (docs/cluster.md#authenticator-chain): one TokenReview
per token that `authn.chain.TokenCache` has not seen in the last 10 s.

* `status.authenticated: true`: the user (`username`, `uid`, `groups`, `extra`);
* `status.authenticated: false`: None, and the chain answers 401 `invalid bearer token`;
* unreachable, timing out, 429, 5xx (after the retries): `AuthenticationUnavailable`,
  so 503 with `Retry-After: 1`;
* 403 (no `system:auth-delegator`), 401 twice: the `calls` errors, so 500 naming the fix.

The token goes only into the request body. Neither it nor kube-apiserver's answer (which
echoes it in `spec.token`) is ever logged or kept; the cache keys on its SHA-256.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from visibility_server.authn.interface import AuthenticationUnavailable
from visibility_server.authz.identity import UserInfo
from visibility_server.kube.calls import TOKEN_REVIEW, Reviewer, review_status
from visibility_server.kube.errors import InvalidAnswerError, UnavailableError

TOKEN_REVIEW_API_VERSION: Final = "authentication.k8s.io/v1"


def token_review(token: str) -> dict[str, Any]:
    """The TokenReview request body: no audiences (kube-apiserver's own)."""
    return {
        "apiVersion": TOKEN_REVIEW_API_VERSION,
        "kind": "TokenReview",
        "spec": {"token": token},
    }


class TokenReviewClient(Reviewer):
    """`authn.chain.TokenReviewer` asking kube-apiserver."""

    async def review(self, token: str) -> UserInfo | None:
        try:
            doc = await self._calls.create(TOKEN_REVIEW, token_review(token))
        except UnavailableError as err:
            raise AuthenticationUnavailable(str(err)) from None
        status = review_status(doc)
        if status.get("authenticated") is not True:
            return None
        return _user(status.get("user"))


def _user(raw: object) -> UserInfo:
    if not isinstance(raw, Mapping):
        raise InvalidAnswerError("kube-apiserver's TokenReview says authenticated but has no user")
    username = raw.get("username")
    if not isinstance(username, str) or not username:
        raise InvalidAnswerError(
            "kube-apiserver's TokenReview says authenticated but has no username"
        )
    uid = raw.get("uid")
    groups = raw.get("groups")
    extra = raw.get("extra")
    return UserInfo(
        username,
        uid=uid if isinstance(uid, str) else "",
        groups=tuple(g for g in groups if isinstance(g, str)) if isinstance(groups, list) else (),
        extra={
            key: tuple(v for v in values if isinstance(v, str))
            for key, values in extra.items()
            if isinstance(key, str) and isinstance(values, list)
        }
        if isinstance(extra, Mapping)
        else {},
    )


__all__ = ["TOKEN_REVIEW_API_VERSION", "TokenReviewClient", "token_review"]
