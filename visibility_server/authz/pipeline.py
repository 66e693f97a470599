"""The authorization decision pipeline (docs/cluster.md#decision-pipeline).

In order, the first step that decides wins:

1. always-allowed paths (`/healthz`, `/readyz`, `/livez` and one `/{check}` below
   each; entries ending in `*` are prefixes): allowed for anyone, anonymous
   included, whatever the verb. Only non-resource requests qualify.
2. members of `system:masters`: allowed, no review.
3. the authenticated short-cut: any identity but anonymous may `get` (or `head`)
   the static discovery and OpenAPI documents (`/apis`, `G`, `G/{v}`, each with or
   without one trailing slash; `/openapi/v2`, `/openapi/v3`, `/openapi/v3/*`;
   `/version`), which is what `system:discovery` and `system:public-info-viewer`
   grant every authenticated user.
4. the decision cache, then the backend (SubjectAccessReview, or the embedded RBAC
   evaluator). Allows and denials are cached (10 s each by default) in an LRU of
   8192 entries keyed by the canonical (user, attributes); a backend error
   propagates to every caller waiting for that review and is never cached;
   concurrent identical reviews share one backend call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from functools import partial
from typing import Final, Protocol

from visibility_server.authz.attributes import Attributes, AttributesKey
from visibility_server.authz.cache import CacheLimits, Clock, DecisionCache
from visibility_server.authz.decision import Decision
from visibility_server.authz.identity import MASTERS_GROUP, UserInfo, UserKey, is_anonymous
from visibility_server.authz.messages import forbidden_details, forbidden_message

VISIBILITY_GROUP: Final = "visibility.kueue.x-k8s.io"
DEFAULT_ALWAYS_ALLOW_PATHS: Final = ("/healthz", "/readyz", "/livez")

ALWAYS_ALLOWED_REASON: Final = "always-allowed path"
MASTERS_REASON: Final = f"member of {MASTERS_GROUP}"
SHORTCUT_REASON: Final = "public document for authenticated users"

_READ_VERBS: Final = frozenset({"get", "head"})
_OPENAPI_PATHS: Final = frozenset({"/openapi/v2", "/openapi/v3", "/version"})
_OPENAPI_V3_PREFIX: Final = "/openapi/v3/"

CacheKey = tuple[UserKey, AttributesKey]


class Backend(Protocol):
    """Where undecided requests go: a SubjectAccessReview client, or embedded RBAC.

    Raising means "no decision" (the caller answers 500/503); it is never cached.
    """

    async def review(self, user: UserInfo, attrs: Attributes) -> Decision: ...


class AlwaysAllowPaths:
    """`--authorization-always-allow-paths`: exact paths (plus one `/{check}` segment
    below them) and `*`-suffixed prefixes, compared without the leading slash."""

    def __init__(self, paths: Iterable[str]) -> None:
        exact: set[str] = set()
        prefixes: set[str] = set()
        for raw in paths:
            path = raw.removeprefix("/")
            if path.endswith("*"):
                prefixes.add(path[:-1])
            else:
                exact.add(path)
        self._exact = frozenset(exact)
        self._prefixes = tuple(sorted(prefixes))

    def __contains__(self, raw: object) -> bool:
        if not isinstance(raw, str):
            return False
        path = raw.removeprefix("/")
        if path in self._exact or any(path.startswith(p) for p in self._prefixes):
            return True
        parent, sep, check = path.rpartition("/")
        return bool(sep) and bool(check) and parent in self._exact


def is_public_document(path: str, group: str = VISIBILITY_GROUP) -> bool:
    """Whether `path` is one of the authenticated short-cut's documents."""
    if path in _OPENAPI_PATHS or path.startswith(_OPENAPI_V3_PREFIX):
        return True
    trimmed = path.removesuffix("/")
    if trimmed in ("/apis", f"/apis/{group}"):
        return True
    parent, _, version = trimmed.rpartition("/")
    return parent == f"/apis/{group}" and bool(version)


class Authorizer:
    """Steps 1 to 4 above in front of a `Backend`."""

    def __init__(
        self,
        backend: Backend,
        *,
        always_allow_paths: Iterable[str] = DEFAULT_ALWAYS_ALLOW_PATHS,
        group: str = VISIBILITY_GROUP,
        cache: CacheLimits | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self._backend = backend
        self._always_allowed = AlwaysAllowPaths(always_allow_paths)
        self._group = group
        self._cache = DecisionCache(clock, cache)
        self._inflight: dict[CacheKey, asyncio.Task[Decision]] = {}
        self._generation = 0

    def static_decision(self, user: UserInfo, attrs: Attributes) -> Decision | None:
        """Steps 1 to 3: a decision that needs no review, or None."""
        if not attrs.resource_request and attrs.path in self._always_allowed:
            return Decision.allow(ALWAYS_ALLOWED_REASON)
        if MASTERS_GROUP in user.groups:
            return Decision.allow(MASTERS_REASON)
        if (
            not attrs.resource_request
            and attrs.verb in _READ_VERBS
            and not is_anonymous(user)
            and is_public_document(attrs.path, self._group)
        ):
            return Decision.allow(SHORTCUT_REASON)
        return None

    async def authorize(self, user: UserInfo, attrs: Attributes) -> Decision:
        """The decision for `user` doing `attrs`; backend errors propagate."""
        decision = self.static_decision(user, attrs)
        if decision is not None:
            return decision
        key: CacheKey = (user.key, attrs.key)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.create_task(self._review(key, user, attrs, self._generation))
            task.add_done_callback(partial(self._settled, key))
            self._inflight[key] = task
        # Shielded: a caller that goes away does not cancel the review others await.
        return await asyncio.shield(task)

    async def _review(
        self, key: CacheKey, user: UserInfo, attrs: Attributes, generation: int
    ) -> Decision:
        try:
            decision = await self._backend.review(user, attrs)
        finally:
            # Synchronously with completion, so no later caller joins a finished review.
            if self._inflight.get(key) is asyncio.current_task():
                del self._inflight[key]
        if generation == self._generation:
            self._cache.put(key, decision)
        return decision

    def _settled(self, key: CacheKey, task: asyncio.Task[Decision]) -> None:
        # A review cancelled before it started never reached its `finally`.
        if self._inflight.get(key) is task:
            del self._inflight[key]
        # Every waiter may have gone; do not let asyncio report the error as unretrieved.
        if not task.cancelled():
            task.exception()

    def clear_cache(self) -> None:
        """Forget cached decisions (e.g. after the embedded RBAC objects changed).

        Reviews already under way still answer their current waiters, but their
        results are not cached and later callers start fresh reviews.
        """
        self._generation += 1
        self._inflight.clear()
        self._cache.clear()

    @property
    def cached_decisions(self) -> int:
        return len(self._cache)


__all__ = [
    "ALWAYS_ALLOWED_REASON",
    "DEFAULT_ALWAYS_ALLOW_PATHS",
    "MASTERS_REASON",
    "SHORTCUT_REASON",
    "VISIBILITY_GROUP",
    "AlwaysAllowPaths",
    "Authorizer",
    "Backend",
    "forbidden_details",
    "forbidden_message",
    "is_public_document",
]
