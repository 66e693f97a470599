"""A queue plugin publishes incrementally through the interface, like the FIFO queues."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from scheduler.core.clock import ManualClock, instant_from_datetime
from scheduler.core.cycle import run_cycle
from scheduler.core.ingest import delete_object
from scheduler.core.queue.interface import PendingQueue
from scheduler.core.scheduler import QUEUE_PLUGIN_ANNOTATION, Scheduler
from scheduler.core.visibility import pending_workloads
from scheduler.runtime.publisher import SnapshotPublisher
from tests.unit.runtime.plugin_queue import NewestFirstQueue
from tests.unit.runtime.support import (
    bulk_workloads,
    cluster,
    cluster_queue,
    flavor,
    local_queue,
    namespace,
    workload,
)

START = instant_from_datetime(datetime(2026, 1, 1, tzinfo=UTC))
PLUGIN = "tests.unit.runtime.plugin_queue:NewestFirstQueue"
PENDING = 20_000


def _scheduler(plugin: str | None) -> Scheduler:
    s = Scheduler(ManualClock(START))
    cq = cluster_queue("cq", "0")
    if plugin is not None:
        cq["metadata"]["annotations"] = {QUEUE_PLUGIN_ANNOTATION: plugin}
    cluster(s, namespace("team"), flavor(), cq, local_queue("team", "main", "cq"))
    return s


def _agrees(s: Scheduler, publisher: SnapshotPublisher) -> None:
    view = publisher.snapshot().views["cq"]
    assert [e.name for e in view.entries] == [i.name for i in pending_workloads(s, "cq")]


@pytest.mark.parametrize("plugin", [PLUGIN, None], ids=["plugin", "fifo"])
async def test_one_change_rebuilds_one_chunk(plugin: str | None) -> None:
    s = _scheduler(plugin)
    queue = s.queues.queue("cq")
    assert isinstance(queue, NewestFirstQueue) == (plugin is not None)
    publisher = SnapshotPublisher(s)
    bulk_workloads(s, "team", "main", PENDING)
    assert await publisher.publish()
    chunks = len(publisher.snapshot().views["cq"].chunks)
    assert chunks >= 8  # enough that rebuilding them all would show
    _agrees(s, publisher)

    # Each of these changes one place of the order: an arrival (at the head for the
    # plugin, which serves the newest first), a deletion in the middle, a head tried
    # and requeued with its message. Each publish rebuilds one or two chunks.
    steps = [
        lambda: bulk_workloads(s, "team", "main", 1, start=PENDING),
        lambda: delete_object(s, "Workload", "team", f"w{PENDING // 2:06d}"),
        lambda: run_cycle(s),
    ]
    for step in steps:
        built = publisher.stats.chunks_built
        step()
        assert await publisher.publish()
        assert publisher.stats.chunks_built - built <= 2
        _agrees(s, publisher)


async def test_a_long_run_is_cut_where_its_content_says() -> None:
    """A queue that returns its order as one run: the publisher cuts it into chunks by
    the keys' content, so a change in the middle rebuilds one or two chunks, not every
    chunk after it (as cutting at fixed offsets did, whatever the hash seed)."""
    s = _scheduler("tests.unit.runtime.plugin_queue:OneRunQueue")
    publisher = SnapshotPublisher(s)
    bulk_workloads(s, "team", "main", PENDING)
    assert await publisher.publish()
    assert len(publisher.snapshot().views["cq"].chunks) >= 8
    _agrees(s, publisher)
    for i in (PENDING // 2, PENDING // 4, 3 * PENDING // 4):
        built = publisher.stats.chunks_built
        delete_object(s, "Workload", "team", f"w{i:06d}")
        assert await publisher.publish()
        assert publisher.stats.chunks_built - built <= 2
        _agrees(s, publisher)


async def test_the_plugin_is_loaded_and_keeps_its_own_order() -> None:
    s = _scheduler(PLUGIN)
    publisher = SnapshotPublisher(s)
    cluster(
        s,
        workload("team", "old", "main", creation="2026-01-01T00:00:00Z"),
        workload("team", "new", "main", creation="2026-01-01T00:01:00Z"),
    )
    await publisher.publish()
    assert [e.name for e in publisher.snapshot().views["cq"].entries] == ["new", "old"]


def test_the_default_runs_cut_where_the_content_says() -> None:
    """The interface's default: runs are the listing, and a change elsewhere leaves a
    run's content equal (boundaries depend on the entry at the boundary alone)."""
    s = _scheduler(PLUGIN)
    bulk_workloads(s, "team", "main", 5000)
    queue = s.queues.queue("cq")
    assert queue is not None and type(queue).ordered_runs is PendingQueue.ordered_runs
    before = [list(run) for run in queue.ordered_runs()]
    assert [e for run in before for e in run] == list(queue.listing())
    assert len(before) > 2
    delete_object(s, "Workload", "team", before[1][0].name)  # the second run's first
    after = [list(run) for run in queue.ordered_runs()]
    assert [e for run in after for e in run] == list(queue.listing())
    unchanged = [run for run in after if run in before]
    assert len(unchanged) >= len(before) - 2
