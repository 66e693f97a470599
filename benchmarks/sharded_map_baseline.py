"""The snapshot maps before `immutables.Map` (kept as the baseline of
`benchmarks/snapshot_maps.py`; docs/benchmarks.md, "Snapshot maps").

An immutable hash map whose next version shares what did not change.

The snapshot's lookup tables (workload → ClusterQueue, workload → view chunk) hold one
entry per pending workload. Rebuilding them on every publish is O(n); copying a plain
dict is O(n) too. :class:`ShardedMap` splits the keys over a fixed number of small
dicts by hash: a new version copies only the shards whose keys changed, so k changes
cost O(k × n / SHARDS) and a look-up stays one hash and two indexings.

A published map is never mutated. :meth:`ShardedMap.edit` returns a private
:class:`MapEditor` that copies a shard the first time it writes to it; the editor may
be used across yields to the event loop (nothing sees it until :meth:`MapEditor.finish`).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping
from typing import Generic, TypeVar, overload

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
D = TypeVar("D")

# 8,192 shards: a publish after k arrivals copies about k shards per map, and each copy
# is a young object the collector's next pass walks in full. At 127k entries, 1,024
# shards (~125 entries each) made young passes of up to 10 ms of CPU (150k references
# visited); 8,192 (~15 each) brought them under 3.5 ms, for ~15 bytes more per entry
# (small dicts have more slack) and a 64 KiB top-level tuple per map version.
SHARD_BITS = 13
SHARDS = 1 << SHARD_BITS
_MASK = SHARDS - 1


class ShardedMap(Mapping[K, V], Generic[K, V]):
    """An immutable mapping of SHARDS dicts (None for an empty one)."""

    __slots__ = ("_len", "_shards")

    def __init__(self, shards: tuple[dict[K, V] | None, ...] | None = None, length: int = 0):
        self._shards: tuple[dict[K, V] | None, ...] = (
            shards if shards is not None else (None,) * SHARDS
        )
        self._len = length

    @classmethod
    def from_pairs(cls, pairs: Mapping[K, V]) -> ShardedMap[K, V]:
        editor: MapEditor[K, V] = cls().edit()
        for key, value in pairs.items():
            editor.set(key, value)
        return editor.finish()

    @overload
    def get(self, key: K, /) -> V | None: ...
    @overload
    def get(self, key: K, default: V | D, /) -> V | D: ...
    def get(self, key: K, default: object = None) -> object:
        shard = self._shards[hash(key) & _MASK]
        return default if shard is None else shard.get(key, default)

    def __getitem__(self, key: K) -> V:
        shard = self._shards[hash(key) & _MASK]
        if shard is None:
            raise KeyError(key)
        return shard[key]

    def __contains__(self, key: object) -> bool:
        shard = self._shards[hash(key) & _MASK]
        return shard is not None and key in shard

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[K]:
        for shard in self._shards:
            if shard:
                yield from shard

    def edit(self) -> MapEditor[K, V]:
        """A private, mutable next version of this map."""
        return MapEditor(self)


class MapEditor(Generic[K, V]):
    """Builds the next version of a :class:`ShardedMap`, copying shards on first write."""

    __slots__ = ("_len", "_owned", "_shards")

    def __init__(self, base: ShardedMap[K, V]) -> None:
        self._shards: list[dict[K, V] | None] = list(base._shards)  # noqa: SLF001 - the editor of this map type
        self._owned = bytearray(SHARDS)  # 1 where the shard is this editor's own copy
        self._len = len(base)

    def _writable(self, index: int) -> dict[K, V]:
        shard = self._shards[index]
        if not self._owned[index]:
            shard = {} if shard is None else shard.copy()
            self._shards[index] = shard
            self._owned[index] = 1
        assert shard is not None
        return shard

    def get(self, key: K) -> V | None:
        shard = self._shards[hash(key) & _MASK]
        return None if shard is None else shard.get(key)

    def set(self, key: K, value: V) -> None:
        shard = self._writable(hash(key) & _MASK)
        if key not in shard:
            self._len += 1
        shard[key] = value

    def delete(self, key: K) -> None:
        """Remove `key` if present."""
        index = hash(key) & _MASK
        shard = self._shards[index]
        if shard is None or key not in shard:
            return
        del self._writable(index)[key]
        self._len -= 1

    def finish(self) -> ShardedMap[K, V]:
        """The new version; the editor must not be used afterwards."""
        shards = tuple(s if s else None for s in self._shards)
        return ShardedMap(shards, self._len)
