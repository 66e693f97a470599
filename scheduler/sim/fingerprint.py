"""The idle-cycle fingerprint of a replay, kept up to date incrementally
(docs/simulate.md#replay-cost).

An instant of a replay is over when a cycle that admits and preempts nothing leaves
the core in a state some earlier idle cycle of the instant already left it in: the
next cycle would then do what that one did. The state that decides it is, per
ClusterQueue, the counts of its queue (heap, parked) and the order of its workload
keys, and the flavor-scan resume state (`last_assignment`) of every workload not
finished. Listing every queue and sorting every live workload after each idle cycle
made a BestEffortFIFO replay, which tries its parked heads one cycle each after every
release, grow with the square of the queue's depth.

The fingerprint here is the same value, compared the same way, but built from parts
that are recomputed only when they may have changed: a queue's key order when the
change feed touched that ClusterQueue (and even then, for the built-in queues, only
if a touched workload moved: the others keep their relative order), the resume state
of the workloads the feed or an event named. Each part hashes once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from scheduler.core.changes import Changes
from scheduler.core.queue.fifo import FifoQueue
from scheduler.core.queue.interface import PendingQueue
from scheduler.core.scheduler import Scheduler

_key = attrgetter("key")


class _Listing:
    """A queue's workload keys in order, as of one moment; hashed once."""

    __slots__ = ("hash", "index", "keys", "queue", "settings", "sticky")

    def __init__(self, queue: PendingQueue) -> None:
        self.queue = queue
        self.settings = queue.settings
        self.keys: tuple[str, ...] = tuple(map(_key, queue.listing()))
        self.index: dict[str, int] | None = None  # key -> position, made when asked
        self.sticky = queue.sticky_key if type(queue) is FifoQueue else None
        self.hash = hash(self.keys)

    def position(self, key: str) -> int | None:
        if self.index is None:
            self.index = {k: i for i, k in enumerate(self.keys)}
        return self.index.get(key)

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        return isinstance(other, _Listing) and self.hash == other.hash and self.keys == other.keys


class _Attempts:
    """The resume state of every live workload that has one; hashed once."""

    __slots__ = ("hash", "items")

    def __init__(self, attempts: dict[str, Any]) -> None:
        self.items = frozenset(attempts.items())
        self.hash = hash(self.items)

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        return (
            isinstance(other, _Attempts) and self.hash == other.hash and self.items == other.items
        )


@dataclass(slots=True)
class IdleFingerprint:
    """Fed every change of the replay; `take` gives the fingerprint of the state now."""

    # ClusterQueue -> workloads pushed or requeued there since the last fingerprint
    _touched: Changes = field(default_factory=Changes)  # only its queues
    _everything: bool = True  # every part is recomputed at the next fingerprint
    _listings: dict[str, _Listing] = field(default_factory=dict)
    _attempts: dict[str, Any] = field(default_factory=dict)  # key -> tried flavors
    _dirty: set[str] = field(default_factory=set)  # keys whose resume state may differ
    _attempts_part: _Attempts | None = None

    def changed(self, changes: Changes) -> None:
        """What the change feed showed."""
        self._touched.merge(Changes(queues=changes.queues))
        for keys in changes.queues.values():
            self._dirty.update(keys)
        self._dirty.update(key for _, key in changes.heads)
        self._dirty.update(changes.admitted)
        self._dirty.update(changes.evicted)

    def mark(self, keys: Iterable[str]) -> None:
        """These workloads may have changed (an event named them, they finished)."""
        self._dirty.update(keys)

    def mark_all(self) -> None:
        """Anything may have changed (an event the replay does not follow in detail)."""
        self._everything = True

    def take(self, s: Scheduler) -> Any:
        """Everything that decides what the next cycle does, when no quota changed."""
        everything, self._everything = self._everything, False
        touched, self._touched = self._touched.queues, Changes()
        queues = []
        listings: dict[str, _Listing] = {}
        for name in s.queues.cluster_queues():
            q = s.queues.queue(name)
            if q is None:
                continue
            listing = self._listings.get(name)
            if listing is None or everything or not _same_order(q, listing, touched.get(name)):
                listing = _Listing(q)
            listings[name] = listing
            c = q.counts()
            queues.append((name, c.active, c.parked, listing))
        self._listings = listings
        return (tuple(queues), self._attempts_now(s, everything))

    def _attempts_now(self, s: Scheduler, everything: bool) -> _Attempts:
        attempts = self._attempts
        keys: Iterable[str] = self._dirty
        if everything:
            attempts.clear()
            keys = s.objects.workloads
        changed = everything or self._attempts_part is None
        for key in keys:
            wl = s.objects.workloads.get(key)
            old = attempts.get(key)
            if wl is None or wl.finished or wl.last_assignment is None:
                if old is not None:
                    del attempts[key]
                    changed = True
                continue
            new = tuple(sorted(wl.last_assignment.tried_flavor_idx.items()))
            if new != old:
                attempts[key] = new
                changed = True
        self._dirty.clear()
        if changed or self._attempts_part is None:
            self._attempts_part = _Attempts(attempts)
        return self._attempts_part


def _same_order(queue: PendingQueue, listing: _Listing, touched: set[str] | None) -> bool:
    """Whether the queue's key order is still `listing`'s.

    Not marked by the feed since, it is. A built-in queue changes its order only by
    storing a workload the feed reports (push, requeue), by removing one (its length
    changes, unless another one came, which was reported), by re-keying the sticky
    workload's predecessor (the sticky key changes) and by new settings (the settings
    object changes); the workloads not stored keep their relative order, so if every
    reported one is at its old position in a queue of the old length, every position
    holds its old key. Another queue implementation is listed anew.
    """
    if touched is None:
        return True
    if type(queue) is not FifoQueue or queue is not listing.queue:
        return False
    if (
        len(queue) != len(listing.keys)
        or queue.sticky_key != listing.sticky
        or queue.settings is not listing.settings
    ):
        return False
    for key in touched:
        old = listing.position(key)
        if old is None or queue.position(key) != old:
            return False
    return True
