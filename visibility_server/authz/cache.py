"""A bounded LRU of decisions with separate lifetimes for allows and denials."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from visibility_server.authz.decision import Decision

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class CacheLimits:
    """At most `max_entries` decisions, each kept `allowed_ttl`/`denied_ttl` seconds (the
    `--authorization-webhook-cache-*-ttl` flags); a TTL of 0 or less disables caching of
    that kind of decision."""

    max_entries: int = 8192
    allowed_ttl: float = 10.0
    denied_ttl: float = 10.0

    def __post_init__(self) -> None:
        if self.max_entries < 0:
            raise ValueError("max_entries must not be negative")


class DecisionCache:
    """Decisions within `CacheLimits`, on a clock of monotonic seconds (injected so tests
    control time)."""

    def __init__(self, clock: Clock, limits: CacheLimits | None = None) -> None:
        limits = limits or CacheLimits()
        self._clock = clock
        self._max_entries = limits.max_entries
        self._allowed_ttl = limits.allowed_ttl
        self._denied_ttl = limits.denied_ttl
        self._entries: OrderedDict[Hashable, tuple[float, Decision]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable) -> Decision | None:
        """The live decision for `key` (now the most recently used), or None."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, decision = entry
        if self._clock() >= expires:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return decision

    def put(self, key: Hashable, decision: Decision) -> None:
        ttl = self._allowed_ttl if decision.allowed else self._denied_ttl
        if ttl <= 0 or self._max_entries == 0:
            return
        self._entries[key] = (self._clock() + ttl, decision)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()


__all__ = ["Clock", "DecisionCache"]
