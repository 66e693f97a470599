"""The server's memo of rendered items, keyed by the identity of published objects.

Published runtime objects are immutable (docs/architecture.md), so the server keeps what
it renders from them in its own maps instead of on them:

- an entry's *head* (its compact JSON up to the positions) by the `PendingEntry`: an
  entry is shared by every snapshot until its workload changes, so after a publish a
  page renders only the entries that are new;
- a view's whole item *fragments* (positions included) by the `ClusterQueueView` and
  index: a view belongs to one publish of one ClusterQueue and never changes.

Both maps are keyed by object identity and forget a key when the runtime drops the
object (a weak reference's callback), so a memo never outlives what it describes and
an identity is never reused while its memo is still there.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

from scheduler.runtime.snapshot import ClusterQueueView, PendingEntry

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

    def setdefault(self, obj: K, make: Callable[[], V]) -> V:
        found = self._values.get(id(obj))
        return found[1] if found is not None else self.put(obj, make())


class RenderMemo:
    """Entry heads and view fragments rendered by one server (see the module docstring)."""

    __slots__ = ("heads", "views")

    def __init__(self) -> None:
        self.heads: IdentityMemo[PendingEntry, bytes] = IdentityMemo()
        self.views: IdentityMemo[ClusterQueueView, dict[int, bytes]] = IdentityMemo()

    def fragments_of(self, view: ClusterQueueView) -> dict[int, bytes]:
        """The fragments rendered so far of `view`, by ClusterQueue index."""
        return self.views.setdefault(view, dict)
