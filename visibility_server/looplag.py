"""Event-loop lag: how late a timer fires is how long something held the shared loop.

One task sleeps `interval` seconds at a time and records how much later than asked it
woke up. The lag is exported as a Prometheus histogram and gauge, and `/livez` turns
unhealthy only when the loop has been stuck far beyond anything a request or a
scheduling step may take (a wedged process, which a restart cures); ordinary lag is
for the metrics and benchmarks, never a reason for the kubelet to kill the pod.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Gauge, Histogram

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)


class LoopLagMonitor:
    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        interval: float = 0.1,
        stuck_after: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = interval
        self.stuck_after = stuck_after
        self._clock = clock
        self.last_tick = clock()
        self.max_lag = 0.0
        self._histogram: Histogram | None = None
        self._gauge: Gauge | None = None
        if registry is not None:
            self._histogram = Histogram(
                "queuescope_event_loop_lag_seconds",
                "How late the event loop ran a timer",
                buckets=BUCKETS,
                registry=registry,
            )
            self._gauge = Gauge(
                "queuescope_event_loop_lag_max_seconds",
                "The largest event-loop lag since the process started",
                registry=registry,
            )

    def record(self, lag: float) -> None:
        self.last_tick = self._clock()
        lag = max(0.0, lag)
        self.max_lag = max(self.max_lag, lag)
        if self._histogram is not None and self._gauge is not None:
            self._histogram.observe(lag)
            self._gauge.set(self.max_lag)

    def healthy(self) -> bool:
        """False once no tick has come for `stuck_after` seconds: the loop is wedged."""
        return self._clock() - self.last_tick < self.stuck_after

    async def run(self) -> None:
        while True:
            asked = self._clock()
            await asyncio.sleep(self.interval)
            self.record(self._clock() - asked - self.interval)
