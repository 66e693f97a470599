"""What a replay tells whoever watches it (the forecast recorder, docs/forecasting.md).

The runner calls these as the virtual clock moves; an observer reads the core's state
and never changes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from scheduler.core.changes import Changes
from scheduler.core.clock import Instant
from scheduler.core.scheduler import Scheduler


class ReplayObserver(Protocol):
    def arrived(self, key: str, at: Instant) -> None:
        """A workload appeared (an input document, or a Scenario `apply`)."""

    def changed(self, s: Scheduler, changes: Changes) -> None:
        """Workloads were admitted or evicted since the last call."""

    def finished(self, s: Scheduler, keys: Sequence[str]) -> None:
        """These workloads finished now."""

    def instant_done(self, s: Scheduler) -> None:
        """The cycles of the current instant are over; the clock moves next."""
