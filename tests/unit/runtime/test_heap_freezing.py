"""The freeze policy: the heap is frozen once per `freeze_after` new snapshot entries."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import weakref

from scheduler.runtime.heap_freezing import FreezePolicy, GcPacer


def test_freezes_once_per_threshold_and_never_when_off() -> None:
    frozen_before = gc.get_freeze_count()
    try:
        policy = FreezePolicy(100)
        keep = [[i] for i in range(50)]  # tracked objects that exist at the freeze
        assert not policy.built(60)
        assert policy.built(60)
        assert (policy.freezes, policy.pending) == (1, 0)
        assert gc.get_freeze_count() >= frozen_before + len(keep)
        assert not policy.built(99)
        off = FreezePolicy(None)
        assert not off.built(10**9)
        assert off.freezes == 0
    finally:
        gc.unfreeze()


def test_the_pacer_collects_the_oldest_due_generation() -> None:
    pacer = GcPacer()
    gc.collect()
    assert pacer.collect_due((10**9, 10**9, 10**9)) is None
    assert pacer.passes == [0, 0, 0]
    junk = [[i] for i in range(50)]  # tracked allocations: generation 0 is due
    assert pacer.collect_due((10, 10**9, 10**9)) == 0
    assert pacer.passes == [1, 0, 0]
    assert gc.get_count()[1] >= 1  # a young pass counts toward generation 1
    assert pacer.collect_due((10**9, 0, 10**9)) == 1
    assert pacer.passes == [1, 1, 0]
    del junk


async def test_the_pacer_turns_automatic_collection_off_while_it_runs() -> None:
    assert gc.isenabled()
    pacer = GcPacer(interval=0.001)
    task = asyncio.get_running_loop().create_task(pacer.run())
    try:
        await asyncio.sleep(0)
        assert not gc.isenabled()
        # A reference cycle is still collected, by the pacer.
        ref = weakref.ref(_cycle())
        for _ in range(2000):
            _cycle()  # allocations until generation 0 is due
        for _ in range(200):
            if ref() is None:
                break
            await asyncio.sleep(0.005)
        assert ref() is None
        assert sum(pacer.passes) >= 1
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert gc.isenabled()


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycle() -> _Node:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return a
