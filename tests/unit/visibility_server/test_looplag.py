"""The event-loop lag monitor: lag recorded and exported, /livez only for a wedged loop."""

from __future__ import annotations

import asyncio
import time

from prometheus_client import CollectorRegistry

from visibility_server.looplag import LoopLagMonitor


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_lag_is_recorded_and_exported() -> None:
    registry = CollectorRegistry()
    monitor = LoopLagMonitor(registry, clock=Clock())
    monitor.record(0.003)
    monitor.record(0.250)
    monitor.record(-0.001)  # a timer cannot fire early; clock noise counts as no lag
    assert monitor.max_lag == 0.250
    assert registry.get_sample_value("queuescope_event_loop_lag_max_seconds") == 0.250
    assert registry.get_sample_value("queuescope_event_loop_lag_seconds_count") == 3
    assert (
        registry.get_sample_value("queuescope_event_loop_lag_seconds_bucket", {"le": "0.005"}) == 2
    )


def test_only_a_wedged_loop_is_unhealthy() -> None:
    clock = Clock()
    monitor = LoopLagMonitor(clock=clock, stuck_after=10.0)
    monitor.record(0.0)
    clock.now += 9.9
    assert monitor.healthy()
    clock.now += 0.2
    assert not monitor.healthy()
    monitor.record(10.0)  # the loop came back: healthy again
    assert monitor.healthy()


async def test_a_blocked_loop_shows_as_lag() -> None:
    monitor = LoopLagMonitor(interval=0.01)
    task = asyncio.create_task(monitor.run())
    await asyncio.sleep(0.02)
    time.sleep(0.05)  # hold the loop, as a long synchronous step would
    await asyncio.sleep(0.03)
    task.cancel()
    assert monitor.max_lag >= 0.03
