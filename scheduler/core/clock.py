"""Time for the core. The core never reads the wall clock: an Instant is passed in.

Instants are integer microseconds since the Unix epoch, so ordering is exact and
comparisons are cheap in sort keys.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol

Instant = int
"""Microseconds since 1970-01-01T00:00:00Z."""

MICROS_PER_SECOND = 1_000_000


class Clock(Protocol):
    def now(self) -> Instant: ...


class ManualClock:
    """A clock that moves only when told to: the simulator's virtual clock and tests'."""

    def __init__(self, start: Instant) -> None:
        self._now = start

    def now(self) -> Instant:
        return self._now

    def set(self, instant: Instant) -> None:
        if instant < self._now:
            raise ValueError("a manual clock never goes backwards")
        self._now = instant


def instant_from_datetime(value: datetime) -> Instant:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    delta = value - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * MICROS_PER_SECOND + delta.microseconds


def datetime_from_instant(instant: Instant) -> datetime:
    seconds, micros = divmod(instant, MICROS_PER_SECOND)
    return datetime.fromtimestamp(seconds, tz=UTC).replace(microsecond=micros)


def format_instant(instant: Instant) -> str:
    """RFC 3339 in UTC with second precision, as Kubernetes serializes metav1.Time.

    Only the rendering truncates: ordering always uses the full precision held.
    """
    return datetime_from_instant(instant).strftime("%Y-%m-%dT%H:%M:%SZ")
