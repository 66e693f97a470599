"""The pending order of a ClusterQueue as pages: the chunked view a snapshot holds.

Cost model (docs/visibility-api.md#one-immutable-snapshot-per-response): a ClusterQueue page is an
O(limit) walk from a bisection over chunk offsets, a LocalQueue page the same over that LocalQueue's
per-chunk counts, a position lookup two hash look-ups. A view is a tuple of immutable
:class:`ViewChunk`s; consecutive views of a ClusterQueue share the chunks that did not
change, so a republish after k changes rebuilds O(k) chunks plus O(#chunks) of
offsets, in slices (:class:`ViewAssembly`), and the event loop runs between them.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, overload

from immutables import Map, MapMutation

from scheduler.runtime.workload_records import LocalQueueKey, PendingEntry, WorkloadKey


class PageItem(NamedTuple):
    """One item of a page: an entry and its two positions. A tuple, not a frozen
    dataclass: pages build one per item, and a frozen dataclass costs ~1 µs to make."""

    entry: PendingEntry
    position_in_cluster_queue: int
    position_in_local_queue: int


# Positions inside a chunk, as shared int objects: a chunk's index and LocalQueue
# positions would otherwise make one int object (28 bytes) for each entry past 256
# (docs/benchmarks.md, "Cluster-mode memory"). Chunks hold up to a few thousand entries;
# a longer one (a caller's own chunk size) makes its own ints past the table.
_POSITIONS = tuple(range(4096))


def _position(i: int) -> int:
    return _POSITIONS[i] if i < len(_POSITIONS) else i


class ViewChunk:
    """A run of consecutive entries of a view and what positions inside it need.

    Immutable once built, and shared between consecutive views of a ClusterQueue: a
    publish rebuilds only the chunks whose entries changed. `cell` names the chunk's
    place across rebuilds (a rebuilt chunk usually keeps the cell of the one it
    replaces), so the view's workload → cell map changes only for workloads that moved
    between cells.
    """

    __slots__ = (
        "__weakref__",  # the visibility server memoizes renderings by chunk identity
        "by_lq",
        "cell",
        "entries",
        "fingerprints",
        "index_of",
        "lq_local",
    )

    def __init__(self, entries: tuple[PendingEntry, ...], cell: int) -> None:
        by_lq: dict[LocalQueueKey, list[int]] = {}
        lq_local: list[int] = []
        index_of: dict[WorkloadKey, int] = {}
        for i, entry in enumerate(entries):
            lq = (entry.namespace, entry.local_queue)
            members = by_lq.get(lq)
            if members is None:
                members = by_lq[lq] = []
            position = _position(i)
            lq_local.append(_position(len(members)))
            members.append(position)
            index_of[entry.key] = position
        self.entries = entries
        self.cell = cell
        # position of each entry among the entries of its LocalQueue in this chunk
        self.lq_local = tuple(lq_local)
        # LocalQueue -> indexes (in this chunk) of its entries
        self.by_lq: Mapping[LocalQueueKey, tuple[int, ...]] = {
            k: tuple(v) for k, v in by_lq.items()
        }
        self.index_of: Mapping[WorkloadKey, int] = index_of
        self.fingerprints = b"".join([e.fingerprint for e in entries])

    def __len__(self) -> int:
        return len(self.entries)


class _Entries(Sequence[PendingEntry]):
    """A view's entries in order, read through its chunks (no flat copy)."""

    __slots__ = ("_view",)

    def __init__(self, view: ClusterQueueView) -> None:
        self._view = view

    def __len__(self) -> int:
        return len(self._view)

    @overload
    def __getitem__(self, index: int) -> PendingEntry: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[PendingEntry, ...]: ...
    def __getitem__(self, index: int | slice) -> PendingEntry | tuple[PendingEntry, ...]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(index)
        return self._view.entry(index)

    def __iter__(self) -> Iterator[PendingEntry]:
        for chunk in self._view.chunks:
            yield from chunk.entries


class _LocalQueueIndexes(Sequence[int]):
    """The ClusterQueue indexes of one LocalQueue's entries, in order; O(1) length."""

    __slots__ = ("_name", "_namespace", "_view")

    def __init__(self, view: ClusterQueueView, namespace: str, name: str) -> None:
        self._view = view
        self._namespace = namespace
        self._name = name

    def __len__(self) -> int:
        return self._view.local_queue_count(self._namespace, self._name)

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[int, ...]: ...
    def __getitem__(self, index: int | slice) -> int | tuple[int, ...]:
        n = len(self)
        if isinstance(index, slice):
            start, stop, step = index.indices(n)
            if step != 1:
                return tuple(self[i] for i in range(start, stop, step))
            items = self._view.local_queue_page(self._namespace, self._name, start, stop - start)
            return tuple(i.position_in_cluster_queue for i in items)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(index)
        page = self._view.local_queue_page(self._namespace, self._name, index, 1)
        return page[0].position_in_cluster_queue

    def __iter__(self) -> Iterator[int]:
        return self._view.local_queue_positions(self._namespace, self._name)


@dataclass(frozen=True, slots=True)
class ViewOffsets:
    """Where things are in a view's chunks, computed once by :class:`ViewAssembly`."""

    starts: tuple[int, ...]  # len(chunks) + 1 offsets
    # per chunk: for each LocalQueue in it, its entries in earlier chunks
    lq_before: tuple[Mapping[LocalQueueKey, int], ...]
    # per LocalQueue: (chunk numbers holding it, cumulative counts up to each)
    lq_runs: Mapping[LocalQueueKey, tuple[tuple[int, ...], tuple[int, ...]]]


class ClusterQueueView:
    """The pending order of one ClusterQueue, frozen at one instant.

    Held as a tuple of :class:`ViewChunk`s with their start offsets, so a page is a
    bisection plus an O(limit) walk, a position lookup two hash look-ups (workload →
    cell → chunk) and one bisection-free index, and a LocalQueue page a bisection in
    that LocalQueue's per-chunk cumulative counts plus an O(limit) walk.
    """

    __slots__ = (
        "__weakref__",  # the visibility server memoizes renderings by view identity
        "_cells",
        "_chunk_at",
        "_lq_before",
        "_lq_runs",
        "_starts",
        "chunks",
        "digest",
        "name",
    )

    def __init__(
        self,
        name: str,
        chunks: tuple[ViewChunk, ...],
        cells: Mapping[WorkloadKey, int],
        digest: str,
        offsets: ViewOffsets,
    ) -> None:
        self.name = name
        self.chunks = chunks
        self._cells = cells  # workload -> the cell of the chunk holding it
        self._chunk_at = {chunk.cell: c for c, chunk in enumerate(chunks)}
        self._starts = offsets.starts
        self._lq_before = offsets.lq_before
        self._lq_runs = offsets.lq_runs
        self.digest = digest

    def __len__(self) -> int:
        return self._starts[-1]

    @property
    def entries(self) -> Sequence[PendingEntry]:
        return _Entries(self)

    @property
    def cells(self) -> Mapping[WorkloadKey, int]:
        """Workload -> the cell of its chunk (the publisher evolves it)."""
        return self._cells

    def _locate(self, index: int) -> tuple[int, int]:
        c = bisect_right(self._starts, index) - 1
        return c, index - self._starts[c]

    def _item_at(self, c: int, local: int) -> PageItem:
        chunk = self.chunks[c]
        entry = chunk.entries[local]
        lq = (entry.namespace, entry.local_queue)
        return PageItem(
            entry, self._starts[c] + local, self._lq_before[c][lq] + chunk.lq_local[local]
        )

    def entry(self, index: int) -> PendingEntry:
        """The entry at 0 <= `index` < len(self)."""
        c, local = self._locate(index)
        return self.chunks[c].entries[local]

    def item(self, index: int) -> PageItem:
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._item_at(*self._locate(index))

    def page(self, offset: int, limit: int) -> list[PageItem]:
        """Items [offset, offset+limit) of the ClusterQueue order: O(limit + log n)."""
        offset = max(0, offset)
        stop = min(len(self), offset + max(0, limit))
        if offset >= stop:
            return []
        c, local = self._locate(offset)
        items: list[PageItem] = []
        append = items.append
        remaining = stop - offset
        # One tight loop per chunk: pages build an item per entry, on the request path.
        while remaining > 0:
            chunk = self.chunks[c]
            entries, lq_local = chunk.entries, chunk.lq_local
            before, start = self._lq_before[c], self._starts[c]
            end = min(len(entries), local + remaining)
            for i in range(local, end):
                e = entries[i]
                append(PageItem(e, start + i, before[(e.namespace, e.local_queue)] + lq_local[i]))
            remaining -= end - local
            c, local = c + 1, 0
        return items

    def _lq_count(self, lq: LocalQueueKey) -> int:
        runs = self._lq_runs.get(lq)
        return 0 if runs is None else runs[1][-1]

    def _lq_items(self, lq: LocalQueueKey, offset: int, limit: int) -> list[PageItem]:
        runs = self._lq_runs.get(lq)
        offset = max(0, offset)
        if runs is None or limit <= 0:
            return []
        chunk_numbers, cumulative = runs
        stop = min(cumulative[-1], offset + limit)
        items: list[PageItem] = []
        j = bisect_right(cumulative, offset)
        position = offset
        while position < stop:
            c = chunk_numbers[j]
            chunk = self.chunks[c]
            members = chunk.by_lq[lq]
            first = cumulative[j] - len(members)  # LocalQueue position of members[0]
            start = self._starts[c]
            for k in range(position - first, min(len(members), stop - first)):
                local = members[k]
                items.append(PageItem(chunk.entries[local], start + local, first + k))
            position = min(cumulative[j], stop)
            j += 1
        return items

    def local_queue_indexes(self, namespace: str, name: str) -> Sequence[int]:
        """The LocalQueue's ClusterQueue indexes in order (lazy; its length is O(1))."""
        return _LocalQueueIndexes(self, namespace, name)

    def local_queue_positions(self, namespace: str, name: str) -> Iterator[int]:
        """The LocalQueue's ClusterQueue indexes in order, one chunk at a time."""
        lq = (namespace, name)
        runs = self._lq_runs.get(lq)
        if runs is None:
            return
        for c in runs[0]:
            start = self._starts[c]
            for local in self.chunks[c].by_lq[lq]:
                yield start + local

    def local_queue_count(self, namespace: str, name: str) -> int:
        return self._lq_count((namespace, name))

    def local_queue_page(
        self, namespace: str, name: str, offset: int, limit: int
    ) -> list[PageItem]:
        """The LocalQueue's subsequence, sliced: O(limit + log n)."""
        return self._lq_items((namespace, name), offset, limit)

    def _chunk_number(self, key: WorkloadKey) -> int | None:
        cell = self._cells.get(key)
        return self._chunk_at.get(cell) if cell is not None else None

    def position_of(self, namespace: str, name: str) -> PageItem | None:
        key = (namespace, name)
        c = self._chunk_number(key)
        if c is None:
            return None
        local = self.chunks[c].index_of.get(key)
        return None if local is None else self._item_at(c, local)

    def chunk_of(self, namespace: str, name: str) -> ViewChunk | None:
        """The chunk holding the workload (the forecasts are kept per chunk)."""
        c = self._chunk_number((namespace, name))
        return None if c is None else self.chunks[c]

    def local_queue_digest(self, namespace: str, name: str) -> str:
        """A LocalQueue view's identity: the ClusterQueue digest plus its key and binding."""
        h = hashlib.blake2b(digest_size=8)
        for part in (self.digest, namespace, name, self.name):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()


EMPTY_DIGEST = hashlib.blake2b(b"", digest_size=8).hexdigest()

# Entries per chunk of a view built from a flat list (tests, the simulator, the
# publisher's fallback for queues that do not expose their sorted runs).
CHUNK = 1024
# Chunks per slice of a view's assembly (offsets, LocalQueue counts, digest).
_ASSEMBLY_SLICE = 16


class _SteppedView:
    """A view made in steps: `steps()` yields to let the loop turn and sets `_view` last;
    `view` runs whatever steps are left."""

    _view: ClusterQueueView | None

    def steps(self) -> Iterator[None]:
        raise NotImplementedError

    @property
    def view(self) -> ClusterQueueView:
        if self._view is None:
            for _ in self.steps():
                pass
        assert self._view is not None
        return self._view


class ViewAssembly(_SteppedView):
    """Turns a sequence of chunks into a :class:`ClusterQueueView`, in slices.

    Work per view is O(#chunks + the LocalQueues of each chunk) plus hashing the
    chunks' fingerprints (C, about 1 ms per 100k entries); :meth:`steps` yields every
    few dozen chunks so a caller can give the loop a turn.
    """

    def __init__(
        self, name: str, chunks: Sequence[ViewChunk], cells: Mapping[WorkloadKey, int]
    ) -> None:
        self.name = name
        self.chunks = tuple(c for c in chunks if len(c))
        self.cells = cells
        self._view: ClusterQueueView | None = None

    def steps(self) -> Iterator[None]:
        starts = [0]
        lq_before: list[Mapping[LocalQueueKey, int]] = []
        running: dict[LocalQueueKey, int] = {}
        runs: dict[LocalQueueKey, tuple[list[int], list[int]]] = {}
        digest = hashlib.blake2b(digest_size=8)
        digest.update(self.name.encode())
        for c, chunk in enumerate(self.chunks):
            before: dict[LocalQueueKey, int] = {}
            for lq, members in chunk.by_lq.items():
                count = running.get(lq, 0)
                before[lq] = count
                count += len(members)
                running[lq] = count
                run = runs.get(lq)
                if run is None:
                    run = runs[lq] = ([], [])
                run[0].append(c)
                run[1].append(count)
            lq_before.append(before)
            starts.append(starts[-1] + len(chunk))
            digest.update(chunk.fingerprints)
            if (c + 1) % _ASSEMBLY_SLICE == 0:
                yield
        self._view = ClusterQueueView(
            self.name,
            self.chunks,
            self.cells,
            digest.hexdigest(),
            ViewOffsets(
                tuple(starts),
                tuple(lq_before),
                {lq: (tuple(a), tuple(b)) for lq, (a, b) in runs.items()},
            ),
        )


class ViewBuilder(_SteppedView):
    """Builds a :class:`ClusterQueueView` from a flat list of entries, in slices.

    :meth:`steps` yields after every ``chunk`` entries (one chunk of the view each) and
    during the assembly, so an asyncio caller can give the loop a turn; :attr:`view` is
    ready when the generator is exhausted.
    """

    def __init__(self, name: str, entries: Sequence[PendingEntry], chunk: int = CHUNK) -> None:
        self.name = name
        self.entries = tuple(entries)
        self.chunk = max(1, chunk)
        self._view: ClusterQueueView | None = None

    def steps(self) -> Iterator[None]:
        chunks: list[ViewChunk] = []
        cells: MapMutation[WorkloadKey, int] = Map[WorkloadKey, int]().mutate()
        for cell, start in enumerate(range(0, len(self.entries), self.chunk)):
            if cell:
                yield
            chunk = ViewChunk(self.entries[start : start + self.chunk], cell)
            for key in chunk.index_of:
                cells.set(key, cell)
            chunks.append(chunk)
        assembly = ViewAssembly(self.name, chunks, cells.finish())
        yield from assembly.steps()
        self._view = assembly.view


def build_view(name: str, entries: Sequence[PendingEntry]) -> ClusterQueueView:
    """Build a view in one go (tests, the simulator, small queues)."""
    return ViewBuilder(name, entries).view
