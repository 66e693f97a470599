"""The read interface of the cluster state (docs/architecture.md#the-cluster-state): what
the runtime and the simulator read follows every change, without copies, and the few
commands they drive the core with do what they say."""

from __future__ import annotations

from scheduler.core.state_view import ClusterStateView
from tests.unit.core.builders import basic_cluster, workload

NS = "team-a"
CPU = "cpu"
W1 = f"{NS}/w1"
W2 = f"{NS}/w2"


def test_the_object_views_follow_every_change_and_are_the_cores_own_maps() -> None:
    c = basic_cluster(2)
    view: ClusterStateView = c.s  # the Scheduler is what the outside types against
    objects = view.objects
    assert "cq-a" in objects.cluster_queues
    assert f"{NS}/lq-a" in objects.local_queues
    assert W1 not in objects.workloads and view.workload(W1) is None
    c.apply(workload(NS, "w1", "lq-a", {CPU: "2"}))
    # The same view object sees the new workload: it is not a copy taken earlier.
    assert view.objects is objects
    assert W1 in objects.workloads
    assert view.workload(W1) is objects.workloads[W1]
    assert view.queues.locate(W1) == "cq-a"
    c.delete("Workload", NS, "w1")
    assert W1 not in objects.workloads and view.workload(W1) is None


def test_holders_and_quota_read_what_a_cycle_admitted() -> None:
    c = basic_cluster(2)
    c.apply(workload(NS, "w1", "lq-a", {CPU: "2"}))
    assert c.cycle().admitted == [W1]
    view: ClusterStateView = c.s
    assert view.holders.keys("cq-a") == [W1]
    assert view.holders.cluster_queue_of(W1) == "cq-a"
    assert view.quota.usage("cq-a", ("default", CPU)) == 2000
    assert view.queues.locate(W1) is None  # admitted: no longer pending


def test_retry_flushes_exactly_the_named_cluster_queues() -> None:
    c = basic_cluster(2, strategy="BestEffortFIFO")
    c.apply(
        workload(NS, "w1", "lq-a", {CPU: "2"}), workload(NS, "w2", "lq-a", {CPU: "2"}, created=1)
    )
    assert c.cycle().admitted == [W1]
    assert c.cycle().admitted == []  # w2 tried, did not fit: parked
    queue = c.s.queues.queue("cq-a")
    assert queue is not None
    assert queue.counts().parked == 1  # behind w1
    c.s.retry([])  # nothing named: nothing moves
    assert queue.counts().parked == 1
    c.s.retry(["cq-a"])
    assert queue.counts().parked == 0 and queue.counts().active == 1
