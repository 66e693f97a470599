"""The default queue implementation: StrictFIFO and BestEffortFIFO (docs/scheduling.md#queues).

Both strategies share the structures and the order (docs/scheduling.md#queue-order); they differ
only in where a head that was not admitted goes back to (docs/scheduling.md#requeue-after-a-cycle).
Every pending workload is in exactly one of three places: the active heap, the parked set, or
in-flight. The heap and the parked set are both kept in queue order, so that a flush can hand
the parked workloads to the heap whole (docs/scheduling.md#flush-cost). Separately, all of
them are kept in one sorted "ordered view" so visibility can ask for a position or a page
without sorting the queue on every request.

Subclasses may change the order by overriding :meth:`FifoQueue.order_key`; the requeue,
backoff and flush rules stay those of the configured strategy.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from enum import Enum

from sortedcontainers import SortedList

from scheduler.core.clock import Instant
from scheduler.core.queue.interface import (
    OrderKey,
    PendingQueue,
    QueueCounts,
    QueueEntry,
    QueueSettings,
    RequeueReason,
)
from scheduler.core.queue.ordering import fifo_order_key
from scheduler.core.queue.run_heap import RunHeap
from scheduler.core.queue.runs import SortedRuns

STRICT_FIFO = "StrictFIFO"
BEST_EFFORT_FIFO = "BestEffortFIFO"

# The workload key is appended to the order key so that items are unique and the key
# can be recovered from a sorted item, whatever a subclass's order key looks like.
# (order key, workload key, entry): the heap pops an item and has its entry at hand.
# Items are unique by their first two fields, so comparisons never reach the entry.
_Item = tuple[OrderKey, str, QueueEntry]

# Under BestEffortFIFO only these reasons go straight back to the heap
# (docs/scheduling.md#requeue-after-a-cycle); every other reason parks the workload until a cluster
# event may have made it admissible.
_BEST_EFFORT_IMMEDIATE = frozenset(
    {
        RequeueReason.FAILED_AFTER_NOMINATION,
        RequeueReason.PENDING_PREEMPTION,
        RequeueReason.PREEMPTION_FAILED,
    }
)


class _Where(Enum):
    HEAP = "heap"
    PARKED = "parked"
    IN_FLIGHT = "in-flight"


class FifoQueue(PendingQueue):
    """StrictFIFO or BestEffortFIFO, chosen by ``strategy`` or else ``settings.strategy``.

    Any strategy name other than ``StrictFIFO`` behaves as BestEffortFIFO, the Kueue
    default, so a plugin subclass inherits whichever strategy its ClusterQueue sets.
    """

    def __init__(self, settings: QueueSettings, *, strategy: str | None = None) -> None:
        super().__init__(settings)
        self._fixed_strategy = strategy
        self._entries: dict[str, QueueEntry] = {}
        self._items: dict[str, _Item] = {}  # the item currently stored for each key
        # Where a stored key is follows from the two sets below (neither: the heap),
        # so no third map per workload says it (docs/benchmarks.md, cluster memory).
        # heap + parked + in-flight, item -> entry, kept as runs (ordered_runs)
        self._ordered: SortedRuns[_Item, QueueEntry] = SortedRuns()
        self._heap: RunHeap[_Item] = RunHeap()  # pop = smallest
        # The parked workloads are kept sorted too, so that a flush hands them to the
        # heap whole instead of moving them one by one (docs/scheduling.md#flush-cost).
        self._parked_items: SortedList[_Item] = SortedList()
        # dicts rather than sets: insertion order keeps iteration independent of
        # string hashing, so runs are reproducible.
        self._parked: dict[str, dict[str, None]] = {}  # namespace -> its parked keys
        self._gated: dict[str, None] = {}  # parked keys whose backoff may not be over
        self._in_flight: dict[str, None] = {}
        self._lq_counts: Counter[str] = Counter()  # heap + parked, per LocalQueue
        self._sticky: str | None = None
        # Kueue starts both its pop and flush cycle counters equal, so a requeue before
        # any pop counts as "flushed after the last pop".
        self._flushed_since_pop = True

    # -- configuration ---------------------------------------------------------------
    @property
    def strategy(self) -> str:
        return self._fixed_strategy or self.settings.strategy

    @property
    def strict(self) -> bool:
        return self.strategy == STRICT_FIFO

    @property
    def sticky_key(self) -> str | None:
        """The BestEffortFIFO sticky workload (docs/scheduling.md#requeue-after-a-cycle), if any."""
        return self._sticky

    @property
    def flushed_since_pop(self) -> bool:
        return self._flushed_since_pop

    def update_settings(self, settings: QueueSettings) -> None:
        super().update_settings(settings)
        if self.strict and self._sticky is not None:
            # Sticky is a BestEffortFIFO notion; a StrictFIFO queue never has one.
            self._set_sticky(None)
        # A subclass's order may depend on the settings: re-key everything. Settings
        # change rarely, so O(n log n) here is acceptable.
        for key in list(self._entries):
            self._rekey(key)

    # -- ordering --------------------------------------------------------------------
    def order_key(self, entry: QueueEntry) -> OrderKey:
        return fifo_order_key(entry, sticky=entry.key == self._sticky)

    # -- mutation --------------------------------------------------------------------
    def push(self, entry: QueueEntry, now: Instant) -> None:
        key = entry.key
        where = self._place(key)
        if where is _Where.IN_FLIGHT:
            # The cycle owns the head until it requeues or releases it; only the data
            # is refreshed so listings show the latest state.
            self._store(entry, where)
        elif where is _Where.HEAP:
            self._store(entry, where)
        elif where is _Where.PARKED and self._entries[key].revision == entry.revision:
            # Nothing that could make it admissible changed: stay parked
            # (docs/scheduling.md#queue-structures).
            self._store(entry, where)
        else:
            # New, or parked and changed: the heap, unless the backoff gate says no.
            self._store(entry, _Where.HEAP if entry.backoff_expired(now) else _Where.PARKED)

    def pop(self, now: Instant) -> QueueEntry | None:
        if not self._heap:
            return None
        # The head's item is current (stored items always carry the key their entry
        # orders by): it moves to in-flight as it is, keeping its place in the ordered
        # view, without re-keying it or searching the heap for it.
        item = self._heap.pop_first()
        key = item[1]
        self._in_flight[key] = None
        self._uncount(item[2].local_queue_key)
        self._flushed_since_pop = False
        return self._entries[key]

    def requeue(
        self,
        entry: QueueEntry,
        reason: RequeueReason,
        now: Instant,
        *,
        has_untried_flavors: bool,
    ) -> None:
        """docs/scheduling.md#requeue-after-a-cycle. The caller has already re-read the workload and
        checked it is still queued in this ClusterQueue; ``entry`` is that latest state."""
        key = entry.key
        if reason is RequeueReason.PENDING_PREEMPTION and not self.strict:
            # Set before storing so the entry is inserted with its sticky order key.
            self._set_sticky(key)
        immediate = self._immediate(reason) or self._flushed_since_pop or has_untried_flavors
        to_heap = immediate and entry.backoff_expired(now)
        where = self._place(key)
        if where is None or where is _Where.IN_FLIGHT:
            self._store(entry, _Where.HEAP if to_heap else _Where.PARKED)
        elif where is _Where.PARKED and to_heap:
            self._store(entry, _Where.HEAP)
        else:
            # Already queued (heap, or parked and staying so): idempotent, no move.
            self._store(entry, where)

    def flush(self, now: Instant, namespace_matches: Callable[[str], bool]) -> None:
        self._flushed_since_pop = True
        if not self._parked_items:
            return
        # What stays parked is found without visiting the rest: the namespaces the
        # selector no longer matches (one match each) and the workloads still backing
        # off (docs/scheduling.md#flush-cost).
        refused = [namespace for namespace in self._parked if not namespace_matches(namespace)]
        refused_set = set(refused)
        backing_off = [
            key
            for key in self._gated
            if self._items[key][2].namespace not in refused_set
            and not self._entries[key].backoff_expired(now)
        ]
        staying = sum(len(self._parked[namespace]) for namespace in refused) + len(backing_off)
        if staying * 2 > len(self._parked_items):
            self._flush_few(refused_set, frozenset(backing_off))
            return
        kept = [self._items[key] for namespace in refused for key in self._parked[namespace]]
        kept += [self._items[key] for key in backing_off]
        for item in kept:
            self._take_out(item[1], item, _Where.PARKED)
        # The parked list goes to the heap whole, as one of its runs: a deep
        # BestEffortFIFO queue is flushed without moving its workloads, whether it was
        # all parked or half way through a walk.
        moving, self._parked_items = self._parked_items, SortedList()
        self._parked, self._gated = {}, {}
        for item in kept:
            self._put_in(item[1], item, _Where.PARKED)
        self._heap.absorb(moving)

    def _flush_few(self, refused: set[str], backing_off: frozenset[str]) -> None:
        """Most parked workloads stay: move the others one by one."""
        back = [
            self._items[key]
            for namespace, keys in self._parked.items()
            if namespace not in refused
            for key in keys
            if key not in backing_off
        ]
        for item in back:
            self._take_out(item[1], item, _Where.PARKED)
        self._heap.absorb(SortedList(back))

    def delete(self, key: str) -> QueueEntry | None:
        return self._leave(key)

    def release_in_flight(self, key: str) -> QueueEntry | None:
        if key not in self._in_flight:
            return None
        return self._leave(key)

    # -- reading ---------------------------------------------------------------------
    def get(self, key: str) -> QueueEntry | None:
        return self._entries.get(key)

    def listing(self) -> Sequence[QueueEntry]:
        return tuple(self._ordered)

    def ordered_runs(self) -> Sequence[Sequence[QueueEntry]]:
        """The ordered view as it is stored: live runs of about a thousand entries
        (:mod:`scheduler.core.queue.runs`); a change rewrites one or two of them."""
        return self._ordered.runs()

    def iter_ordered(self, offset: int = 0) -> Iterator[QueueEntry]:
        """Lazy; the queue must not be mutated while the iterator is in use."""
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        return self._ordered.islice(offset)

    def position(self, key: str) -> int | None:
        item = self._items.get(key)
        if item is None:
            return None
        return self._ordered.index(item)

    def insertion_position(self, entry: QueueEntry) -> int:
        # (order key, workload key) sorts before the stored item of an equal key, and
        # never compares entries.
        return self._ordered.bisect((self.order_key(entry), entry.key))

    def peek(self, now: Instant) -> QueueEntry | None:
        return self._entries[self._heap.first()[1]] if self._heap else None

    def counts(self) -> QueueCounts:
        return QueueCounts(
            active=len(self._heap),
            parked=len(self._parked_items),
            in_flight=len(self._in_flight),
        )

    def in_flight_keys(self) -> frozenset[str]:
        return frozenset(self._in_flight)

    def is_parked(self, key: str) -> bool:
        return self._place(key) is _Where.PARKED

    def in_heap(self, key: str) -> bool:
        return self._place(key) is _Where.HEAP

    def local_queue_counts(self) -> dict[str, int]:
        return dict(self._lq_counts)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self._entries

    # -- internals -------------------------------------------------------------------
    def _place(self, key: str) -> _Where | None:
        """Where a key is stored: parked, in flight, else (if stored at all) the heap."""
        item = self._items.get(key)
        if item is None:
            return None
        parked = self._parked.get(item[2].namespace)
        if parked is not None and key in parked:
            return _Where.PARKED
        return _Where.IN_FLIGHT if key in self._in_flight else _Where.HEAP

    def _immediate(self, reason: RequeueReason) -> bool:
        if self.strict:
            # StrictFIFO keeps retrying its head (it blocks the queue by design),
            # except when the namespace no longer matches: only a namespace or
            # selector change can fix that, and it comes with a flush.
            return reason is not RequeueReason.NAMESPACE_MISMATCH
        return reason in _BEST_EFFORT_IMMEDIATE

    def _store(self, entry: QueueEntry, where: _Where) -> None:
        """Put ``entry`` at ``where``, replacing any stored entry for its key."""
        key = entry.key
        old = self._items.get(key)
        if old is not None and (old[2] is entry or self._entries[key] is entry):
            # The very entry already stored (requeues of a popped head, flushes): its
            # item's key is current, since every change of what the order depends on
            # (sticky, settings) re-keys the stored items at once (`_rekey`).
            self._entries[key] = entry
            self._move(key, old, where)
            return
        order = self.order_key(entry)
        if old is not None and old[0] == order and old[2] == entry:
            # Pushes mostly bring an equal entry: it keeps its item (holding an equal
            # entry) and its place in the ordered view, and only changes part.
            self._entries[key] = entry
            self._move(key, old, where)
            return
        self._insert(entry, where, order)

    def _insert(self, entry: QueueEntry, where: _Where, order: OrderKey) -> None:
        """Store ``entry`` under a freshly computed order key."""
        self._remove(entry.key)
        item: _Item = (order, entry.key, entry)
        self._entries[entry.key] = entry
        self._items[entry.key] = item
        self._ordered.add(item, entry)
        self._put_in(entry.key, item, where)
        if where is not _Where.IN_FLIGHT:
            self._lq_counts[entry.local_queue_key] += 1

    def _move(self, key: str, item: _Item, where: _Where) -> None:
        """Move a stored item between the heap, the parked set and in-flight."""
        was = self._place(key)
        if was is where or was is None:
            return
        self._take_out(key, item, was)
        self._put_in(key, item, where)
        if was is _Where.IN_FLIGHT:
            self._lq_counts[item[2].local_queue_key] += 1
        elif where is _Where.IN_FLIGHT:
            self._uncount(item[2].local_queue_key)

    def _uncount(self, lq: str) -> None:
        self._lq_counts[lq] -= 1
        if self._lq_counts[lq] == 0:
            del self._lq_counts[lq]

    def _remove(self, key: str) -> QueueEntry | None:
        where = self._place(key)
        if where is None:
            return None
        entry = self._entries.pop(key)
        item = self._items.pop(key)
        self._ordered.remove(item)
        self._take_out(key, item, where)
        if where is not _Where.IN_FLIGHT:
            self._uncount(entry.local_queue_key)
        return entry

    def _put_in(self, key: str, item: _Item, where: _Where) -> None:
        """Add a stored item to the heap, the parked set or in-flight."""
        if where is _Where.HEAP:
            self._heap.add(item)
        elif where is _Where.PARKED:
            self._parked_items.add(item)
            self._parked.setdefault(item[2].namespace, {})[key] = None
            if item[2].may_back_off:
                self._gated[key] = None
        else:
            self._in_flight[key] = None

    def _take_out(self, key: str, item: _Item, where: _Where) -> None:
        """Remove a stored item from the heap, the parked set or in-flight."""
        if where is _Where.HEAP:
            self._heap.remove(item)
        elif where is _Where.PARKED:
            self._parked_items.remove(item)
            namespace = item[2].namespace
            keys = self._parked[namespace]
            del keys[key]
            if not keys:
                del self._parked[namespace]
            self._gated.pop(key, None)
        else:
            del self._in_flight[key]

    def _leave(self, key: str) -> QueueEntry | None:
        """The workload leaves this queue for good: the only way sticky is cleared."""
        if key == self._sticky:
            self._sticky = None
        return self._remove(key)

    def _rekey(self, key: str) -> None:
        where = self._place(key)
        if where is not None:
            entry = self._entries[key]
            order = self.order_key(entry)
            if order != self._items[key][0]:
                self._insert(entry, where, order)

    def _set_sticky(self, key: str | None) -> None:
        previous, self._sticky = self._sticky, key
        if previous != key:
            # Both workloads change order keys: re-insert them at their new places.
            if previous is not None:
                self._rekey(previous)
            if key is not None:
                self._rekey(key)


def strict_fifo(settings: QueueSettings) -> PendingQueue:
    """Factory for the built-in ``StrictFIFO`` queue."""
    return FifoQueue(settings, strategy=STRICT_FIFO)


def best_effort_fifo(settings: QueueSettings) -> PendingQueue:
    """Factory for the built-in ``BestEffortFIFO`` queue."""
    return FifoQueue(settings, strategy=BEST_EFFORT_FIFO)
