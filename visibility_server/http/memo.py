"""The server's memo of rendered items, keyed by the identity of published objects.

Published runtime objects are immutable (docs/architecture.md), so the server keeps what
it renders from them in its own maps instead of on them:

- entry *heads* (an item's compact JSON up to the positions) by `ViewChunk` and place
  in it: a chunk is shared by consecutive views of a ClusterQueue until one of its
  entries changes, so after a publish a page renders only the items of rebuilt chunks;
- whole item *fragments* (positions included) by `ClusterQueueView` and index: a view
  belongs to one publish of one ClusterQueue and never changes.

Both maps are keyed by object identity and forget a key when the runtime drops the
object (a weak reference's callback), so a memo never outlives what it describes and
an identity is never reused while its memo is still there. Keying heads by chunk, not
by entry, keeps rendering free of per-item bookkeeping objects: a first render of a
page allocates nothing the garbage collector has to track.
"""

from __future__ import annotations

import weakref
from bisect import bisect_right
from typing import Generic, TypeVar

from scheduler.runtime.pages import ClusterQueueView, ViewChunk

K = TypeVar("K")
V = TypeVar("V")


class IdentityMemo(Generic[K, V]):
    """Values by the identity of live objects; a value goes when its object does."""

    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values: dict[int, tuple[weakref.ref[K], V]] = {}

    def __len__(self) -> int:
        return len(self._values)

    def get(self, obj: K) -> V | None:
        found = self._values.get(id(obj))
        return found[1] if found is not None else None

    def put(self, obj: K, value: V) -> V:
        key = id(obj)
        values = self._values

        def forget(_ref: weakref.ref[K]) -> None:
            values.pop(key, None)

        values[key] = (weakref.ref(obj, forget), value)
        return value


class ViewMemo:
    """What the server keeps of one view: fragments by index, and where chunks start."""

    __slots__ = ("fragments", "starts")

    def __init__(self, view: ClusterQueueView) -> None:
        self.fragments: dict[int, bytes] = {}
        starts = [0]
        for chunk in view.chunks:
            starts.append(starts[-1] + len(chunk))
        self.starts = starts


class RenderMemo:
    """Entry heads and view fragments rendered by one server (see the module docstring)."""

    __slots__ = ("chunks", "views")

    def __init__(self) -> None:
        self.chunks: IdentityMemo[ViewChunk, list[bytes | None]] = IdentityMemo()
        self.views: IdentityMemo[ClusterQueueView, ViewMemo] = IdentityMemo()

    def of_view(self, view: ClusterQueueView) -> ViewMemo:
        memo = self.views.get(view)
        return memo if memo is not None else self.views.put(view, ViewMemo(view))

    def fragments_of(self, view: ClusterQueueView) -> dict[int, bytes]:
        """The fragments rendered so far of `view`, by ClusterQueue index."""
        return self.of_view(view).fragments

    def chunk_heads(
        self, view: ClusterQueueView, index: int
    ) -> tuple[list[bytes | None], int, int]:
        """The heads of the chunk holding ClusterQueue index `index`, with the indexes
        where that chunk starts and ends in `view`."""
        starts = self.of_view(view).starts
        c = bisect_right(starts, index) - 1
        chunk = view.chunks[c]
        heads = self.chunks.get(chunk)
        if heads is None:
            heads = self.chunks.put(chunk, [None] * len(chunk))
        return heads, starts[c], starts[c + 1]

    def head(self, view: ClusterQueueView, index: int) -> bytes | None:
        """The head rendered so far of the item at `index`, if any."""
        heads, start, _ = self.chunk_heads(view, index)
        return heads[index - start]
