from __future__ import annotations

from types import MappingProxyType

import pytest

from visibility_server.authz.identity import (
    ANONYMOUS,
    UserInfo,
    authenticated_user,
    is_anonymous,
    service_account_user,
    service_account_username,
    split_service_account_username,
    with_authenticated_group,
)


def test_anonymous() -> None:
    assert ANONYMOUS.name == "system:anonymous"
    assert ANONYMOUS.groups == ("system:unauthenticated",)
    assert is_anonymous(ANONYMOUS)
    assert with_authenticated_group(ANONYMOUS) is ANONYMOUS


def test_authenticated_group_appended_once() -> None:
    alice = with_authenticated_group(UserInfo("alice", groups=("devs",)))
    assert alice.groups == ("devs", "system:authenticated")
    assert with_authenticated_group(alice) is alice
    assert not is_anonymous(alice)


def test_unauthenticated_group_is_not_upgraded() -> None:
    odd = UserInfo("bob", groups=("system:unauthenticated",))
    assert with_authenticated_group(odd) is odd
    assert is_anonymous(odd)


def test_background_identity_without_groups_gets_authenticated() -> None:
    assert authenticated_user("system:aggregator").groups == ("system:authenticated",)


def test_user_info_is_frozen_hashable_and_normalised() -> None:
    a = UserInfo("alice", "u1", ("g",), {"k": ("1", "2")})
    b = UserInfo("alice", "u1", ("g",), {"k": ("1", "2")})
    assert a == b
    assert hash(a) == hash(b)
    assert isinstance(a.extra, MappingProxyType)
    with pytest.raises(AttributeError):
        a.name = "eve"  # type: ignore[misc]
    extra_from_lists = authenticated_user("alice", extra={"k": ["1", "2"]})
    assert extra_from_lists.extra["k"] == ("1", "2")


def test_key_is_independent_of_extra_order() -> None:
    a = UserInfo("u", extra={"a": ("1",), "b": ("2",)})
    b = UserInfo("u", extra={"b": ("2",), "a": ("1",)})
    assert a.key == b.key


def test_service_accounts() -> None:
    assert service_account_username("ns", "sa") == "system:serviceaccount:ns:sa"
    assert split_service_account_username("system:serviceaccount:ns:sa") == ("ns", "sa")
    assert split_service_account_username("system:serviceaccount:ns") is None
    assert split_service_account_username("alice") is None
    sa = service_account_user("ns", "sa")
    assert sa.groups == (
        "system:serviceaccounts",
        "system:serviceaccounts:ns",
        "system:authenticated",
    )
