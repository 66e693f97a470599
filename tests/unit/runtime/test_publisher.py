"""Snapshot publishing: copy-on-write views that agree with the core, built in slices."""

from __future__ import annotations

import asyncio
import gc
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.core.clock import ManualClock, instant_from_datetime
from scheduler.core.cycle import run_cycle
from scheduler.core.ingest import delete_object
from scheduler.core.scheduler import Scheduler
from scheduler.core.visibility import pending_workloads
from scheduler.runtime import publisher as publisher_module
from scheduler.runtime.heap_freezing import FreezePolicy
from scheduler.runtime.pages import build_view
from scheduler.runtime.publisher import (
    PublisherLinks,
    PublishPacing,
    SnapshotPublisher,
    ends_piece,
)
from tests.unit.runtime.support import (
    cluster,
    cluster_queue,
    flavor,
    local_queue,
    namespace,
    workload,
)

START = instant_from_datetime(datetime(2026, 1, 1, tzinfo=UTC))


def manual() -> Scheduler:
    return Scheduler(ManualClock(START))


def two_queues(s: Scheduler) -> None:
    cluster(
        s,
        namespace("a"),
        namespace("b"),
        flavor(),
        cluster_queue("cq-1", "1"),
        cluster_queue("cq-2", "0"),
        local_queue("a", "main", "cq-1"),
        local_queue("b", "main", "cq-1"),
        local_queue("b", "other", "cq-2"),
    )


def assert_agrees_with_core(s: Scheduler, publisher: SnapshotPublisher) -> None:
    snap = publisher.snapshot()
    assert set(snap.views) == set(s.objects.cluster_queues)
    for cq, view in snap.views.items():
        expected = pending_workloads(s, cq)
        assert [(e.namespace, e.name) for e in view.entries] == [
            (i.namespace, i.name) for i in expected
        ]
        for item in expected:
            found = snap.locate(item.namespace, item.name)
            assert found is not None
            assert found.position_in_cluster_queue == item.position_in_cluster_queue
            assert found.position_in_local_queue == item.position_in_local_queue


async def test_publish_agrees_with_the_core_and_skips_unchanged() -> None:
    s = manual()
    publisher = SnapshotPublisher(s, pacing=PublishPacing(slice_size=2))
    assert s._feed is not None  # the publisher follows the core's change feed
    two_queues(s)
    for i in range(5):
        cluster(s, workload("a" if i % 2 else "b", f"w{i}", "main", priority=i % 3))
    cluster(s, workload("b", "x", "other"))
    assert await publisher.publish()
    assert publisher.generation == 1
    assert_agrees_with_core(s, publisher)
    # Nothing changed: nothing is captured, nothing is published.
    assert not await publisher.publish()
    assert publisher.generation == 1


async def test_copy_on_write_and_cycle_messages() -> None:
    s = manual()
    publisher = SnapshotPublisher(s, pacing=PublishPacing(slice_size=3))
    two_queues(s)
    for i in range(4):
        cluster(s, workload("a", f"w{i}", "main"))
    cluster(s, workload("b", "x", "other"))
    await publisher.publish()
    first = publisher.snapshot()
    stats = run_cycle(s)  # admits w0 in cq-1; cq-2 (no quota) keeps x pending
    assert stats.admitted == ["a/w0"]
    assert await publisher.publish()
    second = publisher.snapshot()
    assert second.generation == first.generation + 1
    assert second.views["cq-1"] is not first.views["cq-1"]
    assert_agrees_with_core(s, publisher)
    # x was popped and requeued in cq-2: captured again, but its entry changed (the
    # pending message), so its view is rebuilt with that message.
    x = second.locate("b", "x")
    reserved = s.objects.workloads["b/x"].conditions.get("QuotaReserved")
    assert x is not None and reserved is not None
    assert x.entry.why_pending == reserved.message != ""
    # Another cycle changes nothing that cq-2 shows: its view object is kept.
    run_cycle(s)
    await publisher.publish()
    third = publisher.snapshot()
    assert third.views["cq-2"] is second.views["cq-2"]
    assert_agrees_with_core(s, publisher)


async def test_unchanged_queue_keeps_identity_when_another_changes() -> None:
    s = manual()
    publisher = SnapshotPublisher(s)
    two_queues(s)
    cluster(s, workload("b", "x", "other"), workload("a", "w0", "main", cpu="5"))
    await publisher.publish()
    before = publisher.snapshot()
    cluster(s, workload("a", "w1", "main", cpu="5"))
    assert await publisher.publish()
    after = publisher.snapshot()
    assert after.views["cq-2"] is before.views["cq-2"]
    assert after.views["cq-1"] is not before.views["cq-1"]
    assert publisher.stats.views_built == 3  # cq-1 twice, cq-2 once


async def test_removed_and_moved_workloads_and_queues() -> None:
    s = manual()
    publisher = SnapshotPublisher(s)
    two_queues(s)
    cluster(s, workload("b", "x", "other"), workload("a", "w0", "main", cpu="5"))
    await publisher.publish()
    # The LocalQueue b/other now points at cq-1: x moves between views.
    cluster(s, local_queue("b", "other", "cq-1"))
    await publisher.publish()
    snap = publisher.snapshot()
    assert snap.workloads[("b", "x")] == "cq-1"
    assert len(snap.views["cq-2"]) == 0
    assert_agrees_with_core(s, publisher)
    delete_object(s, "ClusterQueue", None, "cq-2")
    delete_object(s, "Workload", "a", "w0")
    await publisher.publish()
    snap = publisher.snapshot()
    assert "cq-2" not in snap.views
    assert ("a", "w0") not in snap.workloads
    assert_agrees_with_core(s, publisher)


async def test_local_queue_table_change_publishes_without_rebuilding() -> None:
    s = manual()
    publisher = SnapshotPublisher(s)
    two_queues(s)
    await publisher.publish()
    built = publisher.stats.views_built
    cluster(s, local_queue("c", "dangling", "no-such-cq"))
    assert await publisher.publish()
    snap = publisher.snapshot()
    assert snap.local_queues[("c", "dangling")] == ""
    assert publisher.stats.views_built == built


async def test_queues_made_before_the_publisher_are_published_then_followed() -> None:
    s = manual()
    two_queues(s)  # queues and workloads exist before the publisher follows the feed
    cluster(s, workload("a", "w0", "main", cpu="5"))
    publisher = SnapshotPublisher(s)
    await publisher.publish()
    first = publisher.snapshot()
    assert_agrees_with_core(s, publisher)
    cluster(s, workload("b", "x", "other"))
    built = publisher.stats.views_built
    await publisher.publish()
    second = publisher.snapshot()
    assert second.views["cq-1"] is first.views["cq-1"]  # not named by the feed: kept
    assert publisher.stats.views_built == built + 1  # cq-2 only
    assert_agrees_with_core(s, publisher)


async def test_synced_flag_alone_publishes() -> None:
    s = manual()
    state = {"synced": False}
    publisher = SnapshotPublisher(s, links=PublisherLinks(synced=lambda: state["synced"]))
    two_queues(s)
    await publisher.publish()
    assert not publisher.snapshot().synced
    state["synced"] = True
    assert await publisher.publish()
    assert publisher.snapshot().synced


def assert_views_are_whole(publisher: SnapshotPublisher) -> None:
    """Each view's derived tables agree with its entries; its digest is the content's."""
    snap = publisher.snapshot()
    for cq, view in snap.views.items():
        entries = list(view.entries)
        assert view.digest == build_view(cq, entries).digest
        for e in entries:
            assert snap.workloads[(e.namespace, e.name)] == cq
            lq = [x for x in entries if x.local_queue_key == e.local_queue_key]
            assert len(view.local_queue_indexes(e.namespace, e.local_queue)) == len(lq)
            page = view.local_queue_page(e.namespace, e.local_queue, 0, len(lq))
            assert [p.entry for p in page] == lq
    listed = {(e.namespace, e.name) for v in snap.views.values() for e in v.entries}
    assert set(snap.workloads) == listed


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["add", "add", "add", "delete", "cycle", "priority", "move"]),
            st.integers(0, 40),
        ),
        max_size=40,
    ),
    st.integers(1, 4),
)
def test_small_chunks_agree_with_the_core_under_any_changes(
    ops: list[tuple[str, int]], slice_size: int
) -> None:
    asyncio.run(_small_chunks(ops, slice_size))


def apply_change(s: Scheduler, op: str, i: int) -> None:
    """One change of the property tests: "add", "delete", "cycle", "priority", or else
    a workload added to either LocalQueue of namespace b (a move between views)."""
    name, ns = f"w{i}", "a" if i % 3 else "b"
    if op == "add":
        cluster(s, workload(ns, name, "main", priority=i % 4))
    elif op == "delete":
        delete_object(s, "Workload", ns, name)
    elif op == "cycle":
        run_cycle(s)
    elif op == "priority":
        cluster(s, workload(ns, name, "main", priority=5 + i % 3))
    else:
        cluster(s, workload("b", f"m{i}", "other" if i % 2 else "main"))


async def _small_chunks(ops: list[tuple[str, int]], slice_size: int) -> None:
    s = manual()
    publisher = SnapshotPublisher(s, pacing=PublishPacing(slice_size=slice_size))
    two_queues(s)
    for i in range(12):
        cluster(s, workload("a" if i % 3 else "b", f"w{i}", "main", priority=i % 2))
    await publisher.publish()
    for op, i in ops:
        apply_change(s, op, i)
        if i % 2:
            await publisher.publish()
    await publisher.publish()
    assert_agrees_with_core(s, publisher)
    assert_views_are_whole(publisher)


def uncut_names(namespace: str, count: int) -> list[str]:
    """`count` workload names, in order, none of which ends a piece of a long run in
    this process (`ends_piece`), so that runs are cut every `slice_size` entries
    whatever the hash seed."""
    names = (f"w{i:03d}" for i in range(1000))
    return [n for n in names if not ends_piece(f"{namespace}/{n}")][:count]


async def test_a_republish_shares_unchanged_chunks() -> None:
    s = manual()
    publisher = SnapshotPublisher(s, pacing=PublishPacing(slice_size=4))
    two_queues(s)
    cluster(s, *(workload("a", name, "main", cpu="5") for name in uncut_names("a", 20)))
    await publisher.publish()
    before = publisher.snapshot().views["cq-1"]
    assert len(before.chunks) == 5
    cluster(s, workload("a", "w999", "main", cpu="5"))  # the newest: the last chunk
    await publisher.publish()
    after = publisher.snapshot().views["cq-1"]
    assert after is not before
    # The queue's run of 21 items is cut in pieces of 4: five pieces as before, shared,
    # and a new one holding the new workload.
    assert after.chunks[:5] == before.chunks
    assert all(a is b for a, b in zip(after.chunks, before.chunks, strict=False))
    assert [e.name for e in after.chunks[5].entries] == ["w999"]
    assert publisher.stats.chunks_built == 5 + 1
    assert_agrees_with_core(s, publisher)
    assert_views_are_whole(publisher)


async def test_a_workload_at_the_head_moves_few_workloads_between_cells() -> None:
    # A higher-priority arrival shifts every piece of the run by one: each rebuilt
    # chunk keeps the cell most of its workloads had, so the workload -> cell map
    # changes for about one workload per chunk, not for all of them.
    s = manual()
    publisher = SnapshotPublisher(s, pacing=PublishPacing(slice_size=4))
    two_queues(s)
    cluster(s, *(workload("a", f"w{i:02d}", "main", cpu="5") for i in range(20)))
    await publisher.publish()
    before = dict(publisher.snapshot().views["cq-1"].cells)
    cluster(s, workload("a", "urgent", "main", cpu="5", priority=100))
    await publisher.publish()
    view = publisher.snapshot().views["cq-1"]
    assert view.entries[0].name == "urgent"
    moved = [key for key, cell in before.items() if view.cells.get(key) != cell]
    assert len(moved) <= len(view.chunks)
    assert_agrees_with_core(s, publisher)
    assert_views_are_whole(publisher)


async def test_a_message_change_in_an_unchanged_run_is_shown() -> None:
    # cq-2 has no quota: a cycle pops its head and requeues an equal queue entry with
    # a new pending message; the run compares equal, the touched key finds the change.
    s = manual()
    publisher = SnapshotPublisher(s, pacing=PublishPacing(slice_size=3))
    two_queues(s)
    cluster(s, *(workload("b", f"x{i}", "other") for i in range(7)))
    await publisher.publish()
    head = publisher.snapshot().locate("b", "x0")
    assert head is not None and head.entry.why_pending == ""
    run_cycle(s)
    await publisher.publish()
    head = publisher.snapshot().locate("b", "x0")
    reserved = s.objects.workloads["b/x0"].conditions.get("QuotaReserved")
    assert head is not None and reserved is not None
    assert head.entry.why_pending == reserved.message != ""
    assert_agrees_with_core(s, publisher)
    assert_views_are_whole(publisher)


async def test_a_failed_publish_is_followed_by_a_full_rebuild(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s = manual()
    publisher = SnapshotPublisher(s, pacing=PublishPacing(slice_size=2))
    two_queues(s)
    cluster(s, *(workload("a", f"w{i}", "main", cpu="5") for i in range(5)))
    await publisher.publish()
    cluster(s, workload("a", "late", "main", cpu="5"))

    def broken(*args: object) -> None:
        raise RuntimeError("bug")

    with monkeypatch.context() as m:
        m.setattr(publisher_module, "ViewAssembly", broken)
        with pytest.raises(RuntimeError):
            await publisher.publish()
    delete_object(s, "Workload", "a", "w1")
    assert await publisher.publish()
    assert_agrees_with_core(s, publisher)
    assert_views_are_whole(publisher)


async def test_built_entries_feed_the_freeze_policy() -> None:
    s = manual()
    policy = FreezePolicy(5)
    publisher = SnapshotPublisher(
        s, pacing=PublishPacing(slice_size=4), links=PublisherLinks(collector=policy)
    )
    two_queues(s)
    cluster(s, *(workload("a", name, "main", cpu="5") for name in uncut_names("a", 12)))
    try:
        await publisher.publish()
        assert policy.freezes >= 1
        assert publisher.stats.chunks_built == 3
    finally:
        gc.unfreeze()


async def test_map_writes_feed_the_freeze_policy_too() -> None:
    """12 snapshot entries built, 12 workload → chunk writes and 12 workload →
    ClusterQueue writes: the policy counts all three (the maps' new nodes live as long
    as the entries)."""
    s = manual()
    policy = FreezePolicy(10**9)
    publisher = SnapshotPublisher(
        s, pacing=PublishPacing(slice_size=4), links=PublisherLinks(collector=policy)
    )
    two_queues(s)
    cluster(s, *(workload("a", f"w{i}", "main", cpu="5") for i in range(12)))
    await publisher.publish()
    assert (policy.freezes, policy.pending) == (0, 12 + 12 + 12)
