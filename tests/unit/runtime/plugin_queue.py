"""A queue plugin written against `PendingQueue` alone (not a `FifoQueue`), for tests.

Newest first, every requeue straight back to the heap: the simplest queue a user could
write from docs/queue-plugins.md. It keeps its order in one plain sorted list and
does not override `ordered_runs`, so it publishes through the interface's default.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterator, Sequence
from itertools import islice

from scheduler.core.clock import Instant
from scheduler.core.queue.interface import (
    OrderKey,
    PendingQueue,
    QueueCounts,
    QueueEntry,
    QueueSettings,
    RequeueReason,
)


class NewestFirstQueue(PendingQueue):
    def __init__(self, settings: QueueSettings) -> None:
        super().__init__(settings)
        self._entries: dict[str, QueueEntry] = {}
        self._order: list[tuple[OrderKey, QueueEntry]] = []  # every entry, in order
        self._parked: dict[str, None] = {}
        self._in_flight: dict[str, None] = {}

    def order_key(self, entry: QueueEntry) -> OrderKey:
        return (-entry.priority, -entry.timestamp, entry.key)

    def push(self, entry: QueueEntry, now: Instant) -> None:
        self._forget(entry.key)
        self._store(entry)
        if not entry.backoff_expired(now):
            self._parked[entry.key] = None

    def pop(self, now: Instant) -> QueueEntry | None:
        for _, entry in self._order:
            key = entry.key
            if key not in self._parked and key not in self._in_flight:
                self._in_flight[key] = None
                return entry
        return None

    def requeue(
        self,
        entry: QueueEntry,
        reason: RequeueReason,
        now: Instant,
        *,
        has_untried_flavors: bool,
    ) -> None:
        self.push(entry, now)

    def flush(self, now: Instant, namespace_matches: Callable[[str], bool]) -> None:
        for key in list(self._parked):
            entry = self._entries[key]
            if namespace_matches(entry.namespace) and entry.backoff_expired(now):
                del self._parked[key]

    def delete(self, key: str) -> QueueEntry | None:
        return self._forget(key)

    def release_in_flight(self, key: str) -> QueueEntry | None:
        return self._forget(key) if key in self._in_flight else None

    def get(self, key: str) -> QueueEntry | None:
        return self._entries.get(key)

    def listing(self) -> Sequence[QueueEntry]:
        return tuple(entry for _, entry in self._order)

    def iter_ordered(self, offset: int = 0) -> Iterator[QueueEntry]:
        return (entry for _, entry in islice(self._order, offset, None))

    def position(self, key: str) -> int | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        return bisect_left(self._order, self.order_key(entry), key=lambda item: item[0])

    def counts(self) -> QueueCounts:
        queued = len(self._entries) - len(self._in_flight)
        return QueueCounts(
            active=queued - len(self._parked),
            parked=len(self._parked),
            in_flight=len(self._in_flight),
        )

    def in_flight_keys(self) -> frozenset[str]:
        return frozenset(self._in_flight)

    def _store(self, entry: QueueEntry) -> None:
        self._entries[entry.key] = entry
        insort(self._order, (self.order_key(entry), entry), key=lambda item: item[0])

    def _forget(self, key: str) -> QueueEntry | None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return None
        i = bisect_left(self._order, self.order_key(entry), key=lambda item: item[0])
        del self._order[i]
        self._parked.pop(key, None)
        self._in_flight.pop(key, None)
        return entry


class OneRunQueue(NewestFirstQueue):
    """Its order as one run, however long: the publisher must cut it itself."""

    def ordered_runs(self) -> Sequence[Sequence[QueueEntry]]:
        return [self.listing()]
