"""Wall and CPU time of the synchronous stretches the runtime runs on the event loop,
and the one helper every time-boxed loop of the runtime uses to bound them (`TimeBox`).

A stretch's wall time is what the loop waited; its CPU time is what our code cost.
They differ when the process is not running: on a shared virtual machine the host can
take the CPU away for a hundred milliseconds in the middle of a one-millisecond step,
and the wall time alone would blame the step. The runtime bounds its stretches by wall
time (that is what the loop feels) and reports both, so a long step can be told apart
from a stolen one.
"""

from __future__ import annotations

import asyncio
import time

Stamp = tuple[float, float]  # (perf_counter, thread_time) at the start of a stretch


def stamp() -> Stamp:
    return (time.perf_counter(), time.thread_time())


def since(started: Stamp) -> Stamp:
    """(wall, CPU) seconds since `started`."""
    return (time.perf_counter() - started[0], time.thread_time() - started[1])


class TimeBox:
    """Bounds the synchronous stretches of a loop that runs on the event loop.

    The loop calls :meth:`pause` between units of work: once the current stretch has
    run `budget` seconds (wall time: what the event loop waits), it yields to the loop
    and a new stretch starts. Each stretch's wall and CPU time are measured; `max` and
    `max_cpu` hold the longest so far, `total_cpu` the CPU of all closed stretches.
    """

    __slots__ = ("budget", "max", "max_cpu", "started", "total_cpu")

    def __init__(self, budget: float) -> None:
        self.budget = budget
        self.started: Stamp = stamp()
        self.max = 0.0
        self.max_cpu = 0.0
        self.total_cpu = 0.0

    def elapsed(self) -> float:
        """Wall seconds of the current stretch so far."""
        return time.perf_counter() - self.started[0]

    def spent(self, ahead: float = 0.0) -> bool:
        """Whether the stretch has used its budget, or would with `ahead` more seconds."""
        return time.perf_counter() - self.started[0] + ahead >= self.budget

    def end(self) -> Stamp:
        """Close the current stretch: its (wall, CPU) seconds, counted in the maxima."""
        elapsed = since(self.started)
        self.max = max(self.max, elapsed[0])
        self.max_cpu = max(self.max_cpu, elapsed[1])
        self.total_cpu += elapsed[1]
        return elapsed

    def restart(self) -> None:
        """Start a new stretch (the caller yielded to the loop by other means)."""
        self.started = stamp()

    async def yield_(self) -> None:
        """Close the stretch, give the loop a turn, start a new one."""
        self.end()
        await asyncio.sleep(0)
        self.started = stamp()

    async def pause(self, ahead: float = 0.0) -> None:
        """Yield if the stretch has used its budget, or would with `ahead` seconds more."""
        if self.spent(ahead):
            await self.yield_()


__all__ = ["Stamp", "TimeBox", "since", "stamp"]
