"""The tracking queue manager: which ClusterQueues and workloads a publish re-reads."""

from __future__ import annotations

from datetime import UTC, datetime

from scheduler.core.clock import ManualClock, instant_from_datetime
from scheduler.core.cycle import run_cycle
from scheduler.core.ingest import delete_object
from scheduler.core.scheduler import Scheduler
from scheduler.runtime.changes import TrackingQueueManager, install_tracking
from tests.unit.runtime.support import (
    cluster,
    cluster_queue,
    flavor,
    local_queue,
    namespace,
    workload,
)

START = instant_from_datetime(datetime(2026, 1, 1, tzinfo=UTC))


def test_pushes_and_requeues_are_touched_deletes_only_dirty() -> None:
    s = Scheduler(ManualClock(START))
    tracking = install_tracking(s)
    assert isinstance(tracking, TrackingQueueManager)
    cluster(
        s,
        namespace("a"),
        flavor(),
        cluster_queue("cq", "0"),
        local_queue("a", "main", "cq"),
        workload("a", "w0", "main"),
        workload("a", "w1", "main"),
    )
    assert tracking.take_dirty() == {"cq"}
    assert tracking.take_touched() == {"cq": {"a/w0", "a/w1"}}
    assert tracking.take_touched() == {}
    run_cycle(s)  # no quota: the head is popped and requeued
    assert tracking.take_dirty() == {"cq"}
    assert tracking.take_touched() == {"cq": {"a/w0"}}
    delete_object(s, "Workload", "a", "w1")
    assert tracking.take_dirty() == {"cq"}
    assert tracking.take_touched() == {}
