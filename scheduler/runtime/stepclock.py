"""Wall and CPU time of the synchronous stretches the runtime runs on the event loop.

A stretch's wall time is what the loop waited; its CPU time is what our code cost.
They differ when the process is not running: on a shared virtual machine the host can
take the CPU away for a hundred milliseconds in the middle of a one-millisecond step,
and the wall time alone would blame the step. The runtime bounds its stretches by wall
time (that is what the loop feels) and reports both, so a long step can be told apart
from a stolen one.
"""

from __future__ import annotations

import time

Stamp = tuple[float, float]  # (perf_counter, thread_time) at the start of a stretch


def stamp() -> Stamp:
    return (time.perf_counter(), time.thread_time())


def since(started: Stamp) -> Stamp:
    """(wall, CPU) seconds since `started`."""
    return (time.perf_counter() - started[0], time.thread_time() - started[1])


__all__ = ["Stamp", "since", "stamp"]
