"""heap.py: the C heap's free pages given back after the initial load."""

from __future__ import annotations

import ctypes.util

import pytest

from scheduler.runtime.kube import heap


@pytest.mark.skipif(
    ctypes.util.find_library("c") is None or not hasattr(ctypes.CDLL(None), "malloc_trim"),
    reason="needs glibc's malloc_trim",
)
async def test_the_heap_is_trimmed_where_the_c_library_can() -> None:
    blocks = [bytearray(4096) for _ in range(2000)]  # freed blocks for the trim to find
    del blocks
    assert await heap.release_free_heap()


async def test_without_malloc_trim_nothing_happens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "_malloc_trim", lambda: None)
    assert not await heap.release_free_heap()
