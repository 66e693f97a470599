from __future__ import annotations

import asyncio

import pytest

from tests.unit.visibility_server.authz.builders import (
    VIS,
    cluster_binding,
    cluster_role,
    group,
    rule,
)
from visibility_server.authz.attributes import Attributes, request_attributes
from visibility_server.authz.cache import CacheLimits
from visibility_server.authz.decision import Decision
from visibility_server.authz.embedded import EmbeddedBackend
from visibility_server.authz.identity import ANONYMOUS, UserInfo, authenticated_user
from visibility_server.authz.pipeline import (
    ALWAYS_ALLOWED_REASON,
    MASTERS_REASON,
    SHORTCUT_REASON,
    Authorizer,
)
from visibility_server.authz.rbac import RBACAuthorizer

G = f"/apis/{VIS}"
CQ = f"{G}/v1beta2/clusterqueues/cq/pendingworkloads"
ALICE = authenticated_user("alice")
BOB = authenticated_user("bob")
DENY = Decision(False)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeBackend:
    """Counts reviews; answers `decision`, or raises `error`; can be held on a gate."""

    def __init__(self, decision: Decision = DENY) -> None:
        self.decision = decision
        self.error: Exception | None = None
        self.calls: list[tuple[UserInfo, Attributes]] = []
        self.gate: asyncio.Event | None = None

    async def review(self, user: UserInfo, attrs: Attributes) -> Decision:
        self.calls.append((user, attrs))
        if self.gate is not None:
            await self.gate.wait()
        if self.error is not None:
            raise self.error
        return self.decision


def make(decision: Decision = DENY, **kwargs: object) -> tuple[Authorizer, FakeBackend, FakeClock]:
    backend = FakeBackend(decision)
    clock = FakeClock()
    return Authorizer(backend, clock=clock, **kwargs), backend, clock  # type: ignore[arg-type]


async def settle() -> None:
    """Let every runnable task run until it blocks."""
    for _ in range(5):
        await asyncio.sleep(0)


def get(path: str, method: str = "GET") -> Attributes:
    return request_attributes(method, path)


@pytest.mark.parametrize(
    "path",
    ["/healthz", "/readyz", "/livez", "/healthz/ping", "/readyz/informer-sync", "/livez/log"],
)
@pytest.mark.parametrize("method", ["GET", "HEAD", "POST"])
async def test_health_paths_always_allowed_even_anonymous(path: str, method: str) -> None:
    authz, backend, _ = make()
    assert await authz.authorize(ANONYMOUS, get(path, method)) == Decision(
        True, ALWAYS_ALLOWED_REASON
    )
    assert backend.calls == []


@pytest.mark.parametrize("path", ["/healthzx", "/healthz/", "/healthz/a/b", "/metrics", "/"])
async def test_other_paths_are_not_always_allowed(path: str) -> None:
    authz, backend, _ = make()
    assert not (await authz.authorize(ANONYMOUS, get(path))).allowed
    assert len(backend.calls) == 1


async def test_configured_always_allow_paths() -> None:
    authz, _, _ = make(always_allow_paths=["/ping", "/debug/*"])
    assert (await authz.authorize(ANONYMOUS, get("/ping"))).allowed
    assert (await authz.authorize(ANONYMOUS, get("/debug/pprof/heap"))).allowed
    assert not (await authz.authorize(ANONYMOUS, get("/healthz"))).allowed


async def test_anonymous_goes_to_the_backend_and_is_denied_on_data_paths() -> None:
    authz, backend, _ = make()
    for path in (CQ, "/metrics", "/apis", f"{G}/v1beta2", "/openapi/v2", "/version"):
        assert not (await authz.authorize(ANONYMOUS, get(path))).allowed
    assert len(backend.calls) == 6


async def test_masters_bypass_the_backend() -> None:
    authz, backend, _ = make()
    aggregator = UserInfo("system:kube-aggregator", groups=("system:masters",))
    for attrs in (get(CQ), get("/metrics"), get(f"{G}/v1beta2/clusterqueues", "DELETE")):
        assert await authz.authorize(aggregator, attrs) == Decision(True, MASTERS_REASON)
    assert backend.calls == []


SHORTCUT_PATHS = [
    "/apis",
    "/apis/",
    G,
    f"{G}/",
    f"{G}/v1beta2",
    f"{G}/v1beta2/",
    f"{G}/v1beta1",
    "/openapi/v2",
    "/openapi/v3",
    f"/openapi/v3{G}/v1beta2",
    "/version",
]


@pytest.mark.parametrize("path", SHORTCUT_PATHS)
@pytest.mark.parametrize("method", ["GET", "HEAD"])
async def test_authenticated_shortcut(path: str, method: str) -> None:
    authz, backend, _ = make()
    for user in (ALICE, UserInfo("system:aggregator"), UserInfo("system:kube-aggregator")):
        assert await authz.authorize(user, get(path, method)) == Decision(True, SHORTCUT_REASON)
    assert backend.calls == []


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/apis"),
        ("DELETE", "/version"),
        ("GET", "/apis//"),
        ("GET", "/openapi/v2/"),
        ("GET", "/version/"),
        ("GET", "/openapi"),
        ("GET", "/apis/kueue.x-k8s.io"),
        ("GET", "/apis/kueue.x-k8s.io/v1beta1"),
        ("GET", "/api"),
        ("GET", "/metrics"),
        ("GET", f"{G}/v1beta2/clusterqueues"),
    ],
)
async def test_not_shortcut(method: str, path: str) -> None:
    authz, backend, _ = make()
    assert not (await authz.authorize(ALICE, get(path, method))).allowed
    assert len(backend.calls) == 1


async def test_cache_hit_does_not_call_the_backend() -> None:
    authz, backend, _ = make(Decision(True, "ok"))
    assert await authz.authorize(ALICE, get(CQ)) == Decision(True, "ok")
    assert await authz.authorize(ALICE, get(CQ, "HEAD")) == Decision(True, "ok")
    assert await authz.authorize(ALICE, get(CQ + "/")) == Decision(True, "ok")
    assert len(backend.calls) == 1
    assert authz.cached_decisions == 1
    await authz.authorize(BOB, get(CQ))
    await authz.authorize(ALICE, get(CQ.replace("v1beta2", "v1beta1")))
    assert len(backend.calls) == 3


async def test_user_extra_uid_and_groups_are_part_of_the_key() -> None:
    authz, backend, _ = make()
    await authz.authorize(UserInfo("alice"), get(CQ))
    await authz.authorize(UserInfo("alice", uid="1"), get(CQ))
    await authz.authorize(UserInfo("alice", groups=("g",)), get(CQ))
    await authz.authorize(UserInfo("alice", extra={"k": ("v",)}), get(CQ))
    await authz.authorize(UserInfo("alice", extra={"k": ("v",)}), get(CQ))
    assert len(backend.calls) == 4


@pytest.mark.parametrize("decision", [Decision(True), Decision(False, "nope")])
async def test_expiry_after_ten_seconds(decision: Decision) -> None:
    authz, backend, clock = make(decision)
    assert await authz.authorize(ALICE, get(CQ)) == decision
    clock.now += 9.999
    assert await authz.authorize(ALICE, get(CQ)) == decision
    assert len(backend.calls) == 1
    clock.now += 0.001
    assert await authz.authorize(ALICE, get(CQ)) == decision
    assert len(backend.calls) == 2


async def test_separate_ttls() -> None:
    limits = CacheLimits(allowed_ttl=30.0, denied_ttl=0.0)
    authz, backend, clock = make(Decision(True), cache=limits)
    await authz.authorize(ALICE, get(CQ))
    clock.now += 29
    await authz.authorize(ALICE, get(CQ))
    assert len(backend.calls) == 1
    backend.decision = Decision(False)
    await authz.authorize(BOB, get(CQ))
    await authz.authorize(BOB, get(CQ))
    assert len(backend.calls) == 3  # denials not cached with a zero TTL


async def test_lru_eviction() -> None:
    authz, backend, _ = make(Decision(True), cache=CacheLimits(max_entries=2))
    a, b, c = get(CQ), get("/metrics"), get(f"{G}/v1beta1/clusterqueues/x/pendingworkloads")
    await authz.authorize(ALICE, a)
    await authz.authorize(ALICE, b)
    await authz.authorize(ALICE, a)  # a is now the most recently used
    await authz.authorize(ALICE, c)  # evicts b
    assert len(backend.calls) == 3
    await authz.authorize(ALICE, a)
    assert len(backend.calls) == 3
    await authz.authorize(ALICE, b)
    assert len(backend.calls) == 4


async def test_errors_are_not_cached() -> None:
    authz, backend, _ = make(Decision(True))
    backend.error = RuntimeError("SAR unavailable")
    with pytest.raises(RuntimeError, match="SAR unavailable"):
        await authz.authorize(ALICE, get(CQ))
    assert authz.cached_decisions == 0
    backend.error = None
    assert (await authz.authorize(ALICE, get(CQ))).allowed
    assert len(backend.calls) == 2


async def test_concurrent_identical_reviews_are_coalesced() -> None:
    authz, backend, _ = make(Decision(True, "one"))
    backend.gate = asyncio.Event()
    waiters = [asyncio.create_task(authz.authorize(ALICE, get(CQ))) for _ in range(20)]
    other = asyncio.create_task(authz.authorize(BOB, get(CQ)))
    await settle()
    assert len(backend.calls) == 2
    backend.gate.set()
    results = await asyncio.gather(*waiters, other)
    assert results == [Decision(True, "one")] * 21
    assert len(backend.calls) == 2
    await authz.authorize(ALICE, get(CQ))
    assert len(backend.calls) == 2


async def test_coalesced_error_reaches_every_waiter_and_is_retried_later() -> None:
    authz, backend, _ = make(Decision(True))
    backend.gate = asyncio.Event()
    backend.error = ConnectionError("boom")
    waiters = [asyncio.create_task(authz.authorize(ALICE, get(CQ))) for _ in range(5)]
    await settle()
    backend.gate.set()
    results = await asyncio.gather(*waiters, return_exceptions=True)
    assert all(isinstance(r, ConnectionError) for r in results)
    assert len(backend.calls) == 1
    backend.error = None
    backend.gate = None
    assert (await authz.authorize(ALICE, get(CQ))).allowed
    assert len(backend.calls) == 2


async def test_a_cancelled_caller_does_not_cancel_the_shared_review() -> None:
    authz, backend, _ = make(Decision(True))
    backend.gate = asyncio.Event()
    first = asyncio.create_task(authz.authorize(ALICE, get(CQ)))
    second = asyncio.create_task(authz.authorize(ALICE, get(CQ)))
    await settle()
    first.cancel()
    await settle()
    backend.gate.set()
    assert (await second).allowed
    assert first.cancelled()
    assert len(backend.calls) == 1
    assert authz.cached_decisions == 1


async def test_clear_cache() -> None:
    authz, backend, _ = make(Decision(True))
    await authz.authorize(ALICE, get(CQ))
    authz.clear_cache()
    await authz.authorize(ALICE, get(CQ))
    assert len(backend.calls) == 2


async def test_clear_cache_during_a_review() -> None:
    authz, backend, _ = make(Decision(True))
    backend.gate = asyncio.Event()
    stale = asyncio.create_task(authz.authorize(ALICE, get(CQ)))
    await settle()
    assert len(backend.calls) == 1
    authz.clear_cache()
    fresh = asyncio.create_task(authz.authorize(ALICE, get(CQ)))
    await settle()
    assert len(backend.calls) == 2
    backend.gate.set()
    assert (await stale).allowed
    assert (await fresh).allowed
    assert authz.cached_decisions == 1
    await authz.authorize(ALICE, get(CQ))
    assert len(backend.calls) == 2


async def test_embedded_backend_denies_anonymous_whatever_rbac_says() -> None:
    everything = cluster_role("all", rule(["*"], ["*"], ["*"]), rule(["*"], urls=["*"]))
    rbac = RBACAuthorizer(
        cluster_roles=[everything],
        cluster_role_bindings=[
            cluster_binding("anon", "all", group("system:unauthenticated")),
            cluster_binding("authn", "all", group("system:authenticated")),
        ],
    )
    authz = Authorizer(EmbeddedBackend(rbac))
    assert not (await authz.authorize(ANONYMOUS, get(CQ))).allowed
    assert not (await authz.authorize(ANONYMOUS, get("/metrics"))).allowed
    assert (await authz.authorize(ANONYMOUS, get("/healthz"))).allowed
    assert (await authz.authorize(ALICE, get(CQ))).allowed
    permissive = Authorizer(EmbeddedBackend(rbac, allow_anonymous=True))
    assert (await permissive.authorize(ANONYMOUS, get(CQ))).allowed


async def test_embedded_backend_with_no_rbac_allows_only_the_admin() -> None:
    backend = EmbeddedBackend(RBACAuthorizer())
    authz = Authorizer(backend)
    admin = authenticated_user("admin", groups=["system:masters"])
    assert (await authz.authorize(admin, get(CQ))).allowed
    assert not (await authz.authorize(ALICE, get(CQ))).allowed
    assert not (await authz.authorize(ALICE, get("/metrics"))).allowed
    backend.replace(
        RBACAuthorizer(
            cluster_roles=[cluster_role("m", rule(["get"], urls=["/metrics"]))],
            cluster_role_bindings=[cluster_binding("m", "m", group("system:authenticated"))],
        )
    )
    authz.clear_cache()
    assert (await authz.authorize(ALICE, get("/metrics"))).allowed
