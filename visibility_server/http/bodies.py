"""Rendered bodies of data answers, remembered while they stay current (issue 6).

A page of a published snapshot never changes: the same route, paging and representation
of the same view (same `resourceVersion`, the content digest the ETag is made of) is the
same bytes. Pollers ask for the same pages again and again, and a 200 to a client whose
ETag is stale (or that sends none) then costs a dictionary look-up instead of a render.
The key is everything the bytes depend on, not the ETag alone, so two queues can never
share an entry through a hash collision. The cache is bounded by entries and bytes and
forgets the least recently used body first; bodies of views that are no longer published
simply age out.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Final

DEFAULT_MAX_ENTRIES: Final = 512
DEFAULT_MAX_BYTES: Final = 16 * 1024 * 1024


class BodyCache:
    def __init__(
        self, *, max_entries: int = DEFAULT_MAX_ENTRIES, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._bodies: OrderedDict[Hashable, bytes] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._bodies)

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def get(self, key: Hashable) -> bytes | None:
        body = self._bodies.get(key)
        if body is not None:
            self._bodies.move_to_end(key)
        return body

    def put(self, key: Hashable, body: bytes) -> None:
        if len(body) > self._max_bytes:
            return
        previous = self._bodies.pop(key, None)
        if previous is not None:
            self._bytes -= len(previous)
        self._bodies[key] = body
        self._bytes += len(body)
        while len(self._bodies) > self._max_entries or self._bytes > self._max_bytes:
            _, dropped = self._bodies.popitem(last=False)
            self._bytes -= len(dropped)


__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_ENTRIES", "BodyCache"]
