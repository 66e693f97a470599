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

Both are bounded, so a client that walks every page of a deep queue cannot make the
server keep a rendering of every pending workload: heads by a budget of heads, the least
recently used chunks forgotten first; fragments by a budget shared by all views, past
which new fragments are rendered but not kept until a view goes and returns its share.
"""

from __future__ import annotations

import weakref
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable
from typing import Final, Generic, TypeVar

from scheduler.runtime.pages import ClusterQueueView, ViewChunk

# What a server keeps at most (docs/visibility-api.md#what-the-server-remembers): about
# 62 MiB in all with one owner reference per workload.
HEAD_BUDGET: Final = 131_072
FRAGMENT_BUDGET: Final = 131_072

K = TypeVar("K")
V = TypeVar("V")


class IdentityMemo(Generic[K, V]):
    """Values by the identity of live objects; a value goes when its object does."""

    __slots__ = ("_on_forget", "_values")

    def __init__(self, on_forget: Callable[[V], object] | None = None) -> None:
        self._values: dict[int, tuple[weakref.ref[K], V]] = {}
        self._on_forget = on_forget

    def __len__(self) -> int:
        return len(self._values)

    def get(self, obj: K) -> V | None:
        found = self._values.get(id(obj))
        return found[1] if found is not None else None

    def put(self, obj: K, value: V) -> V:
        key = id(obj)
        values, on_forget = self._values, self._on_forget

        def forget(_ref: weakref.ref[K]) -> None:
            gone = values.pop(key, None)
            if gone is not None and on_forget is not None:
                on_forget(gone[1])

        values[key] = (weakref.ref(obj, forget), value)
        return value


class ChunkHeads:
    """Entry heads by chunk identity, the least recently used chunks forgotten past a
    budget of heads (counted by whole chunks: a chunk's list is made at its full length)."""

    __slots__ = ("__weakref__", "_entries", "budget", "size")

    def __init__(self, budget: int) -> None:
        self._entries: OrderedDict[int, tuple[weakref.ref[ViewChunk], list[bytes | None]]] = (
            OrderedDict()
        )
        self.budget = budget
        self.size = 0  # heads the kept lists have room for

    def __len__(self) -> int:
        return len(self._entries)

    def of(self, chunk: ViewChunk) -> list[bytes | None]:
        """The chunk's heads (None where not rendered yet), made empty if not kept."""
        key = id(chunk)
        entries = self._entries
        found = entries.get(key)
        if found is not None:
            entries.move_to_end(key)
            return found[1]
        heads: list[bytes | None] = [None] * len(chunk)
        ledger = weakref.ref(self)

        def forget(_ref: weakref.ref[ViewChunk]) -> None:
            memo = ledger()
            gone = entries.pop(key, None)
            if memo is not None and gone is not None:
                memo.size -= len(gone[1])

        entries[key] = (weakref.ref(chunk, forget), heads)
        self.size += len(heads)
        # An evicted entry's weak reference goes with it, so its callback never runs.
        while self.size > self.budget and len(entries) > 1:
            _, (_, evicted) = entries.popitem(last=False)
            self.size -= len(evicted)
        return heads


class FragmentBudget:
    """How many more whole fragments the views' memos may keep, all views together."""

    __slots__ = ("left",)

    def __init__(self, budget: int) -> None:
        self.left = budget


class ViewMemo:
    """What the server keeps of one view: fragments by index, and where chunks start."""

    __slots__ = ("budget", "fragments", "starts")

    def __init__(self, view: ClusterQueueView, budget: FragmentBudget) -> None:
        self.fragments: dict[int, bytes] = {}
        self.budget = budget
        starts = [0]
        for chunk in view.chunks:
            starts.append(starts[-1] + len(chunk))
        self.starts = starts

    def keep(self, index: int, fragment: bytes) -> None:
        """Remember the fragment at `index` unless the budget is spent (then it is
        rendered again when asked: whole repeated pages are in the body cache anyway)."""
        if self.budget.left > 0:
            self.fragments[index] = fragment
            self.budget.left -= 1

    def release(self) -> None:
        """The view has gone: its fragments go back to the budget."""
        self.budget.left += len(self.fragments)


class RenderMemo:
    """Entry heads and view fragments rendered by one server (see the module docstring)."""

    __slots__ = ("chunks", "fragment_budget", "views")

    def __init__(
        self, *, head_budget: int = HEAD_BUDGET, fragment_budget: int = FRAGMENT_BUDGET
    ) -> None:
        self.chunks = ChunkHeads(head_budget)
        self.fragment_budget = FragmentBudget(fragment_budget)
        self.views: IdentityMemo[ClusterQueueView, ViewMemo] = IdentityMemo(ViewMemo.release)

    def of_view(self, view: ClusterQueueView) -> ViewMemo:
        memo = self.views.get(view)
        if memo is None:
            memo = self.views.put(view, ViewMemo(view, self.fragment_budget))
        return memo

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
        return self.chunks.of(view.chunks[c]), starts[c], starts[c + 1]

    def head(self, view: ClusterQueueView, index: int) -> bytes | None:
        """The head rendered so far of the item at `index`, if any."""
        heads, start, _ = self.chunk_heads(view, index)
        return heads[index - start]
