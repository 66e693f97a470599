"""The shared write token bucket, on an injected clock whose sleeps advance it."""

from __future__ import annotations

import asyncio

import pytest

from scheduler.runtime.kube.ratelimit import TokenBucket


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


def bucket(qps: float, burst: int, clock: Clock) -> TokenBucket:
    return TokenBucket(qps, burst, clock=clock, sleep=clock.sleep)


async def test_burst_is_free_then_one_token_per_interval() -> None:
    clock = Clock()
    limiter = bucket(10, 3, clock)
    for _ in range(3):
        await limiter.acquire()
    assert clock.sleeps == []
    await limiter.acquire()
    await limiter.acquire()
    assert clock.sleeps == pytest.approx([0.1, 0.1])
    assert limiter.waited == pytest.approx(0.2)


async def test_idle_time_refills_up_to_the_burst_only() -> None:
    clock = Clock()
    limiter = bucket(2, 2, clock)
    await limiter.acquire()
    await limiter.acquire()
    clock.now += 60  # a long idle period refills two tokens, not 120
    for _ in range(2):
        await limiter.acquire()
    assert clock.sleeps == []
    await limiter.acquire()
    assert clock.sleeps == pytest.approx([0.5])


async def test_partial_refill_shortens_the_wait() -> None:
    clock = Clock()
    limiter = bucket(4, 1, clock)
    await limiter.acquire()
    clock.now += 0.1  # 0.4 of a token back
    await limiter.acquire()
    assert clock.sleeps == pytest.approx([0.15])


async def test_concurrent_callers_are_served_one_at_a_time() -> None:
    clock = Clock()
    limiter = bucket(1, 1, clock)
    order: list[int] = []

    async def caller(i: int) -> None:
        await limiter.acquire()
        order.append(i)

    await asyncio.gather(*(caller(i) for i in range(4)))
    assert order == [0, 1, 2, 3]
    # Three waits of one second each: never two callers on one token.
    assert clock.sleeps == pytest.approx([1.0, 1.0, 1.0])
    assert clock.now == pytest.approx(103.0)


def test_rejects_nonsense_settings() -> None:
    with pytest.raises(ValueError):
        TokenBucket(0, 1)
    with pytest.raises(ValueError):
        TokenBucket(1, 0)
