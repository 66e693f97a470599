"""Rendered bodies of data answers, remembered while they stay current.

A page of a published snapshot never changes: the same route, paging and representation
of the same view (same `resourceVersion`, the content digest the ETag is made of) is the
same bytes. Pollers ask for the same pages again and again, and a 200 to a client whose
ETag is stale (or that sends none) then costs a dictionary look-up instead of a render.
The key is everything the bytes depend on, not the ETag alone, so two queues can never
share an entry through a hash collision.

The cache is cachetools' `LRUCache` bounded by bytes: an entry weighs its body plus a
fixed allowance for its key and slot, so many tiny bodies are bounded too. The least
recently used body goes first; bodies of views that are no longer published simply age
out, and a body larger than the whole bound is not kept.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Final

from cachetools import LRUCache

DEFAULT_MAX_BYTES: Final = 16 * 1024 * 1024
# What an entry costs beyond its body: the key tuple, the dict slot, the LRU link.
ENTRY_OVERHEAD_BYTES: Final = 512


class BodyCache(LRUCache[Hashable, bytes]):
    def __init__(
        self, *, max_bytes: int = DEFAULT_MAX_BYTES, entry_overhead: int = ENTRY_OVERHEAD_BYTES
    ) -> None:
        super().__init__(maxsize=max_bytes, getsizeof=lambda body: len(body) + entry_overhead)

    def put(self, key: Hashable, body: bytes) -> None:
        if self.getsizeof(body) <= self.maxsize:
            self[key] = body


__all__ = ["DEFAULT_MAX_BYTES", "ENTRY_OVERHEAD_BYTES", "BodyCache"]
