"""Give the C heap's free pages back to the system once the initial load is done.

The initial list and decode of every object leaves many freed blocks behind in glibc's
heap (JSON pages, decoded models, dict tables larger than the interpreter's own small
object pools handle). glibc returns free memory to the system only from the top of the
heap by itself; `malloc_trim` also releases the free pages in the middle. Called once
after the initial sync it lowered the resident memory by about 0.16 KiB per Workload;
called again once the first leadership's first cycles and status writes are done
(`cluster.py`), about 0.12 KiB more at 100,000 (docs/benchmarks.md, "Cluster-mode
memory beside upstream Kueue").

Elsewhere than glibc (musl, macOS) there is no such call and this does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
from collections.abc import Callable
from functools import cache

log = logging.getLogger(__name__)


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


async def release_free_heap() -> bool:
    """Return the heap's free pages to the system; False where the C library has no
    `malloc_trim`. Runs in a thread: it walks the whole heap, which at 100k Workloads
    takes longer than the event loop may be held (ctypes lets go of the GIL meanwhile)."""
    trim = _malloc_trim()
    if trim is None:
        return False
    released = await asyncio.to_thread(trim, 0)
    log.info("event=heap-trimmed released=%s", bool(released))
    return True
