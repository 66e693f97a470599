"""How often the same failure is logged: once, then at most once an interval with the
count of the ones held back (docs/operations.md#why-a-request-is-401).

A caller that keeps sending the same bad credentials must not fill the log, and an
operator must still see that it goes on. The reasons seen are kept in a bounded LRU
cache (cachetools), so callers that each send a different bad certificate cannot grow
it either; a reason pushed out of it is logged again when it comes back.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from cachetools import LRUCache

DEFAULT_INTERVAL: Final = 10.0
DEFAULT_REASONS: Final = 256


@dataclass(slots=True)
class _Seen:
    logged_at: float
    held_back: int = 0


@dataclass(slots=True)
class RepeatFilter:
    """Decides, per reason, whether this occurrence is logged."""

    interval: float = DEFAULT_INTERVAL  # seconds between two lines of the same reason
    reasons: int = DEFAULT_REASONS  # distinct reasons remembered
    clock: Callable[[], float] = time.monotonic
    _seen: LRUCache[str, _Seen] = field(init=False)

    def __post_init__(self) -> None:
        self._seen = LRUCache(maxsize=self.reasons)

    def admit(self, reason: str) -> int | None:
        """None: hold this one back. Otherwise log it, saying how many of the same
        reason were held back since its last line (0 the first time)."""
        now = self.clock()
        seen = self._seen.get(reason)
        if seen is None:
            self._seen[reason] = _Seen(now)
            return 0
        if now - seen.logged_at < self.interval:
            seen.held_back += 1
            return None
        held_back, seen.logged_at, seen.held_back = seen.held_back, now, 0
        return held_back
