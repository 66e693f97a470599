"""A sorted sequence kept as consecutive runs, for queues that publish incrementally.

Values are stored in the order of their (unique) keys, cut into runs of between
``load / 2`` and ``2 * load`` values. An insertion or removal rewrites the run it lands
in (and a neighbour when runs split or merge) and leaves every other run's list and
values as they were, so a reader that keeps copies of the runs finds what changed by
comparing them, without walking the whole sequence: that is what
:meth:`PendingQueue.ordered_runs` exposes to the snapshot publisher.

Costs: insertion and removal O(log n + load); a position O(log n), plus O(#runs) once
after a change to recompute where runs start; a slice from an offset O(log n + k).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from itertools import accumulate, chain, islice
from typing import Any, Generic, TypeVar

K = TypeVar("K")  # must be totally ordered; keys are unique
V = TypeVar("V")

DEFAULT_LOAD = 1000


class SortedRuns(Generic[K, V]):
    def __init__(self, load: int = DEFAULT_LOAD) -> None:
        if load < 2:
            raise ValueError(f"load must be at least 2, got {load}")
        self._load = load
        self._keys: list[list[Any]] = []  # per run, its keys in order
        self._runs: list[list[V]] = []  # per run, the values of those keys
        self._maxes: list[Any] = []  # per run, its last key
        self._starts: list[int] | None = None  # per run, its offset; None: recompute
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def add(self, key: K, value: V) -> None:
        """Insert `value` under `key`, which must not be present."""
        self._starts = None
        self._len += 1
        if not self._maxes:
            self._keys.append([key])
            self._runs.append([value])
            self._maxes.append(key)
            return
        i = bisect_left(self._maxes, key)
        if i == len(self._maxes):
            i -= 1
            self._keys[i].append(key)
            self._runs[i].append(value)
            self._maxes[i] = key
        else:
            keys = self._keys[i]
            j = bisect_left(keys, key)
            keys.insert(j, key)
            self._runs[i].insert(j, value)
        if len(self._keys[i]) > 2 * self._load:
            self._split(i)

    def remove(self, key: K) -> V:
        """Remove `key` and return its value; ValueError if it is not present."""
        i, j = self._find(key)
        self._starts = None
        self._len -= 1
        keys = self._keys[i]
        del keys[j]
        value = self._runs[i].pop(j)
        if not keys:
            del self._keys[i], self._runs[i], self._maxes[i]
            return value
        self._maxes[i] = keys[-1]
        if len(keys) < self._load // 2 and len(self._keys) > 1:
            self._merge(i - 1 if i > 0 else i)
        return value

    def index(self, key: K) -> int:
        """The position of `key`; ValueError if it is not present."""
        i, j = self._find(key)
        return self._offsets()[i] + j

    def bisect(self, key: Any) -> int:
        """How many keys sort before `key` (which need not be present)."""
        i = bisect_left(self._maxes, key)
        if i == len(self._maxes):
            return self._len
        return self._offsets()[i] + bisect_left(self._keys[i], key)

    def islice(self, offset: int) -> Iterator[V]:
        """The values from position `offset` on, lazily (no change while in use)."""
        if offset >= self._len:
            return iter(())
        starts = self._offsets()
        i = bisect_right(starts, offset) - 1
        first = islice(self._runs[i], offset - starts[i], None)
        return chain(first, chain.from_iterable(islice(self._runs, i + 1, None)))

    def __iter__(self) -> Iterator[V]:
        return chain.from_iterable(self._runs)

    def runs(self) -> Sequence[Sequence[V]]:
        """The runs themselves, live: read them in one step and copy what you keep."""
        return self._runs

    def _find(self, key: K) -> tuple[int, int]:
        i = bisect_left(self._maxes, key)
        if i < len(self._maxes):
            keys = self._keys[i]
            j = bisect_left(keys, key)
            if j < len(keys) and keys[j] == key:
                return i, j
        raise ValueError(f"{key!r} is not present")

    def _offsets(self) -> list[int]:
        starts = self._starts
        if starts is None:
            starts = self._starts = list(accumulate(map(len, self._runs), initial=0))
        return starts

    def _split(self, i: int) -> None:
        keys, values = self._keys[i], self._runs[i]
        half = len(keys) // 2
        self._keys[i : i + 1] = [keys[:half], keys[half:]]
        self._runs[i : i + 1] = [values[:half], values[half:]]
        self._maxes[i : i + 1] = [keys[half - 1], keys[-1]]

    def _merge(self, i: int) -> None:
        """Merge run i+1 into run i (split again if that makes it too long)."""
        self._keys[i].extend(self._keys.pop(i + 1))
        self._runs[i].extend(self._runs.pop(i + 1))
        del self._maxes[i]
        if len(self._keys[i]) > 2 * self._load:
            self._split(i)
