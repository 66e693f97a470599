"""Publishing immutable snapshots for the visibility server (visibility-api.md §4.1).

A publish:

1. **captures**, in one synchronous step, the listing (an immutable tuple of queue
   entries) of every ClusterQueue that may have changed, plus the LocalQueue table,
   the quota tree with its usage and the admission rates (O(#ClusterQueues +
   #Cohorts)), so all parts of one snapshot come from the same instant;
2. **builds**, in slices separated by ``await asyncio.sleep(0)``, the snapshot entry of
   every captured workload (cached per workload and ClusterQueue, rebuilt only when
   something it shows changed), then the view (:meth:`ViewBuilder.steps`), then the
   workload → ClusterQueue index;
3. **swaps** the snapshot reference and wakes the long-poll waiters.

Copy-on-write: only ClusterQueues marked dirty by the tracking queue manager
(:mod:`scheduler.runtime.changes`) are captured, and a captured ClusterQueue whose
entries equal those of its published view keeps that view object, so an unchanged
queue is never rebuilt and its view keeps its identity (and its memoized renderings).
A publish in which nothing changed does not bump the generation.

Publishes are coalesced: at most one starts per ``interval`` seconds, however many
changes were requested in between; and none is made before the initial sync. Details
that are not part of the order (a pending message) are read from the live workload
while its slice is built, so they may be up to one publish newer than the order; the
order itself is always the captured one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from operator import attrgetter
from types import MappingProxyType

from scheduler.core.queue.interface import QueueEntry
from scheduler.core.scheduler import Scheduler
from scheduler.runtime.capture import EntryToken, capture_quota, entry_token, make_entry
from scheduler.runtime.changes import TrackingQueueManager, install_tracking
from scheduler.runtime.estimates import AdmissionRates
from scheduler.runtime.snapshot import (
    EMPTY_SNAPSHOT,
    ClusterQueueView,
    LocalQueueKey,
    PendingEntry,
    Snapshot,
    ViewBuilder,
    WorkloadKey,
)

log = logging.getLogger(__name__)

# Entries per slice of a view build (ViewBuilder's chunk), and the time after which
# the entry mapping, whose cost per entry varies 10x (cached or new), yields.
DEFAULT_SLICE = 1000
DEFAULT_STEP_BUDGET = 0.004
_BATCH = 256
# dict.update of already built pairs is C code: larger slices cost about the same.
_INDEX_SLICE = 20_000

_Token = EntryToken


@dataclass(slots=True)
class PublishStats:
    """What publishing costs; read by tests, benchmarks and /metrics."""

    publishes: int = 0  # snapshots swapped in
    attempts: int = 0  # publish runs, including those that found nothing changed
    views_built: int = 0
    views_reused: int = 0
    last_capture_seconds: float = 0.0  # the one synchronous capture step
    last_total_seconds: float = 0.0  # capture to swap, yields included
    last_max_step_seconds: float = 0.0  # longest synchronous stretch of the last run
    max_step_seconds: float = 0.0  # longest synchronous stretch ever
    max_capture_seconds: float = 0.0


class _Steps:
    """Measures each synchronous stretch between yields to the loop."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.max = 0.0

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def end(self) -> float:
        elapsed = time.perf_counter() - self.started
        self.max = max(self.max, elapsed)
        return elapsed

    async def yield_(self) -> None:
        self.end()
        await asyncio.sleep(0)
        self.started = time.perf_counter()


_workload_key = attrgetter("namespace", "name")


@dataclass(slots=True)
class _EntryCache:
    """One ClusterQueue's last capture: workload key -> its QueueEntry, its snapshot
    entry and the display token the entry was made from (three dicts, so reusing an
    entry allocates nothing)."""

    queue_entries: dict[str, QueueEntry] = field(default_factory=dict)
    entries: dict[str, PendingEntry] = field(default_factory=dict)
    tokens: dict[str, _Token] = field(default_factory=dict)


@dataclass(slots=True)
class _Captured:
    name: str
    order: Sequence[QueueEntry]


class SnapshotPublisher:
    """Owns the published :class:`Snapshot` reference of one scheduler."""

    def __init__(
        self,
        scheduler: Scheduler,
        *,
        interval: float = 0.2,
        slice_size: int = DEFAULT_SLICE,
        step_budget: float = DEFAULT_STEP_BUDGET,
        synced: Callable[[], bool] = lambda: True,
        wait_for_sync: bool = True,
        rates: AdmissionRates | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.interval = interval
        self.slice_size = max(1, slice_size)
        self.step_budget = step_budget
        self.wait_for_sync = wait_for_sync
        self._synced = synced
        # Admission rates for the wait estimates; whoever admits feeds them.
        self.rates = rates if rates is not None else AdmissionRates()
        self._tracking: TrackingQueueManager | None = install_tracking(scheduler)
        if self._tracking is None:
            log.warning(
                "msg=%r",
                "scheduler already had queues: every publish captures every ClusterQueue",
            )
        self._snapshot: Snapshot = EMPTY_SNAPSHOT
        # per ClusterQueue: the entries of its last capture, to reuse unchanged ones
        self._entries: dict[str, _EntryCache] = {}
        # per ClusterQueue: (namespace, name) -> ClusterQueue, merged into the snapshot
        self._keys: dict[str, dict[WorkloadKey, str]] = {}
        self._requested = False
        self._wake: asyncio.Event | None = None
        self._changed: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None
        self._last_start = float("-inf")
        self.stats = PublishStats()

    # -- reading -------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        return self._snapshot

    @property
    def generation(self) -> int:
        return self._snapshot.generation

    @property
    def tracking(self) -> TrackingQueueManager | None:
        """The scheduler's tracking queue manager, if it could be installed."""
        return self._tracking

    async def wait_for_change(self, timeout: float, *, after: int | None = None) -> Snapshot:
        """The first snapshot whose generation differs from `after` (by default the
        current one), or the current snapshot once `timeout` seconds have passed."""
        generation = self._snapshot.generation if after is None else after
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout)
        while self._snapshot.generation == generation:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            event = self._changed_event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), remaining)
        return self._snapshot

    # -- requesting ----------------------------------------------------------------
    def request(self) -> None:
        """Something may have changed: publish within one interval."""
        self._requested = True
        if self._wake is not None:
            self._wake.set()

    async def run(self) -> None:
        """Publish requested changes, at most one publish per interval, until cancelled."""
        loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        if self._requested:
            self._wake.set()
        while True:
            await self._wake.wait()
            if self.wait_for_sync and not self._synced():
                # Until the initial load is complete the server answers 503 whatever
                # the snapshot holds: building views of a half-loaded, growing queue
                # would only take time from the load. The sync itself requests.
                self._wake.clear()
                continue
            delay = self._last_start + self.interval - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            self._wake.clear()
            self._requested = False
            try:
                await self.publish()
            except Exception:
                # A bug in building one snapshot must not stop publishing.
                log.exception("msg=%r", "snapshot publish failed")

    # -- publishing ----------------------------------------------------------------
    async def publish(self) -> bool:
        """Capture, build and swap one snapshot; False if nothing had changed."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            self._last_start = asyncio.get_running_loop().time()
            return await self._publish()

    async def _publish(self) -> bool:
        s = self.scheduler
        started = time.perf_counter()
        steps = _Steps()
        self.stats.attempts += 1
        previous = self._snapshot

        # (1) capture, in one synchronous step
        existing = set(s.cluster_queues)
        dirty = self._tracking.take_dirty() if self._tracking is not None else set(existing)
        targets = sorted((dirty & existing) | (existing - previous.views.keys()))
        captured: list[_Captured] = []
        for name in targets:
            queue = s.queues.queue(name)
            captured.append(_Captured(name, queue.listing() if queue is not None else ()))
        local_queues: dict[LocalQueueKey, str] = {
            (lq.namespace, lq.name): (lq.cluster_queue if lq.cluster_queue in existing else "")
            for lq in s.local_queues.values()
        }
        synced = self._synced()
        quota = capture_quota(s)
        velocities = self.rates.velocities(existing, s.now())
        capture = steps.end()
        self.stats.last_capture_seconds = capture
        self.stats.max_capture_seconds = max(self.stats.max_capture_seconds, capture)

        # (2) build the changed views, in slices
        views: dict[str, ClusterQueueView] = {
            name: view for name, view in previous.views.items() if name in existing
        }
        views_changed = views.keys() != previous.views.keys()
        for item in captured:
            await steps.yield_()
            entries = await self._entries_of(item, steps)
            old = previous.views.get(item.name)
            if old is not None and old.entries == entries:
                self.stats.views_reused += 1
                continue
            builder = ViewBuilder(item.name, entries, chunk=self.slice_size)
            for _ in builder.steps():
                await steps.yield_()
            views[item.name] = builder.view
            self.stats.views_built += 1
            views_changed = True
        for name in previous.views.keys() - existing:
            self._entries.pop(name, None)
            self._keys.pop(name, None)
        if not (
            views_changed
            or synced != previous.synced
            or local_queues != dict(previous.local_queues)
            or quota != previous.quota
            or velocities != dict(previous.velocities)
        ):
            self._finish(steps, started)
            return False

        # (3) the workload index (only if some view changed), then swap
        workloads = previous.workloads
        if views_changed:
            workloads = MappingProxyType(await self._merged_keys(sorted(views), steps))
        self._snapshot = Snapshot(
            generation=previous.generation + 1,
            synced=synced,
            views=MappingProxyType(dict(sorted(views.items()))),
            local_queues=MappingProxyType(local_queues),
            workloads=workloads,
            quota=quota,
            velocities=MappingProxyType(velocities),
        )
        self.stats.publishes += 1
        self._finish(steps, started)
        self._notify()
        return True

    async def _entries_of(self, item: _Captured, steps: _Steps) -> tuple[PendingEntry, ...]:
        """Snapshot entries of a captured order, reusing unchanged ones, in slices.

        Fast path: the queue replaces a workload's QueueEntry on every push and
        requeue, and everything an entry shows (spec, priority, the pending message)
        changes only together with one; so an identical QueueEntry means an identical
        snapshot entry, found without reading the workload. Otherwise the workload's
        display token decides, so a requeue that changed nothing visible still reuses
        its entry. The fast path allocates nothing per entry: at 100k entries, new
        container objects are what wakes the cyclic garbage collector.
        """
        workloads = self.scheduler.workloads
        old = self._entries.get(item.name) or _EntryCache()
        new = _EntryCache()
        old_queue, old_entry, old_token = old.queue_entries, old.entries, old.tokens
        queue_entries, by_key, tokens = new.queue_entries, new.entries, new.tokens
        entries: list[PendingEntry] = []
        append = entries.append
        keys: dict[WorkloadKey, str] = {}
        order = item.order
        for start in range(0, len(order), _BATCH):
            if steps.elapsed() > self.step_budget:
                await steps.yield_()
            for qe in order[start : start + _BATCH]:
                key = qe.key
                if old_queue.get(key) is qe:
                    entry = old_entry[key]
                    tokens[key] = old_token[key]
                else:
                    wl = workloads.get(key)
                    cached = old_entry.get(key)
                    if wl is None:
                        # Deleted after the capture: its last entry still describes it
                        # as it was when captured; without one it is left out.
                        if cached is None:
                            continue
                        entry = cached
                        tokens[key] = old_token[key]
                    else:
                        token = entry_token(wl)
                        if cached is not None and old_token.get(key) == token:
                            entry = cached
                        else:
                            entry = make_entry(wl)
                        tokens[key] = token
                queue_entries[key] = qe
                by_key[key] = entry
                append(entry)
            keys.update(dict.fromkeys(map(_workload_key, entries[len(keys) :]), item.name))
        # Replacing the whole per-CQ cache forgets workloads that left the queue.
        self._entries[item.name] = new
        self._keys[item.name] = keys
        return tuple(entries)

    async def _merged_keys(self, names: Sequence[str], steps: _Steps) -> dict[WorkloadKey, str]:
        merged: dict[WorkloadKey, str] = {}
        for name in names:
            part: Mapping[WorkloadKey, str] = self._keys.get(name, {})
            if len(part) <= _INDEX_SLICE:
                merged.update(part)
                continue
            items = iter(part.items())
            while chunk := list(islice(items, _INDEX_SLICE)):
                await steps.yield_()
                merged.update(chunk)
        return merged

    def _finish(self, steps: _Steps, started: float) -> None:
        steps.end()
        self.stats.last_max_step_seconds = steps.max
        self.stats.max_step_seconds = max(self.stats.max_step_seconds, steps.max)
        self.stats.last_total_seconds = time.perf_counter() - started

    def _changed_event(self) -> asyncio.Event:
        if self._changed is None:
            self._changed = asyncio.Event()
        return self._changed

    def _notify(self) -> None:
        event, self._changed = self._changed, None
        if event is not None:
            event.set()
