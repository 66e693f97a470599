"""Who is asking: the authenticated identity (docs/cluster.md#authentication).

`UserInfo` is what every authenticator produces (front-proxy headers, client
certificate, TokenReview, anonymous) and what authorization consumes. It is
immutable and hashable, so it can be part of a decision-cache key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

ANONYMOUS_USER: Final = "system:anonymous"
AUTHENTICATED_GROUP: Final = "system:authenticated"
UNAUTHENTICATED_GROUP: Final = "system:unauthenticated"
MASTERS_GROUP: Final = "system:masters"
SERVICE_ACCOUNT_USER_PREFIX: Final = "system:serviceaccount:"
SERVICE_ACCOUNTS_GROUP: Final = "system:serviceaccounts"

ExtraKey = tuple[tuple[str, tuple[str, ...]], ...]
UserKey = tuple[str, str, tuple[str, ...], ExtraKey]


def _no_extra() -> Mapping[str, tuple[str, ...]]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class UserInfo:
    """An authenticated (or anonymous) identity: user, uid, groups and extra.

    Groups keep their order (it is what the authenticator saw); `extra` is frozen
    into a read-only mapping of tuples whatever mapping and sequences were passed.
    """

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=_no_extra)

    def __post_init__(self) -> None:
        object.__setattr__(self, "groups", tuple(self.groups))
        frozen = {key: tuple(values) for key, values in self.extra.items()}
        object.__setattr__(self, "extra", MappingProxyType(frozen))

    @property
    def key(self) -> UserKey:
        """A canonical, hashable form (extra sorted by key), for cache keys."""
        extra = tuple(sorted(self.extra.items()))
        return (self.name, self.uid, self.groups, extra)

    def __hash__(self) -> int:
        return hash(self.key)

    def in_group(self, group: str) -> bool:
        return group in self.groups


ANONYMOUS: Final = UserInfo(ANONYMOUS_USER, groups=(UNAUTHENTICATED_GROUP,))


def is_anonymous(user: UserInfo) -> bool:
    """`system:anonymous`, or anything carrying `system:unauthenticated`."""
    return user.name == ANONYMOUS_USER or UNAUTHENTICATED_GROUP in user.groups


def with_authenticated_group(user: UserInfo) -> UserInfo:
    """The identity as authorization sees it after a successful authentication
    (docs/cluster.md#authenticator-chain).

    `system:authenticated` is appended unless the user is `system:anonymous` or
    already carries `system:authenticated` or `system:unauthenticated`.
    """
    if user.name == ANONYMOUS_USER:
        return user
    if AUTHENTICATED_GROUP in user.groups or UNAUTHENTICATED_GROUP in user.groups:
        return user
    return UserInfo(user.name, user.uid, (*user.groups, AUTHENTICATED_GROUP), user.extra)


def authenticated_user(
    name: str,
    *,
    uid: str = "",
    groups: Iterable[str] = (),
    extra: Mapping[str, Iterable[str]] | None = None,
) -> UserInfo:
    """A `UserInfo` for an authenticated caller, with `system:authenticated` added."""
    frozen_extra = {key: tuple(values) for key, values in (extra or {}).items()}
    return with_authenticated_group(UserInfo(name, uid, tuple(groups), frozen_extra))


def service_account_username(namespace: str, name: str) -> str:
    """`system:serviceaccount:<namespace>:<name>`."""
    return f"{SERVICE_ACCOUNT_USER_PREFIX}{namespace}:{name}"


def split_service_account_username(username: str) -> tuple[str, str] | None:
    """(namespace, name) of a service-account username, or None for any other user."""
    if not username.startswith(SERVICE_ACCOUNT_USER_PREFIX):
        return None
    namespace, sep, name = username[len(SERVICE_ACCOUNT_USER_PREFIX) :].partition(":")
    if not sep or not namespace or not name or ":" in name:
        return None
    return namespace, name


def service_account_groups(namespace: str) -> tuple[str, str]:
    """The groups Kubernetes gives every service account of `namespace`."""
    return (SERVICE_ACCOUNTS_GROUP, f"{SERVICE_ACCOUNTS_GROUP}:{namespace}")


def service_account_user(namespace: str, name: str, *, uid: str = "") -> UserInfo:
    """A service account's identity as its token authenticates: user and SA groups."""
    return authenticated_user(
        service_account_username(namespace, name),
        uid=uid,
        groups=service_account_groups(namespace),
    )


__all__ = [
    "ANONYMOUS",
    "ANONYMOUS_USER",
    "AUTHENTICATED_GROUP",
    "MASTERS_GROUP",
    "SERVICE_ACCOUNTS_GROUP",
    "SERVICE_ACCOUNT_USER_PREFIX",
    "UNAUTHENTICATED_GROUP",
    "UserInfo",
    "UserKey",
    "authenticated_user",
    "is_anonymous",
    "service_account_groups",
    "service_account_user",
    "service_account_username",
    "split_service_account_username",
    "with_authenticated_group",
]
