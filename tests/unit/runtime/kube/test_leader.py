"""Lease leader election on the in-memory API server, with injected monotonic and wall
clocks: create, renew, take over only after a lease duration of observed no-change,
empty holder = free, 409 = lost race, renew deadline, release."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from scheduler.kubeapi.errors import Json, KubeError
from scheduler.runtime.kube.leader import (
    ElectionClocks,
    LeaderElector,
    LeaseRef,
    LeaseTiming,
    micro_time,
    new_identity,
)
from scheduler.runtime.kube.resources import LEASES
from tests.unit.runtime.kube.fakes import FakeKube, status_error, until

NS, NAME = "queuescope-system", "queuescope-controller-leader"
KEY = f"{NS}/{NAME}"
PATH = LEASES.item(NAME, NS)


class Clocks:
    """One monotonic and one wall clock per replica: they need not agree."""

    def __init__(self, wall: datetime) -> None:
        self.now = 1000.0
        self.wall = wall

    def monotonic(self) -> float:
        return self.now

    def wall_clock(self) -> datetime:
        return self.wall

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.wall += timedelta(seconds=seconds)


T0 = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)


def elector(fake: FakeKube, identity: str, clocks: Clocks, **kw: float) -> LeaderElector:
    return LeaderElector(
        fake.rest,
        lease=LeaseRef(NS, NAME),
        identity=identity,
        timing=LeaseTiming(**kw),
        clocks=ElectionClocks(clocks.monotonic, clocks.wall_clock),
    )


def lease(fake: FakeKube) -> Json:
    found = fake.stored(LEASES, KEY)
    assert found is not None
    return found["spec"]  # type: ignore[no-any-return]


def test_identity_and_micro_time_formats() -> None:
    assert micro_time(datetime(2025, 1, 2, 3, 4, 5, 6789, tzinfo=UTC)) == (
        "2025-01-02T03:04:05.006789Z"
    )
    tz = datetime(2025, 1, 2, 5, 4, 5, tzinfo=UTC).astimezone(timezone(timedelta(hours=2)))
    assert micro_time(tz) == "2025-01-02T05:04:05.000000Z"
    assert re.fullmatch(r"pod-7_[0-9a-f-]{36}", new_identity("pod-7"))


async def test_creates_the_lease_when_absent_and_renews_it() -> None:
    fake, clocks = FakeKube(), Clocks(T0)
    a = elector(fake, "a", clocks)
    assert await a.try_acquire_or_renew()
    assert a.leading and a.transitions == 1 and a.changed.is_set()
    assert fake.calls[-1] == ("POST", LEASES.collection(NS))
    assert lease(fake) == {
        "holderIdentity": "a",
        "leaseDurationSeconds": 15,
        "renewTime": "2025-03-01T12:00:00.000000Z",
        "acquireTime": "2025-03-01T12:00:00.000000Z",
        "leaseTransitions": 0,
    }
    read_rv = fake.stored(LEASES, KEY)["metadata"]["resourceVersion"]  # type: ignore[index]
    clocks.advance(2)
    assert await a.try_acquire_or_renew()
    [(method, path, body)] = fake.writes("PUT")
    assert (method, path) == ("PUT", PATH)
    assert body["metadata"]["resourceVersion"] == read_rv
    assert lease(fake)["renewTime"] == "2025-03-01T12:00:02.000000Z"
    assert lease(fake)["acquireTime"] == "2025-03-01T12:00:00.000000Z"
    assert lease(fake)["leaseTransitions"] == 0
    assert a.transitions == 1  # still the same term


async def test_takes_over_only_after_a_lease_duration_of_observed_silence() -> None:
    fake = FakeKube()
    a_clocks = Clocks(T0)
    # B's wall clock is a day ahead: A's renewTime looks ancient to it, which must
    # not matter.
    b_clocks = Clocks(T0 + timedelta(days=1))
    a, b = elector(fake, "a", a_clocks), elector(fake, "b", b_clocks)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()  # first sight starts B's timer
    b_clocks.advance(10)
    a_clocks.advance(10)
    assert await a.try_acquire_or_renew()  # A renews: B's timer restarts
    b_clocks.advance(1)
    assert not await b.try_acquire_or_renew()
    b_clocks.advance(15)  # exactly the duration since B saw the change: not yet
    assert not await b.try_acquire_or_renew()
    assert not b.leading and b.transitions == 0
    b_clocks.advance(0.5)
    assert await b.try_acquire_or_renew()
    spec = lease(fake)
    assert spec["holderIdentity"] == "b"
    assert spec["leaseTransitions"] == 1
    assert spec["acquireTime"] == micro_time(b_clocks.wall)
    # A learns it lost at its next round and steps down.
    a_clocks.advance(2)
    assert not await a.try_acquire_or_renew()
    assert not a.leading and a.transitions == 2


async def test_an_empty_holder_is_free_at_once() -> None:
    fake, clocks = FakeKube(), Clocks(T0)
    fake.seed(
        LEASES,
        {
            "metadata": {"name": NAME, "namespace": NS},
            "spec": {
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "renewTime": micro_time(T0),
                "leaseTransitions": 4,
            },
        },
    )
    b = elector(fake, "b", clocks)
    assert await b.try_acquire_or_renew()
    assert lease(fake)["leaseTransitions"] == 5
    assert lease(fake)["leaseDurationSeconds"] == 15


async def test_a_lost_race_is_a_409_not_an_error() -> None:
    fake, clocks = FakeKube(), Clocks(T0)
    a, b = elector(fake, "a", clocks), elector(fake, "b", clocks)
    # Both find no Lease; A creates it first.
    fake.fail("POST", LEASES.collection(NS), status_error(409, reason="AlreadyExists"))
    assert not await b.try_acquire_or_renew()
    assert not b.leading
    assert await a.try_acquire_or_renew()
    # A released it (and never campaigns again); B and C find it free, C writes
    # first, B's write carries a stale version.
    await a.release()
    c = elector(fake, "c", clocks)
    original_get = fake.get

    async def get_then_c_wins(path: str, query: object = None) -> Json:
        fake.get = original_get  # type: ignore[method-assign]
        read = await original_get(path)
        assert await c.try_acquire_or_renew()
        return read

    fake.get = get_then_c_wins  # type: ignore[method-assign]
    assert not await b.try_acquire_or_renew()
    assert not b.leading
    assert lease(fake)["holderIdentity"] == "c"


async def test_other_read_errors_are_raised() -> None:
    fake, clocks = FakeKube(), Clocks(T0)
    fake.fail("GET", PATH, status_error(500))
    with pytest.raises(KubeError):
        await elector(fake, "a", clocks).try_acquire_or_renew()


async def test_the_leader_steps_down_when_it_cannot_renew_within_the_deadline() -> None:
    fake, clocks = FakeKube(), Clocks(T0)
    a = elector(fake, "a", clocks, retry_period=0.0, renew_deadline=10.0)
    task = asyncio.create_task(a.run())
    try:
        await until(lambda: a.leading)
        fake.fail("GET", PATH, *(status_error(503) for _ in range(10_000)))
        clocks.advance(9)
        await until(lambda: len(fake.calls) > 20)
        assert a.leading  # failures inside the deadline are ridden out
        clocks.advance(2)
        await until(lambda: not a.leading)
        assert a.transitions == 2
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_a_renew_conflict_keeps_leading_until_the_deadline() -> None:
    fake, clocks = FakeKube(), Clocks(T0)
    a = elector(fake, "a", clocks)
    assert await a.try_acquire_or_renew()
    fake.fail("PUT", PATH, status_error(409))
    assert not await a.try_acquire_or_renew()
    assert a.leading


async def test_release_frees_the_lease_for_a_fast_takeover() -> None:
    fake, clocks = FakeKube(), Clocks(T0)
    a, b = elector(fake, "a", clocks), elector(fake, "b", clocks)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    clocks.advance(1)
    await a.release()
    assert not a.leading
    spec = lease(fake)
    assert spec["holderIdentity"] == ""
    assert spec["leaseDurationSeconds"] == 1
    assert spec["renewTime"] == micro_time(clocks.wall)
    # The release was a conditional write.
    _, _, body = fake.writes("PUT")[-1]
    assert body["metadata"]["resourceVersion"]
    assert await b.try_acquire_or_renew()  # no waiting for the old lease duration
    writes = len(fake.writes())
    await a.release()  # not leading: nothing to release
    assert len(fake.writes()) == writes


async def test_release_does_not_touch_a_lease_held_by_someone_else() -> None:
    fake, clocks = FakeKube(), Clocks(T0)
    a = elector(fake, "a", clocks)
    assert await a.try_acquire_or_renew()
    fake.server_update(LEASES, KEY, {"spec": {"holderIdentity": "b"}})
    await a.release()
    assert lease(fake)["holderIdentity"] == "b"
    assert not a.leading


async def test_a_failed_release_is_logged_not_raised() -> None:
    fake, clocks = FakeKube(), Clocks(T0)
    a = elector(fake, "a", clocks)
    assert await a.try_acquire_or_renew()
    fake.fail("GET", PATH, status_error(500))
    await a.release()
    assert not a.leading
    assert lease(fake)["holderIdentity"] == "a"  # expires the slow way


async def test_a_released_candidate_never_campaigns_again() -> None:
    # The process keeps running for its shutdown grace after the release; re-taking
    # the Lease then would leave it to expire (a whole lease duration leaderless).
    fake, clocks = FakeKube(), Clocks(T0)
    a = elector(fake, "a", clocks, retry_period=0.0)
    assert await a.try_acquire_or_renew()
    await a.release()
    writes = len(fake.writes())
    assert not await a.try_acquire_or_renew()
    assert len(fake.writes()) == writes
    assert lease(fake)["holderIdentity"] == ""
    await asyncio.wait_for(a.run(), 5)  # returns at once: no campaign
    assert not a.leading and len(fake.writes()) == writes


async def test_a_round_that_wins_after_the_release_does_not_lead() -> None:
    fake, clocks = FakeKube(), Clocks(T0)
    a = elector(fake, "a", clocks)
    assert await a.try_acquire_or_renew()
    original_get = fake.get

    async def read_then_release(path: str, query: object = None) -> Json:
        fake.get = original_get  # type: ignore[method-assign]
        read = await original_get(path)
        a.resigned = True  # SIGTERM: released while this round is between read and write
        return read

    fake.get = read_then_release  # type: ignore[method-assign]
    assert await a.try_acquire_or_renew()  # the renewal went through ...
    assert not a.leading  # ... but the released process does not lead on it
