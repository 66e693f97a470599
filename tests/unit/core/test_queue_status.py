"""KEP-168 status-based visibility (docs/scheduling.md#pending-workloads-in-status): heads and the
snapshot model."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from scheduler.api import decode_object
from scheduler.core.clock import MICROS_PER_SECOND, ManualClock, instant_from_datetime
from scheduler.core.config import QueueVisibility, SchedulerConfig
from scheduler.core.cycle import run_cycle
from scheduler.core.ingest import apply_object, delete_object
from scheduler.core.queue_status import (
    ClusterQueuePendingWorkload,
    LocalQueuePendingWorkload,
    QueueStatusTracker,
    cluster_queue_head,
    cluster_queues_enabled,
    local_queue_heads,
    local_queues_enabled,
)
from scheduler.core.scheduler import Scheduler
from scheduler.core.visibility import pending_workloads

Json = dict[str, Any]
KUEUE = "kueue.x-k8s.io/v1beta1"
START = instant_from_datetime(datetime(2026, 1, 1, tzinfo=UTC))
S = MICROS_PER_SECOND


def _cq(name: str, cpu: str) -> Json:
    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
                }
            ],
        },
    }


def _lq(ns: str, name: str, cq: str) -> Json:
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"clusterQueue": cq},
    }


def _wl(ns: str, name: str, lq: str, *, priority: int = 0, cpu: str = "1", at: int = 0) -> Json:
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"uid-{ns}-{name}",
            "creationTimestamp": datetime.fromtimestamp((START + at) / S, tz=UTC).isoformat(),
        },
        "spec": {
            "queueName": lq,
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}
                            ]
                        }
                    },
                }
            ],
        },
    }


def scheduler(visibility: QueueVisibility | None) -> tuple[Scheduler, ManualClock]:
    clock = ManualClock(START)
    s = Scheduler(clock, SchedulerConfig(queue_visibility=visibility))
    apply(
        s,
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "f"}},
        _cq("cq", "0"),
        _cq("other", "0"),
        _lq("a", "main", "cq"),
        _lq("b", "main", "cq"),
        _lq("c", "main", "other"),
        _lq("d", "dangling", "missing"),
    )
    return s, clock


def apply(s: Scheduler, *objects: Json) -> None:
    for data in objects:
        apply_object(s, decode_object(data))
    s.finalize_evictions()


def fill(s: Scheduler) -> None:
    """Seven workloads in cq, alternating LocalQueues a/main and b/main, in time order."""
    for i in range(7):
        ns = "a" if i % 2 == 0 else "b"
        apply(s, _wl(ns, f"w{i}", "main", at=i * S))


FULL = QueueVisibility(
    update_interval_seconds=5,
    cluster_queue_max_count=3,
    local_queue_max_count=2,
    local_queue_max_position=4,
)


def test_enablement() -> None:
    assert not cluster_queues_enabled(None)
    assert not local_queues_enabled(None)
    assert cluster_queues_enabled(QueueVisibility())
    assert not local_queues_enabled(QueueVisibility())  # localQueues omitted: off (D8)
    assert not cluster_queues_enabled(QueueVisibility(cluster_queue_max_count=0))
    assert not local_queues_enabled(QueueVisibility(local_queue_max_count=0))
    assert local_queues_enabled(QueueVisibility(local_queue_max_count=1))
    tracker = QueueStatusTracker(None, START)
    s, _ = scheduler(None)
    assert not tracker.enabled and tracker.next_snapshot_at is None
    assert not tracker.advance(s, START + 60 * S)
    assert not tracker.finish(s)
    assert tracker.cluster_queue_json("cq") is None
    assert tracker.local_queue_json("a/main") is None


def test_cluster_queue_head_is_the_start_of_the_listing() -> None:
    s, _ = scheduler(FULL)
    fill(s)
    apply(s, _wl("a", "urgent", "main", priority=10, at=100 * S))
    listing = [(i.namespace, i.name) for i in pending_workloads(s, "cq")]
    head = cluster_queue_head(s, "cq", 3)
    assert [(w.namespace, w.name) for w in head] == listing[:3]
    assert head[0] == ClusterQueuePendingWorkload(name="urgent", namespace="a")
    assert cluster_queue_head(s, "cq", 100) == tuple(
        ClusterQueuePendingWorkload(n, ns) for ns, n in listing
    )
    assert cluster_queue_head(s, "missing", 3) == ()
    # Heads popped by a cycle (in flight) and parked ones stay listed
    # (docs/scheduling.md#enablement-and-shape).
    run_cycle(s)
    assert [(w.namespace, w.name) for w in cluster_queue_head(s, "cq", 3)] == listing[:3]


def test_local_queue_heads_respect_max_position_and_max_count() -> None:
    s, _ = scheduler(FULL)
    fill(s)  # positions: w0 a, w1 b, w2 a, w3 b, w4 a, w5 b, w6 a
    heads = local_queue_heads(s, "cq", max_count=2, max_position=4)
    assert heads == {
        "a/main": (LocalQueuePendingWorkload("w0", 0), LocalQueuePendingWorkload("w2", 2)),
        "b/main": (LocalQueuePendingWorkload("w1", 1), LocalQueuePendingWorkload("w3", 3)),
    }
    capped = local_queue_heads(s, "cq", max_count=1, max_position=7)
    assert capped["a/main"] == (LocalQueuePendingWorkload("w0", 0),)
    narrow = local_queue_heads(s, "cq", max_count=10, max_position=1)
    assert narrow == {"a/main": (LocalQueuePendingWorkload("w0", 0),)}
    assert local_queue_heads(s, "cq", max_count=10, max_position=0) == {}


def test_snapshot_instants_throttle_and_last_change_time() -> None:
    s, clock = scheduler(FULL)
    tracker = QueueStatusTracker(FULL, START)
    assert tracker.next_snapshot_at == START
    fill(s)

    def move(to_seconds: int) -> bool:
        changed = tracker.advance(s, START + to_seconds * S)
        clock.set(START + to_seconds * S)
        return changed

    # The snapshot at start publishes every queue (first sight), empty ones too.
    assert move(1)
    cq = tracker.cluster_queue_status("cq")
    assert cq is not None and cq.last_change_time == START
    assert [w.name for w in cq.head] == ["w0", "w1", "w2"]
    other = tracker.cluster_queue_json("other")
    assert other == {"clusterQueuePendingWorkload": [], "lastChangeTime": "2026-01-01T00:00:00Z"}
    assert tracker.next_snapshot_at == START + 5 * S

    # A change between snapshot instants is not visible until the next one.
    apply(s, _wl("b", "urgent", "main", priority=5, at=2 * S))
    assert not move(3)
    cq = tracker.cluster_queue_status("cq")
    assert cq is not None and [w.name for w in cq.head] == ["w0", "w1", "w2"]

    # Jumping over several instants: the first one sees the change, the rest see none.
    assert move(12)
    cq = tracker.cluster_queue_status("cq")
    assert cq is not None
    assert cq.last_change_time == START + 5 * S
    assert [w.name for w in cq.head] == ["urgent", "w0", "w1"]
    assert tracker.next_snapshot_at == START + 15 * S
    lq_b = tracker.local_queue_status("b/main")
    assert lq_b is not None and lq_b.last_change_time == START + 5 * S
    assert [(w.name, w.position) for w in lq_b.head] == [("urgent", 0), ("w1", 2)]
    # a/main's names did not change, but positions shifted: that is a change too.
    lq_a = tracker.local_queue_json("a/main")
    assert lq_a == {
        "head": [{"name": "w0", "position": 1}, {"name": "w2", "position": 3}],
        "lastChangeTime": "2026-01-01T00:00:05Z",
    }
    # The LocalQueue of another ClusterQueue and the dangling one: empty heads.
    dangling = tracker.local_queue_status("d/dangling")
    assert dangling is not None and dangling.head == () and dangling.last_change_time == START

    # Nothing changes: lastChangeTime stays at the instant of the last change.
    assert not move(31)
    cq = tracker.cluster_queue_status("cq")
    assert cq is not None and cq.last_change_time == START + 5 * S

    # The end of the run takes one more snapshot, at its own instant.
    delete_object(s, "Workload", "b", "urgent")
    assert tracker.finish(s)
    cq = tracker.cluster_queue_status("cq")
    assert cq is not None and cq.last_change_time == START + 31 * S
    assert [w.name for w in cq.head] == ["w0", "w1", "w2"]
    assert tracker.next_snapshot_at == START + 35 * S


def test_queues_created_and_deleted_during_a_run() -> None:
    s, clock = scheduler(FULL)
    tracker = QueueStatusTracker(FULL, START)
    tracker.advance(s, START + 1)
    apply(s, _cq("late", "0"), _lq("e", "late", "late"), _wl("e", "x", "late", at=3 * S))
    clock.set(START + 7 * S)
    assert tracker.cluster_queue_status("late") is None  # not seen by a snapshot yet
    tracker.advance(s, START + 11 * S)
    late = tracker.cluster_queue_status("late")
    assert late is not None and late.last_change_time == START + 5 * S
    assert [w.name for w in late.head] == ["x"]
    delete_object(s, "ClusterQueue", None, "late")
    delete_object(s, "LocalQueue", "e", "late")
    tracker.advance(s, START + 16 * S)
    assert tracker.cluster_queue_status("late") is None
    assert tracker.local_queue_status("e/late") is None


def test_cluster_queues_only_or_local_queues_only() -> None:
    cq_only = QueueVisibility(cluster_queue_max_count=2)
    s, _ = scheduler(cq_only)
    fill(s)
    tracker = QueueStatusTracker(cq_only, START)
    tracker.finish(s)
    assert tracker.cluster_queue_json("cq") is not None
    assert tracker.local_queue_json("a/main") is None
    lq_only = QueueVisibility(cluster_queue_max_count=0, local_queue_max_count=1)
    tracker = QueueStatusTracker(lq_only, START)
    tracker.finish(s)
    assert tracker.cluster_queue_json("cq") is None
    assert tracker.local_queue_json("a/main") == {
        "head": [{"name": "w0", "position": 0}],
        "lastChangeTime": "2026-01-01T00:00:00Z",
    }
