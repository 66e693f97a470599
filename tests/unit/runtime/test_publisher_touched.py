"""The publisher checks the keys the change feed names ahead of its capture, in slices,
so the synchronous capture checks only the few named after that (touched_keys.py)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.core.cycle import run_cycle
from scheduler.core.scheduler import Scheduler
from scheduler.core.visibility import pending_workloads
from scheduler.runtime import capture as capture_module
from scheduler.runtime import publisher as publisher_module
from scheduler.runtime import touched_keys as touched_module
from scheduler.runtime.publisher import PublisherLinks, PublishPacing, SnapshotPublisher
from scheduler.runtime.touched_keys import QueueMarks
from tests.unit.runtime.support import LoopTurns, cluster, workload
from tests.unit.runtime.test_publisher import (
    apply_change,
    assert_agrees_with_core,
    assert_views_are_whole,
    manual,
    two_queues,
)

# Every pause yields: one loop turn per slice, whatever the machine's speed.
EVERY_PAUSE = PublishPacing(slice_size=16, step_budget=0.0)


class ChecksPerTurn:
    """Counts the entry checks (`entry_is_current`) made in each turn of the loop, while
    a publish runs: a synchronous step's checks all land in one turn."""

    def __init__(self) -> None:
        self.turns: LoopTurns | None = None
        self.by_turn: Counter[int] = Counter()

    def check(self, *args: object) -> bool:
        self.by_turn[self.turns.count if self.turns is not None else -1] += 1
        return bool(capture_module.entry_is_current(*args))  # type: ignore[arg-type]

    @property
    def most(self) -> int:
        return max(self.by_turn.values(), default=0)

    @property
    def total(self) -> int:
        return sum(self.by_turn.values())


@contextmanager
def counted_checks(monkeypatch: pytest.MonkeyPatch) -> Iterator[ChecksPerTurn]:
    checks = ChecksPerTurn()
    with monkeypatch.context() as m:
        m.setattr(publisher_module, "entry_is_current", checks.check)
        m.setattr(touched_module, "entry_is_current", checks.check)
        yield checks


async def publish_watched(publisher: SnapshotPublisher, checks: ChecksPerTurn) -> None:
    async with LoopTurns() as turns:
        checks.turns = turns
        await publisher.publish()
    checks.turns = None


def assert_messages_are_current(s: Scheduler, publisher: SnapshotPublisher) -> None:
    snap = publisher.snapshot()
    for view in snap.views.values():
        for entry in view.entries:
            reserved = s.objects.workloads[f"{entry.namespace}/{entry.name}"].conditions.get(
                "QuotaReserved"
            )
            assert entry.why_pending == (reserved.message if reserved is not None else "")


def walked_queue(count: int) -> tuple[Scheduler, SnapshotPublisher]:
    """cq-2 has no quota: each cycle examines its next head and parks it with a new
    pending message (a requeue: an equal queue entry, the key named by the feed)."""
    s = manual()
    publisher = SnapshotPublisher(s, pacing=EVERY_PAUSE)
    two_queues(s)
    cluster(s, *(workload("b", f"x{i:04d}", "other") for i in range(count)))
    return s, publisher


async def test_the_capture_checks_at_most_sync_keys_of_many_touched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s, publisher = walked_queue(700)
    await publisher.publish()
    for _ in range(700):
        run_cycle(s)
    with counted_checks(monkeypatch) as checks:
        await publish_watched(publisher, checks)
    # All 700 were checked (each had a new message), never more than a slice or the
    # capture's share in one loop turn; the old capture checked all 700 in its step.
    assert checks.total >= 700
    assert checks.most <= publisher_module.DEFAULT_SYNC_KEYS
    assert publisher.stats.checked_ahead >= 700
    assert publisher.stats.last_checked_in_capture == 0  # nothing was named meanwhile
    assert_agrees_with_core(s, publisher)
    assert_messages_are_current(s, publisher)
    assert_views_are_whole(publisher)


async def test_few_touched_keys_are_checked_in_the_capture() -> None:
    s, publisher = walked_queue(20)
    await publisher.publish()
    for _ in range(5):
        run_cycle(s)
    await publisher.publish()
    assert publisher.stats.checked_ahead == 0
    assert publisher.stats.last_checked_in_capture == 5
    assert_messages_are_current(s, publisher)


class Interference:
    """Stands for the engine: one scheduling cycle per loop turn while it runs, and a
    record of the pending order at every drain of the feed (the capture's is the last
    before the snapshot is swapped)."""

    def __init__(self, s: Scheduler) -> None:
        self.s = s
        self.cycles = 0
        self.orders: dict[str, list[str]] = {}
        self.drained: list[int] = []  # keys named, per drain

    def drain(self) -> QueueMarks:
        self.orders = {
            cq: [f"{i.namespace}/{i.name}" for i in pending_workloads(self.s, cq)]
            for cq in self.s.objects.cluster_queues
        }
        marks = self.s.take_changes().queues
        self.drained.append(sum(len(keys) for keys in marks.values()))
        return marks

    async def run(self) -> None:
        while True:
            await asyncio.sleep(0)
            run_cycle(self.s)
            self.cycles += 1


@pytest.mark.parametrize("sync_keys", [0, publisher_module.DEFAULT_SYNC_KEYS])
async def test_keys_touched_during_the_check_ahead_are_checked_again(
    monkeypatch: pytest.MonkeyPatch, sync_keys: int
) -> None:
    # With `sync_keys` 0 the cycles name a key in every round, so the check ahead stops
    # after its last round and the capture checks what the last turn named.
    s = manual()
    engine = Interference(s)
    pacing = PublishPacing(slice_size=16, step_budget=0.0, sync_keys=sync_keys)
    publisher = SnapshotPublisher(s, pacing=pacing, links=PublisherLinks(changes=engine.drain))
    two_queues(s)
    cluster(s, *(workload("b", f"x{i:04d}", "other") for i in range(1500)))
    await publisher.publish()
    for _ in range(600):
        run_cycle(s)
    engine.drained.clear()
    task = asyncio.create_task(engine.run())
    try:
        with counted_checks(monkeypatch) as checks:
            await publish_watched(publisher, checks)
    finally:
        task.cancel()
    assert engine.cycles > 0
    # The 600 named before the publish were checked ahead; the capture checked some of
    # what the cycles named meanwhile, never more than a slice or its share in one turn.
    assert engine.drained[0] == 600
    assert 0 < publisher.stats.last_checked_in_capture <= sum(engine.drained[1:]) < 600
    assert checks.most <= publisher_module.DEFAULT_SYNC_KEYS
    # The published order is the one at the capture's drain, whatever ran since.
    snap = publisher.snapshot()
    for cq, view in snap.views.items():
        assert [f"{e.namespace}/{e.name}" for e in view.entries] == engine.orders[cq]
    # Nothing found stale or current ahead is lost: a quiet publish shows the core.
    await publisher.publish()
    assert_agrees_with_core(s, publisher)
    assert_messages_are_current(s, publisher)
    assert_views_are_whole(publisher)


OPS = st.sampled_from(["add", "add", "delete", "cycle", "cycle", "priority", "move", "idle"])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(OPS, st.integers(0, 40)), max_size=60),
    st.sampled_from([0, 1, 3, publisher_module.DEFAULT_SYNC_KEYS]),
    st.integers(1, 4),
)
def test_changes_between_the_slices_ahead_and_the_capture_are_shown(
    ops: list[tuple[str, int]], sync_keys: int, slice_size: int
) -> None:
    asyncio.run(_changes_between_slices(ops, sync_keys, slice_size))


async def _changes_between_slices(ops: list[tuple[str, int]], sync_keys: int, size: int) -> None:
    s = manual()
    publisher = SnapshotPublisher(
        s, pacing=PublishPacing(slice_size=size, step_budget=0.0, sync_keys=sync_keys)
    )
    two_queues(s)
    for i in range(12):
        cluster(s, workload("a" if i % 3 else "b", f"w{i}", "main", priority=i % 2))
        cluster(s, workload("b", f"x{i}", "other"))
    await publisher.publish()
    pending = list(ops)

    # Walk cq-2 so the publishes have many touched keys to check ahead.
    for _ in range(8):
        run_cycle(s)
    # The ops land one per loop turn, while the publishes check ahead and build.
    changer = asyncio.create_task(_apply_each_turn(s, pending))
    try:
        while pending:
            await publisher.publish()
            await asyncio.sleep(0)
    finally:
        changer.cancel()
    await publisher.publish()
    assert_agrees_with_core(s, publisher)
    assert_messages_are_current(s, publisher)
    assert_views_are_whole(publisher)


async def _apply_each_turn(s: Scheduler, pending: list[tuple[str, int]]) -> None:
    while pending:
        await asyncio.sleep(0)
        op, i = pending.pop(0)
        if op != "idle":
            apply_change(s, op, i)
