"""The public queue plugin interface (KEP-2779).

The scheduling cycle talks to the pending workloads of a ClusterQueue only through
:class:`PendingQueue`. The built-in StrictFIFO and BestEffortFIFO strategies are
implementations of it; a custom implementation is a class with the same methods,
loaded by configuration (see :mod:`scheduler.core.queue.loader`), with no change to
the project.

Everything a queue needs to know about a workload is in the immutable
:class:`QueueEntry`; an update replaces the entry. Queues never read the clock: the
current instant is passed to every call that may depend on it.
"""

from __future__ import annotations

import operator
from abc import ABC, abstractmethod
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import compress, count, pairwise, repeat
from typing import Any

from scheduler.core.clock import Instant

OrderKey = tuple[Any, ...]

# The default `ordered_runs` ends a run after each entry whose key hashes to zero in
# these bits: about 512 entries per run on average.
_RUN_END_MASK = 511
_KEY = operator.attrgetter("key")


class RequeueReason(StrEnum):
    """Why a popped head goes back to its queue (docs/scheduling.md#requeue-reasons)."""

    GENERIC = "Generic"
    NAMESPACE_MISMATCH = "NamespaceMismatch"
    FAILED_AFTER_NOMINATION = "FailedAfterNomination"
    PENDING_PREEMPTION = "PendingPreemption"
    PREEMPTION_FAILED = "PreemptionFailed"


@dataclass(frozen=True, slots=True)
class QueueEntry:
    """What a queue knows of one pending workload.

    ``revision`` changes whenever the workload's spec, ``reclaimablePods``, ``Evicted``
    or ``Requeued`` condition changes: an update with the same revision leaves a parked
    workload parked (docs/scheduling.md#queue-structures).
    """

    key: str  # "namespace/name"
    namespace: str
    name: str
    uid: str
    local_queue: str
    priority: int
    timestamp: Instant  # queue-order timestamp (docs/scheduling.md#queue-order-timestamp)
    revision: int
    requeued_false: bool  # the Requeued condition is present with status False
    requeue_at: Instant | None  # status.requeueState.requeueAt

    @property
    def local_queue_key(self) -> str:
        """``namespace/name`` of the LocalQueue: LocalQueues are namespaced, so two with
        the same name in different namespaces are different queues
        (docs/scheduling.md#localqueue-status counts)."""
        return f"{self.namespace}/{self.local_queue}"

    @property
    def may_back_off(self) -> bool:
        """Whether :meth:`backoff_expired` can be False at any instant: an entry without
        this never waits for its backoff (docs/scheduling.md#backoff-gate)."""
        return self.requeued_false or self.requeue_at is not None

    def backoff_expired(self, now: Instant) -> bool:
        """docs/scheduling.md#backoff-gate: no workload may enter the active heap before this
        holds."""
        if self.requeued_false:
            return False
        return self.requeue_at is None or now >= self.requeue_at


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """The ClusterQueue settings a queue implementation may depend on."""

    cluster_queue: str
    strategy: str  # "StrictFIFO" | "BestEffortFIFO" | a plugin's own name
    options: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class QueueCounts:
    active: int  # in the heap
    parked: int  # waiting for a cluster event (inadmissible)
    in_flight: int  # popped this cycle, not yet requeued or admitted


class PendingQueue(ABC):
    """The pending workloads of one ClusterQueue.

    Invariants every implementation keeps: a workload is returned by :meth:`pop` at most
    once per cycle; no workload is lost or duplicated; results depend only on the calls
    made, never on hash order or time read from elsewhere.
    """

    def __init__(self, settings: QueueSettings) -> None:
        self.settings = settings

    # -- lifecycle -----------------------------------------------------------------
    def update_settings(self, settings: QueueSettings) -> None:
        """The ClusterQueue's spec changed; re-order if the order depends on it."""
        self.settings = settings

    # -- mutation --------------------------------------------------------------------
    @abstractmethod
    def push(self, entry: QueueEntry, now: Instant) -> None:
        """Add a newly queued workload, or apply an update to a queued one
        (docs/scheduling.md#queue-structures)."""

    @abstractmethod
    def pop(self, now: Instant) -> QueueEntry | None:
        """Return the head and mark it in-flight, or None when the heap is empty."""

    @abstractmethod
    def requeue(
        self,
        entry: QueueEntry,
        reason: RequeueReason,
        now: Instant,
        *,
        has_untried_flavors: bool,
    ) -> None:
        """Put back a popped head that was not admitted, to the heap or parked
        (docs/scheduling.md#requeue-after-a-cycle)."""

    @abstractmethod
    def flush(self, now: Instant, namespace_matches: Callable[[str], bool]) -> None:
        """Move every eligible parked workload back to the heap (docs/scheduling.md#flush)."""

    @abstractmethod
    def delete(self, key: str) -> QueueEntry | None:
        """Remove a workload wherever it is (heap, parked, in-flight); clear sticky."""

    @abstractmethod
    def release_in_flight(self, key: str) -> QueueEntry | None:
        """The in-flight head was admitted (or left the queue): forget it."""

    # -- reading ---------------------------------------------------------------------
    @abstractmethod
    def order_key(self, entry: QueueEntry) -> OrderKey:
        """The comparator as a sort key; smaller sorts first (visibility uses it)."""

    @abstractmethod
    def get(self, key: str) -> QueueEntry | None:
        """The entry for ``key`` if it is pending in this queue (any state)."""

    @abstractmethod
    def listing(self) -> Sequence[QueueEntry]:
        """Every pending workload (heap + parked + in-flight) in queue order.

        The returned sequence must not change when the queue changes later.
        """

    @abstractmethod
    def iter_ordered(self, offset: int = 0) -> Iterator[QueueEntry]:
        """Pending workloads in queue order from ``offset``: O(k + log n) for k items."""

    @abstractmethod
    def position(self, key: str) -> int | None:
        """0-based index of ``key`` in :meth:`listing` order, in O(log n)."""

    @abstractmethod
    def counts(self) -> QueueCounts: ...

    # -- derived readings (overridable; defaults are built on the methods above) -------
    def ordered_runs(self) -> Sequence[Sequence[QueueEntry]]:
        """:meth:`listing` cut into consecutive runs, for incremental publishing.

        Whoever mirrors the queue keeps the runs it read and, next time, rebuilds only
        what is in runs that differ. So a change should leave every run it does not
        touch equal to what it was. The default cuts the listing after each entry
        whose key hashes to zero in its last nine bits (about 512 entries a run): a
        boundary depends on that entry alone, so an insertion or removal changes only
        the run it falls in, whatever happens elsewhere. It costs one pass over the
        listing, in C; a queue that stores its order in runs (the FIFO queues) returns
        them instead and costs nothing. Read the result in one synchronous step.
        """
        listing = self.listing()
        is_end = map(
            operator.not_, map(operator.and_, map(hash, map(_KEY, listing)), repeat(_RUN_END_MASK))
        )
        ends = [0, *compress(count(1), is_end)]
        if ends[-1] != len(listing):
            ends.append(len(listing))
        return [listing[start:end] for start, end in pairwise(ends)]

    def insertion_position(self, entry: QueueEntry) -> int:
        """Where ``entry`` would be listed if it were pushed now, without pushing it: the
        number of listed workloads that sort before it (the what-if dry run,
        docs/visibility-api.md#what-if). The default bisects :meth:`listing` by
        :meth:`order_key`; a queue with a sorted structure answers in O(log n)."""
        listing = self.listing()
        order = self.order_key(entry)
        return bisect_left(listing, order, key=self.order_key)

    def peek(self, now: Instant) -> QueueEntry | None:
        """The entry :meth:`pop` would return at ``now``, without popping it.

        The default takes the first listed workload that is not in flight: right for a
        queue that pops in its listing order and parks nothing. A queue that parks
        workloads (the FIFO queues) overrides it, otherwise the what-if dry run counts
        parked workloads as ahead of a new one (too cautious, never too hopeful).
        """
        in_flight = self.in_flight_keys()
        for entry in self.iter_ordered():
            if entry.key not in in_flight:
                return entry
        return None

    def in_flight_keys(self) -> frozenset[str]:
        """Keys popped and not yet requeued or released.

        Implementations that pop must override this; the default is only right for a
        queue with nothing in flight, so it refuses to guess otherwise.
        """
        if self.counts().in_flight == 0:
            return frozenset()
        raise NotImplementedError(f"{type(self).__name__} must override in_flight_keys()")

    def queued_entries(self) -> list[QueueEntry]:
        """Heap + parked (not in-flight) in queue order: what moves with a queue swap."""
        in_flight = self.in_flight_keys()
        return [e for e in self.listing() if e.key not in in_flight]

    def local_queue_counts(self) -> dict[str, int]:
        """Pending workloads per LocalQueue (``namespace/name``), excluding in-flight.

        LocalQueue ``status.pendingWorkloads`` leaves the in-flight head out
        (docs/scheduling.md#localqueue-status); LocalQueues without pending workloads are absent.
        """
        counts: dict[str, int] = {}
        for entry in self.queued_entries():
            lq = entry.local_queue_key
            counts[lq] = counts.get(lq, 0) + 1
        return counts

    def __len__(self) -> int:
        c = self.counts()
        return c.active + c.parked + c.in_flight

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None


QueueFactory = Callable[[QueueSettings], PendingQueue]
"""What a plugin provides: given a ClusterQueue's settings, a new queue for it."""
