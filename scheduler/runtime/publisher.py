"""Publishing immutable snapshots for the visibility server
(docs/visibility-api.md#one-immutable-snapshot-per-response).

A publish:

0. **checks ahead**, in slices, the workloads the core's change feed named as pushed
   or requeued since the last capture: a requeue leaves an equal queue entry, so the
   run holding it compares equal, and only comparing the cached snapshot entry with
   the workload says whether what the snapshot shows of it changed
   (:mod:`scheduler.runtime.touched_keys`). The feed is drained again until it names
   at most ``sync_keys`` (256) unchecked keys, which step 1 checks itself; so step 1
   costs about 1 ms of checks however many workloads the engine touched (after 8
   drains it checks whatever the feed names then: what one engine step touched);
1. **captures**, in one synchronous step, the order of every ClusterQueue that may
   have changed, plus the LocalQueue table, the quota tree with its usage and the
   admission rates (O(#ClusterQueues + #Cohorts)), so all parts of one snapshot come
   from the same instant. The order is captured as the queue's runs
   (:meth:`PendingQueue.ordered_runs`: a FIFO queue stores its order as runs of about a
   thousand entries, any other queue gets runs cut where its content says, so a change
   leaves the other runs equal); each run is compared with the copy kept from the last
   capture (pointer comparisons in C, about 0.2 ms per 100k) and only runs that differ
   are copied;
2. **builds**, in slices separated by ``await asyncio.sleep(0)``, a
   :class:`ViewChunk` for each changed run only (snapshot entries cached per workload
   and rebuilt only when something they show changed), updates the persistent
   workload → chunk and workload → ClusterQueue maps for the workloads that moved
   (`immutables.Map`: a new version copies only the trie nodes on the changed keys'
   paths, docs/benchmarks.md "Snapshot maps"), and assembles the view from old and new
   chunks (O(#chunks));
3. **swaps** the snapshot reference and wakes the long-poll waiters.

So a republish after k changes costs O(k × run size + #chunks), not O(n), and
allocates little: at 100k entries, rebuilding every container on every publish was
what kept the cyclic garbage collector busy.

Copy-on-write: only ClusterQueues the core's change feed names
(:mod:`scheduler.core.changes`) are captured; a captured ClusterQueue whose chunks
are all unchanged keeps its view object, so an unchanged queue keeps its identity
(and its memoized renderings). A publish in which nothing changed does not bump the
generation. A run that compares equal may still hold replaced queue entries (a
requeue builds a new, equal entry); what the snapshot shows of those workloads (the
pending message) is re-checked for the keys the feed names as pushed or requeued
(step 0, and step 1 for the last few), and their chunk is rebuilt if it differs.

Publishes are coalesced: at most one starts per ``interval`` seconds, however many
changes were requested in between; and none is made before the initial sync. Details
that are not part of the order (a pending message) are read from the live workload
while its slice is built, so they may be up to one publish newer than the order; the
order itself is always the captured one.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from immutables import Map, MapMutation

from scheduler.core.queue.interface import PendingQueue, QueueEntry
from scheduler.core.scheduler import Scheduler
from scheduler.forecast.fork import Setup, setup_of
from scheduler.runtime.capture import capture_quota, entry_is_current, make_entry
from scheduler.runtime.estimates import AdmissionRates
from scheduler.runtime.forecast_facts import RunningCapture
from scheduler.runtime.heap_freezing import FreezePolicy
from scheduler.runtime.pages import ClusterQueueView, ViewAssembly, ViewChunk
from scheduler.runtime.snapshot import EMPTY_SNAPSHOT, Snapshot
from scheduler.runtime.stepclock import TimeBox, since, stamp
from scheduler.runtime.touched_keys import EntryCache, QueueMarks, TouchedKeys, drop_stale
from scheduler.runtime.workload_records import (
    FinishedWorkload,
    LocalQueueKey,
    PendingEntry,
    RunningWorkload,
    WorkloadKey,
)

log = logging.getLogger(__name__)

# Entries per chunk at most (runs of the queue's sorted list longer than this are cut),
# and the time after which a synchronous stretch of the build yields to the loop.
DEFAULT_SLICE = 2048
DEFAULT_STEP_BUDGET = 0.003
_BATCH = 32
_KEYS = 512  # map writes per stretch (about 0.2-0.5 ms)
# About what building a ViewChunk costs per entry (2,000 entries: 1.3-4 ms here).
_CHUNK_SECONDS_PER_ENTRY = 2e-6
# Touched keys the synchronous capture checks itself (about 4 µs each, so about 1 ms);
# while the feed names more, they are checked ahead in slices, for at most
# _AHEAD_ROUNDS drains (touched_keys.py).
DEFAULT_SYNC_KEYS = 256
_AHEAD_ROUNDS = 8


@dataclass(slots=True)
class PublishStats:
    """What publishing costs; read by tests, benchmarks and /metrics."""

    publishes: int = 0  # snapshots swapped in
    attempts: int = 0  # publish runs, including those that found nothing changed
    views_built: int = 0
    views_reused: int = 0
    chunks_built: int = 0  # view chunks made from a changed run
    chunks_reused: int = 0  # captured runs whose chunk was kept
    last_capture_seconds: float = 0.0  # the one synchronous capture step
    last_total_seconds: float = 0.0  # capture to swap, yields included
    last_max_step_seconds: float = 0.0  # longest synchronous stretch of the last run
    last_max_step_cpu_seconds: float = 0.0  # the most CPU one stretch of it used
    max_step_seconds: float = 0.0  # longest synchronous stretch ever
    max_step_cpu_seconds: float = 0.0  # the most CPU one stretch used (stepclock)
    max_capture_seconds: float = 0.0
    cpu_seconds: float = 0.0  # CPU of every publish run so far, all stretches
    last_capture_cpu_seconds: float = 0.0
    max_capture_cpu_seconds: float = 0.0
    # Touched keys whose cached entry was compared with the workload: ahead of the
    # capture, in slices, and inside the synchronous capture (all of them, and the
    # last capture's).
    checked_ahead: int = 0
    checked_in_capture: int = 0
    last_checked_in_capture: int = 0

    def reset_maxima(self) -> None:
        """Start a new window for the maxima (benchmarks measure one window)."""
        self.max_step_seconds = 0.0
        self.max_step_cpu_seconds = 0.0
        self.max_capture_seconds = 0.0
        self.max_capture_cpu_seconds = 0.0


@dataclass(slots=True)
class _Run:
    """A captured run of a ClusterQueue's order (a private copy of its QueueEntries)
    and the chunk built from it, once built."""

    raw: Sequence[QueueEntry]
    chunk: ViewChunk | None = None


@dataclass(slots=True)
class _QueueState:
    """What the publisher keeps of a ClusterQueue between publishes."""

    runs: list[_Run] = field(default_factory=list)  # the last capture, built
    cells: Map[WorkloadKey, int] = field(default_factory=Map)
    cache: EntryCache = field(default_factory=dict)


@dataclass(slots=True)
class _Captured:
    name: str
    runs: list[_Run]  # chunk None where the run changed
    # keys named since their last check (their entry is checked again when the run is
    # built); None: every key (rebuilding all)
    touched: set[str] | None


@dataclass(slots=True)
class _Moves:
    """Workload → ClusterQueue changes of one publish, applied after all views."""

    removed: list[WorkloadKey] = field(default_factory=list)
    added: list[tuple[WorkloadKey, str]] = field(default_factory=list)


def _runs_of(queue: PendingQueue | None, size: int) -> Sequence[Sequence[QueueEntry]]:
    """The queue's order as runs of at most `size` entries (possibly the queue's own
    live lists: copy what is kept)."""
    if queue is None:
        return ()
    live = queue.ordered_runs()
    if all(len(run) <= size for run in live):
        return live
    return [piece for run in live for piece in _pieces(run, size)]


# A run longer than a chunk ends a piece after each entry whose key hashes to zero in
# its last seven bits (about 128 entries a piece).
_PIECE_END_MASK = 127


def ends_piece(key: str) -> bool:
    """Whether a long run is cut after the workload of `key` (`_pieces`): the last bits
    of its hash are zero. The hash of a string differs between processes, and so do
    the cuts; only their being the same within one matters."""
    return not hash(key) & _PIECE_END_MASK


def _pieces(run: Sequence[QueueEntry], size: int) -> list[Sequence[QueueEntry]]:
    """`run` cut into pieces of at most `size` entries where its content says, as the
    queue's own runs are cut (`PendingQueue.ordered_runs`): a change inside a long run
    then rebuilds the piece it falls in, not every piece after it, as cutting at fixed
    offsets did. A piece still longer than `size` is cut every `size` entries."""
    if len(run) <= size:
        return [run]
    keys = (entry.key for entry in run)
    ends = [0, *itertools.compress(itertools.count(1), map(ends_piece, keys))]
    if ends[-1] != len(run):
        ends.append(len(run))
    return [
        run[i : min(i + size, end)]
        for start, end in itertools.pairwise(ends)
        for i in range(start, end, size)
    ]


def _reused_cell(
    entries: Sequence[PendingEntry], old_cells: Mapping[WorkloadKey, int], claimed: set[int]
) -> int | None:
    """A cell for a rebuilt chunk: the old cell of its first, middle or last workload,
    whichever is not taken yet. Keeping a cell means only the workloads that came from
    elsewhere get a new cell in the map; a chunk whose first workload is new (an
    arrival at the head) or the second half of a split run would otherwise move every
    one of its workloads to a new cell, O(chunk) map writes."""
    if not entries:
        return None
    for entry in (entries[0], entries[len(entries) // 2], entries[-1]):
        cell = old_cells.get(entry.key)
        if cell is not None and cell not in claimed:
            return cell
    return None


def _signature(run: Sequence[QueueEntry]) -> tuple[int, int, int]:
    return (id(run[0]), id(run[-1]), len(run))


def _same_chunks(a: Sequence[ViewChunk], b: Sequence[ViewChunk]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


@dataclass(frozen=True, slots=True)
class PublishPacing:
    """How often the publisher publishes and in what steps."""

    interval: float = 0.2  # seconds between the starts of two publishes, at least
    slice_size: int = DEFAULT_SLICE  # entries per chunk
    step_budget: float = DEFAULT_STEP_BUDGET  # seconds of work between two loop turns
    wait_for_sync: bool = True  # publish nothing before `synced()` says so
    sync_keys: int = DEFAULT_SYNC_KEYS  # touched keys the capture checks itself, at most


@dataclass(frozen=True, slots=True)
class PublisherLinks:
    """What the publisher is connected to; each part has a stand-alone default."""

    synced: Callable[[], bool] = lambda: True
    rates: AdmissionRates | None = None  # fed by whoever admits
    collector: FreezePolicy | None = None
    changes: Callable[[], QueueMarks] | None = None  # the queue marks, if not the core's feed


class SnapshotPublisher:
    """Owns the published :class:`Snapshot` reference of one scheduler."""

    def __init__(
        self,
        scheduler: Scheduler,
        *,
        pacing: PublishPacing | None = None,
        links: PublisherLinks | None = None,
    ) -> None:
        pacing = pacing if pacing is not None else PublishPacing()
        links = links if links is not None else PublisherLinks()
        self.scheduler = scheduler
        # Freezes the heap after enough new snapshot entries (see heap_freezing.py).
        self.collector = links.collector if links.collector is not None else FreezePolicy(None)
        self.interval = pacing.interval
        self.slice_size = max(1, pacing.slice_size)
        self.step_budget = pacing.step_budget
        self.sync_keys = max(0, pacing.sync_keys)
        self.wait_for_sync = pacing.wait_for_sync
        self._synced = links.synced
        # Admission rates for the wait estimates; whoever admits feeds them.
        self.rates = links.rates if links.rates is not None else AdmissionRates()
        # Where the queue marks come from: the core's change feed, drained here unless
        # someone who drains it for other needs too (the engine) hands them over.
        # ClusterQueues published before the feed was followed have no view yet, so
        # the first publish captures them all.
        scheduler.follow_changes()
        self._changes = links.changes if links.changes is not None else self._drain_feed
        self._snapshot: Snapshot = EMPTY_SNAPSHOT
        # per ClusterQueue: its last capture and chunks, its cells, its entry cache
        self._queues: dict[str, _QueueState] = {}
        # (namespace, name) -> ClusterQueue of every published view
        self._workloads: Map[WorkloadKey, str] = Map()
        self._cell_ids = itertools.count()
        self._forget_views = False  # set when a publish failed: rebuild everything
        self._requested = False
        self._wake: asyncio.Event | None = None
        self._changed: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None
        self._last_start = float("-inf")
        # The quota holders and finishes the forecast worker is fed (forecast_facts.py).
        self._running = RunningCapture()
        self.stats = PublishStats()

    # -- reading -------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        return self._snapshot

    @property
    def generation(self) -> int:
        return self._snapshot.generation

    def _drain_feed(self) -> QueueMarks:
        return self.scheduler.take_changes().queues

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
        try:
            return await self._publish_once()
        except BaseException:
            # What is kept between publishes may be half updated: the next publish
            # rebuilds every view from scratch (the dirty marks were taken).
            self._queues.clear()
            self._workloads = Map()
            self._forget_views = True
            raise

    async def _publish_once(self) -> bool:
        s = self.scheduler
        started = time.perf_counter()
        steps = TimeBox(self.step_budget)
        self.stats.attempts += 1
        previous = self._snapshot

        # (0) check the keys the feed names, ahead of the capture, in slices
        rebuild_all = self._forget_views
        self._forget_views = False
        touched = TouchedKeys()
        if not rebuild_all:
            await self._check_ahead(touched, steps)

        # (1) capture, in one synchronous step
        capture_started = stamp()
        existing = set(s.objects.cluster_queues)
        touched.add(self._changes(), self._queues.__contains__)
        self.stats.last_checked_in_capture = 0
        dirty = set(existing) if rebuild_all else touched.names()
        targets = sorted((dirty & existing) | (existing - previous.views.keys()))
        captured = [self._capture(name, None if rebuild_all else touched) for name in targets]
        local_queues: dict[LocalQueueKey, str] = {
            (lq.namespace, lq.name): (lq.cluster_queue if lq.cluster_queue in existing else "")
            for lq in s.objects.local_queues.values()
        }
        synced = self._synced()
        quota = capture_quota(s)
        velocities = self.rates.velocities(existing, s.now())
        setup, holders = self._capture_forecast_inputs(previous)
        self._count_capture(since(capture_started))

        # (2) build the changed chunks and views, in slices
        views: dict[str, ClusterQueueView] = {
            name: view for name, view in previous.views.items() if name in existing
        }
        views_changed = views.keys() != previous.views.keys()
        moves = _Moves()
        for item in captured:
            await steps.yield_()
            view = await self._build(item, previous.views.get(item.name), moves, steps)
            if view is previous.views.get(item.name):
                self.stats.views_reused += 1
                continue
            views[item.name] = view
            self.stats.views_built += 1
            views_changed = True
        running, finished = await self._running_and_finished(holders, steps)
        for name in previous.views.keys() - existing:
            self._queues.pop(name, None)
            for chunk in previous.views[name].chunks:
                moves.removed.extend(chunk.index_of)
                await steps.pause()
        if not (
            views_changed
            or synced != previous.synced
            or local_queues != dict(previous.local_queues)
            or quota != previous.quota
            or velocities != dict(previous.velocities)
            or setup is not previous.setup
            or running is not previous.running
            or finished is not previous.finished
        ):
            self._finish(steps, started)
            return False

        # (3) the workload index (only for workloads that came or left), then swap
        workloads = await self._index(moves, steps)
        self._snapshot = Snapshot(
            generation=previous.generation + 1,
            synced=synced,
            views=MappingProxyType(dict(sorted(views.items()))),
            local_queues=MappingProxyType(local_queues),
            workloads=workloads,
            quota=quota,
            velocities=MappingProxyType(velocities),
            setup=setup,
            running=running,
            finished=finished,
        )
        self.stats.publishes += 1
        self._finish(steps, started)
        self._notify()
        return True

    async def _check_ahead(self, touched: TouchedKeys, steps: TimeBox) -> None:
        """Drain the feed and check the keys it names, in slices, until it names at most
        `sync_keys` unchecked ones; those are left to the capture. Every drain after the
        first follows a yield, so the capture starts a stretch of its own; after
        _AHEAD_ROUNDS drains the capture takes whatever the feed names then."""
        for round_ in range(_AHEAD_ROUNDS):
            if round_:
                await steps.yield_()
            touched.add(self._changes(), self._queues.__contains__)
            if touched.pending <= self.sync_keys:
                return
            for cq, keys in touched.take_unchecked():
                for start in range(0, len(keys), _BATCH):
                    await steps.pause()
                    batch = keys[start : start + _BATCH]
                    state = self._queues.get(cq)
                    if state is not None:
                        touched.found_stale(cq, self._stale_cells(state, batch))
                    self.stats.checked_ahead += len(batch)
        await steps.yield_()

    def _stale_cells(self, state: _QueueState, keys: Iterable[str]) -> set[int]:
        """The cells of the chunks showing a key of `keys` whose cached entry is stale
        (those entries are dropped)."""
        stale = drop_stale(
            state.cache,
            keys,
            self.scheduler.objects.workloads,
            self.scheduler.config.eviction_ordering,
        )
        cells = state.cells
        found: set[int] = set()
        for key in stale:
            namespace, _, name = key.partition("/")
            cell = cells.get((namespace, name))
            if cell is not None:
                found.add(cell)
        return found

    def _count_capture(self, spent: tuple[float, float]) -> None:
        stats = self.stats
        stats.last_capture_seconds, stats.last_capture_cpu_seconds = spent
        stats.max_capture_seconds = max(stats.max_capture_seconds, spent[0])
        stats.max_capture_cpu_seconds = max(stats.max_capture_cpu_seconds, spent[1])
        stats.checked_in_capture += stats.last_checked_in_capture

    async def _index(self, moves: _Moves, steps: TimeBox) -> Map[WorkloadKey, str]:
        """The workload -> ClusterQueue map, edited for the workloads that came or left."""
        workloads = self._workloads
        if moves.removed or moves.added:
            editor = workloads.mutate()
            for i, key in enumerate(moves.removed):
                editor.pop(key, None)
                if i % _BATCH == 0:
                    self.collector.built(min(_BATCH, len(moves.removed) - i))
                    await steps.pause()
            for i, (key, cq) in enumerate(moves.added):
                editor.set(key, cq)
                if i % _BATCH == 0:
                    # Like the cells map's: the new trie nodes live as long as the
                    # snapshot, and a million of them uncounted made a 260 ms full
                    # collection (docs/benchmarks.md, "Forecasts at a million pending").
                    self.collector.built(min(_BATCH, len(moves.added) - i))
                    await steps.pause()
            workloads = self._workloads = editor.finish()
        return workloads

    def _capture_forecast_inputs(self, previous: Snapshot) -> tuple[Setup, list[str] | None]:
        """The configuration (the previous snapshot's object if unchanged, so readers
        compare identity) and the quota holders' keys (None: as at the last capture),
        for the forecast worker."""
        s = self.scheduler
        setup = setup_of(s)
        if previous.setup is not None and setup == previous.setup:
            setup = previous.setup
        return setup, None if self._running.unchanged(s) else s.holders.all_keys()

    async def _running_and_finished(
        self, holders: list[str] | None, steps: TimeBox
    ) -> tuple[tuple[RunningWorkload, ...], tuple[FinishedWorkload, ...]]:
        if holders is not None:
            for _ in self._running.steps(self.scheduler, holders):
                await steps.pause()
        return self._running.running, self._running.finished

    def _capture(self, name: str, touched: TouchedKeys | None) -> _Captured:
        """The runs of one ClusterQueue's order, reusing unchanged runs (synchronous);
        a run showing a stale entry is captured afresh, so its chunk is rebuilt."""
        state = self._queues.get(name)
        live = [run for run in _runs_of(self.scheduler.queues.queue(name), self.slice_size) if run]
        old_runs: dict[tuple[int, int, int], _Run] = {}
        if state is not None and touched is not None:
            old_runs = {_signature(r.raw): r for r in state.runs if r.raw and r.chunk}
        runs: list[_Run] = []
        for run in live:
            old = old_runs.get(_signature(run)) if old_runs else None
            if old is not None and run == old.raw:
                runs.append(old)
            else:
                runs.append(_Run(list(run)))
        if touched is None:
            return _Captured(name, runs, None)
        unchecked = touched.unchecked_of(name)
        if state is not None:
            stale = touched.stale_cells(name)
            if unchecked:
                stale = self._stale_cells(state, unchecked) | set(stale)
                self.stats.last_checked_in_capture += len(unchecked)
            for i, r in enumerate(runs):
                if r.chunk is not None and r.chunk.cell in stale:
                    runs[i] = _Run(list(live[i]))
        return _Captured(name, runs, unchecked)

    async def _build(
        self,
        item: _Captured,
        old_view: ClusterQueueView | None,
        moves: _Moves,
        steps: TimeBox,
    ) -> ClusterQueueView:
        """The view of a captured ClusterQueue: old chunks where the run is unchanged,
        new ones elsewhere; the old view itself if no chunk changed."""
        state = self._queues.get(item.name)
        if state is None:
            state = self._queues[item.name] = _QueueState()
        old_cells = state.cells
        old_chunks = {r.chunk.cell: r.chunk for r in state.runs if r.chunk is not None}
        built = await self._fill_runs(item, state, old_chunks, steps)
        chunks = [r.chunk for r in item.runs if r.chunk is not None and len(r.chunk)]
        if old_view is not None and _same_chunks(chunks, old_view.chunks):
            state.runs = item.runs
            return old_view

        # Workloads whose cell changed, and those that came or left; in slices of
        # _KEYS keys, since a chunk holds up to `slice_size` of them.
        editor: MapMutation[WorkloadKey, int] = old_cells.mutate()
        present: set[WorkloadKey] = set()
        for chunk in built:
            keys = list(chunk.index_of)
            present.update(keys)
            cell = chunk.cell
            for start in range(0, len(keys), _KEYS):
                written = 0
                for key in keys[start : start + _KEYS]:
                    was = old_cells.get(key)
                    if was != cell:
                        editor.set(key, cell)
                        written += 1
                        if was is None:
                            moves.added.append((key, item.name))
                # The map's new trie nodes live as long as the entries do (heap_freezing.py).
                self.collector.built(written)
                await steps.pause()
        kept = {id(c) for c in chunks}
        for old in old_chunks.values():
            if id(old) in kept:
                continue
            gone = [key for key in old.index_of if key not in present]
            await steps.pause()
            for start in range(0, len(gone), _KEYS):
                for key in gone[start : start + _KEYS]:
                    editor.pop(key, None)
                    state.cache.pop(f"{key[0]}/{key[1]}", None)
                await steps.pause()
            moves.removed.extend(gone)
        state.runs = item.runs
        state.cells = editor.finish()
        assembly = ViewAssembly(item.name, chunks, state.cells)
        for _ in assembly.steps():
            await steps.pause()
        return assembly.view

    async def _fill_runs(
        self,
        item: _Captured,
        state: _QueueState,
        old_chunks: dict[int, ViewChunk],
        steps: TimeBox,
    ) -> list[ViewChunk]:
        """Give every changed run of `item` a chunk: the old one of its cell if its entries
        are the same, a new one otherwise (returned, in order)."""
        claimed = {r.chunk.cell for r in item.runs if r.chunk is not None}
        built: list[ViewChunk] = []
        for run in item.runs:
            if run.chunk is not None:
                self.stats.chunks_reused += 1
                continue
            entries = await self._entries(run.raw, item, state, steps)
            cell = _reused_cell(entries, state.cells, claimed)
            if cell is None:
                cell = next(self._cell_ids)
            claimed.add(cell)
            old = old_chunks.get(cell)
            if old is not None and old.entries == entries:
                run.chunk = old
                self.stats.chunks_reused += 1
            else:
                await steps.pause(ahead=_CHUNK_SECONDS_PER_ENTRY * len(entries))
                run.chunk = ViewChunk(entries, cell)
                built.append(run.chunk)
                self.stats.chunks_built += 1
                self.collector.built(len(entries))
            await steps.pause()
        return built

    async def _entries(
        self, raw: Sequence[QueueEntry], item: _Captured, state: _QueueState, steps: TimeBox
    ) -> tuple[PendingEntry, ...]:
        """Snapshot entries of a captured run, reusing unchanged ones, in slices.

        Fast path: the queue replaces a workload's QueueEntry on every push and
        requeue, and everything an entry shows (spec, priority, the pending message)
        changes only together with one; so an identical QueueEntry of a workload not
        touched since the last publish means an identical snapshot entry, found
        without reading the workload. Otherwise the workload's display token decides,
        so a requeue that changed nothing visible still reuses its entry.
        """
        workloads = self.scheduler.objects.workloads
        ordering = self.scheduler.config.eviction_ordering
        cache = state.cache
        touched = item.touched
        entries: list[PendingEntry] = []
        append = entries.append
        for start in range(0, len(raw), _BATCH):
            await steps.pause()
            for qe in raw[start : start + _BATCH]:
                key = qe.key
                cached = cache.get(key)
                if (
                    cached is not None
                    and cached[0] is qe
                    and touched is not None
                    and key not in touched
                ):
                    append(cached[1])
                    continue
                wl = workloads.get(key)
                if wl is None:
                    # Deleted after the capture: its last entry still describes it
                    # as it was when captured; without one it is left out.
                    if cached is not None:
                        append(cached[1])
                    continue
                entry = cached[1] if cached is not None else None
                if entry is None or not entry_is_current(entry, wl, ordering):
                    entry = make_entry(wl, ordering)
                cache[key] = (qe, entry)
                append(entry)
        return tuple(entries)

    def _finish(self, steps: TimeBox, started: float) -> None:
        steps.end()
        self.stats.last_max_step_seconds = steps.max
        self.stats.last_max_step_cpu_seconds = steps.max_cpu
        self.stats.max_step_seconds = max(self.stats.max_step_seconds, steps.max)
        self.stats.max_step_cpu_seconds = max(self.stats.max_step_cpu_seconds, steps.max_cpu)
        self.stats.cpu_seconds += steps.total_cpu
        self.stats.last_total_seconds = time.perf_counter() - started

    def _changed_event(self) -> asyncio.Event:
        if self._changed is None:
            self._changed = asyncio.Event()
        return self._changed

    def _notify(self) -> None:
        event, self._changed = self._changed, None
        if event is not None:
            event.set()
