"""A token bucket shared by every write to the API server (client-go's QPS and burst)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


class TokenBucket:
    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("qps must be > 0 and burst >= 1")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(burst)
        self._at = clock()
        self._lock = asyncio.Lock()
        self.waited = 0.0  # total seconds spent waiting, for metrics and benchmarks

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.qps)
        self._at = now

    async def acquire(self) -> None:
        """Wait for one token; callers are served in arrival order."""
        async with self._lock:
            self._refill()
            if self._tokens < 1:
                delay = (1 - self._tokens) / self.qps
                self.waited += delay
                await self._sleep(delay)
                self._refill()
            self._tokens -= 1
