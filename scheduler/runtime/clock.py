"""The real clock for the runtime; the core only ever sees it through `Clock.now()`."""

from __future__ import annotations

import time

from scheduler.core.clock import Instant


class SystemClock:
    """Wall-clock time as an Instant (integer microseconds since the Unix epoch)."""

    def now(self) -> Instant:
        return time.time_ns() // 1000
