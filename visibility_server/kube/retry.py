"""Retries of calls to kube-apiserver (docs/cluster.md#decision-pipeline): each attempt at most 5 s,
pauses of 0.5 s growing by 1.5 with up to 20 % jitter (the shared `Backoff`), and no attempt
or pause past 10 s from the first try.

Time, sleep and randomness are injected so tests run the whole schedule instantly.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

from scheduler.kubeapi.backoff import Backoff

DEFAULT_ATTEMPT_TIMEOUT: Final = 5.0
DEFAULT_INITIAL_BACKOFF: Final = 0.5
DEFAULT_BACKOFF_FACTOR: Final = 1.5
DEFAULT_JITTER: Final = 0.2
DEFAULT_BUDGET: Final = 10.0

Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    attempt_timeout: float = DEFAULT_ATTEMPT_TIMEOUT
    initial_backoff: float = DEFAULT_INITIAL_BACKOFF
    factor: float = DEFAULT_BACKOFF_FACTOR
    jitter: float = DEFAULT_JITTER
    budget: float = DEFAULT_BUDGET
    sleep: Sleep = field(default=asyncio.sleep, compare=False)
    clock: Clock = field(default=time.monotonic, compare=False)
    rand: Callable[[], float] = field(default=random.random, compare=False)

    @property
    def backoff(self) -> Backoff:
        return Backoff(self.initial_backoff, self.factor, jitter=self.jitter)

    def schedule(self) -> RetrySchedule:
        """The timing of one call, started now."""
        return RetrySchedule(self, self.clock() + self.budget)


@dataclass(slots=True)
class RetrySchedule:
    policy: RetryPolicy
    deadline: float
    attempts: int = 0
    _pauses: int = 0

    def attempt_timeout(self) -> float:
        """The timeout of the next attempt (counted): never past the deadline."""
        self.attempts += 1
        remaining = self.deadline - self.policy.clock()
        return max(0.0, min(self.policy.attempt_timeout, remaining))

    async def pause(self) -> bool:
        """Sleep before the next attempt; False (without sleeping) when that attempt
        would start at or after the deadline."""
        p = self.policy
        pause = p.backoff.delay(self._pauses, p.rand())
        self._pauses += 1
        if p.clock() + pause >= self.deadline:
            return False
        await p.sleep(pause)
        return True


__all__ = [
    "DEFAULT_ATTEMPT_TIMEOUT",
    "DEFAULT_BACKOFF_FACTOR",
    "DEFAULT_BUDGET",
    "DEFAULT_INITIAL_BACKOFF",
    "DEFAULT_JITTER",
    "Clock",
    "RetryPolicy",
    "RetrySchedule",
    "Sleep",
]
