"""Scheduler events (docs/scheduling.md#invalid-input, #flush, #stop-deactivate-finish,
# eviction-finalisation): finish, delete, deactivation, stop policies, late ClusterQueues, dangling
# LocalQueues."""

from __future__ import annotations

import dataclasses

import pytest

from scheduler.core.queue.interface import QueueEntry
from tests.unit.core.builders import (
    SECOND,
    START,
    Cluster,
    admitted_workload,
    basic_cluster,
    cohort,
    flavor,
    group,
    local_queue,
    namespace,
    rfc3339,
    simple_cq,
    workload,
)

NS = "team-a"
CPU = "cpu"
FR = ("default", CPU)
W1 = f"{NS}/w1"
W2 = f"{NS}/w2"


def full_cluster(strategy: str = "BestEffortFIFO") -> Cluster:
    """cq-a (cpu 2) with w1 admitted and w2 parked behind it."""
    c = basic_cluster(2, strategy=strategy)
    c.apply(
        workload(NS, "w1", "lq-a", {CPU: "2"}), workload(NS, "w2", "lq-a", {CPU: "2"}, created=1)
    )
    assert c.cycle().admitted == [W1]
    assert c.cycle().admitted == []
    return c


# -------------------------------------------------------- docs/scheduling.md#finishing-and-deletion


@pytest.mark.parametrize(("failed", "reason"), [(False, "Succeeded"), (True, "Failed")])
def test_finish_frees_quota_at_once_and_flushes(failed: bool, reason: str) -> None:
    c = full_cluster()
    queue = c.s.queues.queue("cq-a")
    assert queue is not None and queue.is_parked(W2)
    c.clock.set(START + 30 * SECOND)
    c.finish(W1, failed=failed)
    finished = c.condition(W1, "Finished")
    assert finished is not None
    assert (finished["status"], finished["reason"]) == ("True", reason)
    assert finished["lastTransitionTime"] == rfc3339(START + 30 * SECOND)[:19] + "Z"
    assert c.usage("cq-a", FR) == 0
    assert queue.in_heap(W2)
    assert c.cycle().admitted == [W2]
    assert c.pending("cq-a") == []


def test_finished_workload_is_never_queued_again() -> None:
    c = basic_cluster(1)
    c.apply(workload(NS, "w1", "lq-a", {CPU: "2"}))
    c.cycle()
    c.finish(W1)
    assert c.pending("cq-a") == []
    c.apply(simple_cq("cq-a", 4))  # a quota increase flushes the CQ
    assert not c.cycle().ran
    assert not c.admitted(W1)


def test_finished_workload_is_not_counted_in_queue_status() -> None:
    c = basic_cluster(4)
    c.apply(workload(NS, "w1", "lq-a", {CPU: "2"}))
    c.cycle()
    c.finish(W1)
    cq = c.cq_status("cq-a")
    lq = c.lq_status(f"{NS}/lq-a")
    assert (cq["reservingWorkloads"], cq["admittedWorkloads"]) == (0, 0)
    assert (lq["reservingWorkloads"], lq["admittedWorkloads"]) == (0, 0)
    assert lq["flavorsReservation"] == [
        {"name": "default", "resources": [{"name": CPU, "total": "0"}]}
    ]
    assert lq["flavorUsage"] == [{"name": "default", "resources": [{"name": CPU, "total": "0"}]}]


def test_update_of_a_finished_workload_does_not_count_its_usage_again() -> None:
    c = basic_cluster(4)
    c.apply(workload(NS, "w1", "lq-a", {CPU: "2"}))
    c.cycle()
    c.finish(W1)
    # A metadata-only update (no status): the core keeps what it wrote, Finished included.
    c.apply(workload(NS, "w1", "lq-a", {CPU: "2"}, labels={"touched": "yes"}))
    assert c.wl(W1).finished
    assert c.usage("cq-a", FR) == 0
    assert c.cq_status("cq-a")["reservingWorkloads"] == 0


def test_workload_arriving_admitted_and_finished_holds_no_quota() -> None:
    c = basic_cluster(4)
    doc = admitted_workload(NS, "done", "lq-a", "cq-a", {CPU: "3"})
    doc["status"]["conditions"].append(
        {
            "type": "Finished",
            "status": "True",
            "reason": "Succeeded",
            "message": "Job finished successfully",
            "lastTransitionTime": rfc3339(START),
        }
    )
    c.apply(doc)
    assert c.usage("cq-a", FR) == 0
    assert c.cq_status("cq-a")["reservingWorkloads"] == 0


# --------------------------------------------------------------------------- delete


def test_delete_of_a_quota_holder_frees_quota_and_flushes() -> None:
    c = full_cluster()
    assert c.delete("Workload", NS, "w1")
    assert W1 not in c.s.objects.workloads
    assert c.usage("cq-a", FR) == 0
    assert c.cycle().admitted == [W2]


def test_delete_of_a_pending_workload_removes_it_from_the_listing() -> None:
    c = full_cluster()
    assert c.pending("cq-a") == [W2]
    assert c.delete("Workload", NS, "w2")
    assert c.pending("cq-a") == []
    assert c.cq_status("cq-a")["pendingWorkloads"] == 0
    assert not c.delete("Workload", NS, "w2")


# ------------------------------------------------------------------ docs/scheduling.md#deactivation


def test_deactivating_a_pending_workload() -> None:
    c = full_cluster()
    c.set_active(W2, False)
    assert c.cond(W2, "Evicted") == ("True", "Deactivated", "The workload is deactivated")
    assert c.pending("cq-a") == []
    c.finish(W1)
    assert not c.cycle().ran


def test_deactivating_a_quota_holder_evicts_and_finalises() -> None:
    c = full_cluster()
    c.set_active(W1, False)
    assert c.cond(W1, "Evicted") == ("True", "Deactivated", "The workload is deactivated")
    assert c.cond(W1, "Requeued") == ("False", "Deactivated", "The workload is deactivated")
    assert c.cond(W1, "QuotaReserved") == ("False", "Pending", "The workload is deactivated")
    assert c.cond(W1, "Admitted") == ("False", "NoReservation", "The workload has no reservation")
    assert c.admission(W1) is None
    assert c.usage("cq-a", FR) == 0
    assert c.pending("cq-a") == [W2]
    # The flush after the released quota lets w2 in.
    assert c.cycle().admitted == [W2]


def test_reactivation_requeues_with_reactivated() -> None:
    c = full_cluster()
    c.set_active(W1, False)
    c.cycle()  # w2 takes the quota
    c.finish(W2)
    c.set_active(W1, True)
    assert c.cond(W1, "Requeued") == ("True", "Reactivated", "The workload was reactivated")
    assert c.pending("cq-a") == [W1]
    assert c.cycle().admitted == [W1]
    assert c.cond(W1, "Evicted") == (
        "False",
        "QuotaReserved",
        "Previously: The workload is deactivated",
    )


def test_workload_created_inactive_is_marked_deactivated() -> None:
    c = basic_cluster(2)
    c.apply(workload(NS, "w1", "lq-a", {CPU: "1"}, active=False))
    assert c.pending("cq-a") == []
    assert c.cond(W1, "Evicted") == ("True", "Deactivated", "The workload is deactivated")


def test_deactivation_by_update_of_a_pending_workload() -> None:
    c = full_cluster()
    c.apply(workload(NS, "w2", "lq-a", {CPU: "2"}, created=1, active=False))
    assert not c.wl(W2).active
    assert c.pending("cq-a") == []
    assert c.cond(W2, "Evicted") == ("True", "Deactivated", "The workload is deactivated")


def test_deactivation_by_update_evicts_a_quota_holder() -> None:
    c = full_cluster()
    c.apply(workload(NS, "w1", "lq-a", {CPU: "2"}, active=False))
    assert c.cond(W1, "Evicted") == ("True", "Deactivated", "The workload is deactivated")
    assert c.cond(W1, "Requeued") == ("False", "Deactivated", "The workload is deactivated")
    assert c.admission(W1) is None
    assert c.usage("cq-a", FR) == 0
    assert c.cycle().admitted == [W2]


def test_reactivation_by_update_requeues() -> None:
    c = full_cluster()
    c.set_active(W1, False)
    c.cycle()  # w2 takes the quota
    c.finish(W2)
    c.apply(workload(NS, "w1", "lq-a", {CPU: "2"}))  # spec.active back to true
    assert c.wl(W1).active
    assert c.cond(W1, "Requeued") == ("True", "Reactivated", "The workload was reactivated")
    assert c.pending("cq-a") == [W1]
    assert c.cycle().admitted == [W1]


# -------------------------------------------------------------- docs/scheduling.md#stop-policies CQ


def test_cluster_queue_hold_keeps_admitted_and_stops_admitting() -> None:
    c = full_cluster()
    c.apply(simple_cq("cq-a", 2, stop_policy="Hold"))
    assert c.admitted(W1)
    assert c.cond(W1, "Evicted") is None
    assert c.cond(W2, "QuotaReserved") == (
        "False",
        "Inadmissible",
        "ClusterQueue cq-a is inactive",
    )
    c.finish(W1)
    assert not c.cycle().ran
    assert c.pending("cq-a") == [W2]
    c.apply(simple_cq("cq-a", 2))
    assert c.cycle().admitted == [W2]


def test_cluster_queue_hold_and_drain_evicts_and_restart_requeues() -> None:
    c = full_cluster()
    c.apply(simple_cq("cq-a", 2, stop_policy="HoldAndDrain"))
    assert c.cond(W1, "Evicted") == ("True", "ClusterQueueStopped", "The ClusterQueue is stopped")
    assert c.cond(W1, "Requeued") == ("False", "ClusterQueueStopped", "The ClusterQueue is stopped")
    assert c.admission(W1) is None
    assert c.usage("cq-a", FR) == 0
    assert c.cq_status("cq-a")["reservingWorkloads"] == 0
    assert not c.cycle().ran
    c.clock.set(START + 60 * SECOND)
    c.apply(simple_cq("cq-a", 2))
    assert c.cond(W1, "Requeued") == (
        "True",
        "ClusterQueueRestarted",
        "The ClusterQueue was restarted after being stopped",
    )
    # w1 keeps its creation-time order and goes first again.
    assert c.pending("cq-a") == [W1, W2]
    assert c.cycle().admitted == [W1]


def _reserving_only(name: str) -> dict[str, object]:
    """A workload holding quota in cq-a without Admitted=True (reservation only)."""
    doc = admitted_workload(NS, name, "lq-a", "cq-a", {CPU: "1"})
    doc["status"]["conditions"] = doc["status"]["conditions"][:1]
    return doc


def test_cluster_queue_hold_drops_reservations_that_are_not_admitted() -> None:
    c = basic_cluster(4)
    c.apply(_reserving_only("r"), admitted_workload(NS, "run", "lq-a", "cq-a", {CPU: "2"}))
    c.apply(simple_cq("cq-a", 4, stop_policy="Hold"))
    assert c.admitted(f"{NS}/run")
    status, reason, _ = c.cond(f"{NS}/r", "QuotaReserved") or ("", "", "")
    assert (status, reason) == ("False", "Inadmissible")
    assert c.admission(f"{NS}/r") is None
    assert c.usage("cq-a", FR) == 2000


def test_local_queue_hold_drops_reservations_that_are_not_admitted() -> None:
    c = basic_cluster(4)
    c.apply(_reserving_only("r"), admitted_workload(NS, "run", "lq-a", "cq-a", {CPU: "2"}))
    c.apply(local_queue(NS, "lq-a", "cq-a", stop_policy="Hold"))
    assert c.admitted(f"{NS}/run")
    status, reason, _ = c.cond(f"{NS}/r", "QuotaReserved") or ("", "", "")
    assert (status, reason) == ("False", "Inadmissible")
    assert c.admission(f"{NS}/r") is None
    assert c.usage("cq-a", FR) == 2000


# -------------------------------------------------------------- docs/scheduling.md#stop-policies LQ


def test_local_queue_hold_removes_pending_workloads_from_the_queue() -> None:
    c = full_cluster()
    c.apply(local_queue(NS, "lq-a", "cq-a", stop_policy="Hold"))
    assert c.admitted(W1)
    assert c.pending("cq-a") == []
    assert c.cond(W2, "QuotaReserved") == ("False", "Inadmissible", "LocalQueue lq-a is inactive")
    lq = c.lq_status(f"{NS}/lq-a")
    assert lq["pendingWorkloads"] == 0
    assert lq["conditions"][0]["reason"] == "Stopped"
    assert lq["conditions"][0]["message"] == "LocalQueue is stopped"
    c.finish(W1)
    assert not c.cycle().ran
    c.apply(local_queue(NS, "lq-a", "cq-a"))
    assert c.cycle().admitted == [W2]


def test_local_queue_hold_and_drain_evicts_and_restart_requeues() -> None:
    c = full_cluster()
    c.apply(local_queue(NS, "lq-a", "cq-a", stop_policy="HoldAndDrain"))
    assert c.cond(W1, "Evicted") == ("True", "LocalQueueStopped", "The LocalQueue is stopped")
    assert c.cond(W1, "Requeued") == ("False", "LocalQueueStopped", "The LocalQueue is stopped")
    assert c.admission(W1) is None
    assert c.usage("cq-a", FR) == 0
    assert c.pending("cq-a") == []
    assert not c.cycle().ran
    c.apply(local_queue(NS, "lq-a", "cq-a"))
    assert c.cond(W1, "Requeued") == (
        "True",
        "LocalQueueRestarted",
        "The LocalQueue was restarted after being stopped",
    )
    assert c.pending("cq-a") == [W1, W2]
    assert c.cycle().admitted == [W1]


def test_hold_and_drain_of_another_local_queue_leaves_this_one_alone() -> None:
    c = full_cluster()
    c.apply(
        local_queue(NS, "lq-b", "cq-a"), local_queue(NS, "lq-b", "cq-a", stop_policy="HoldAndDrain")
    )
    assert c.admitted(W1)
    assert c.cond(W1, "Evicted") is None


# ----------------------------------------------------------------- docs/scheduling.md#invalid-input


def test_cluster_queue_created_after_admitted_workloads_counts_their_usage() -> None:
    c = Cluster()
    c.apply(
        namespace(NS),
        flavor("default"),
        local_queue(NS, "lq-a", "cq-a"),
        admitted_workload(NS, "old", "lq-a", "cq-a", {CPU: "3"}),
        workload(NS, "new", "lq-a", {CPU: "2"}),
    )
    assert c.cond(f"{NS}/new", "QuotaReserved") == (
        "False",
        "Inadmissible",
        "ClusterQueue cq-a doesn't exist",
    )
    c.apply(simple_cq("cq-a", 4))
    assert c.usage("cq-a", FR) == 3000
    assert c.cq_status("cq-a")["reservingWorkloads"] == 1
    assert c.pending("cq-a") == [f"{NS}/new"]
    assert c.cycle().admitted == []
    assert c.message(f"{NS}/new") == (
        "couldn't assign flavors to pod set main: "
        "insufficient unused quota for cpu in flavor default, 1 more needed"
    )


def test_local_queue_to_missing_cluster_queue() -> None:
    c = Cluster()
    c.apply(
        namespace(NS),
        flavor("default"),
        local_queue(NS, "lq-a", "cq-ghost"),
        workload(NS, "w", "lq-a", {CPU: "1"}),
    )
    assert c.cond(f"{NS}/w", "QuotaReserved") == (
        "False",
        "Inadmissible",
        "ClusterQueue cq-ghost doesn't exist",
    )
    lq = c.lq_status(f"{NS}/lq-a")
    assert lq["pendingWorkloads"] == 0
    assert (lq["conditions"][0]["reason"], lq["conditions"][0]["message"]) == (
        "ClusterQueueDoesNotExist",
        "Can't submit new workloads to clusterQueue",
    )
    assert not c.cycle().ran
    c.apply(simple_cq("cq-ghost", 4))
    assert c.cycle().admitted == [f"{NS}/w"]


def test_workload_to_missing_local_queue() -> None:
    c = basic_cluster(4)
    c.apply(workload(NS, "w", "lq-ghost", {CPU: "1"}))
    assert c.cond(f"{NS}/w", "QuotaReserved") == (
        "False",
        "Inadmissible",
        "LocalQueue lq-ghost doesn't exist",
    )
    assert c.pending("cq-a") == []
    c.apply(local_queue(NS, "lq-ghost", "cq-a"))
    assert c.cycle().admitted == [f"{NS}/w"]


def test_deleting_the_local_queue_unqueues_its_workloads() -> None:
    c = full_cluster()
    assert c.delete("LocalQueue", NS, "lq-a")
    assert c.pending("cq-a") == []
    assert c.cond(W2, "QuotaReserved") == ("False", "Inadmissible", "LocalQueue lq-a doesn't exist")
    assert c.admitted(W1)  # quota holders keep running


def test_cluster_queue_with_missing_flavor_becomes_active_when_the_flavor_appears() -> None:
    c = Cluster()
    c.apply(
        namespace(NS),
        simple_cq("cq-a", 4),
        local_queue(NS, "lq-a", "cq-a"),
        workload(NS, "w", "lq-a", {CPU: "1"}),
    )
    assert c.cond(f"{NS}/w", "QuotaReserved") == (
        "False",
        "Inadmissible",
        "ClusterQueue cq-a is inactive",
    )
    assert not c.cycle().ran
    c.apply(flavor("default"))
    assert c.cycle().admitted == [f"{NS}/w"]


def test_deleting_a_cluster_queue_and_recreating_it_recounts_holders() -> None:
    c = full_cluster()
    assert c.delete("ClusterQueue", None, "cq-a")
    # W1 still holds quota, so cq-a stays as Terminating (docs/scheduling.md#clusterqueue-status)
    # and W2 waits on an inactive ClusterQueue; re-creating it cancels the deletion.
    assert c.cq_status("cq-a")["conditions"][0]["reason"] == "Terminating"
    assert c.cond(W2, "QuotaReserved") == (
        "False",
        "Inadmissible",
        "ClusterQueue cq-a is inactive",
    )
    c.apply(simple_cq("cq-a", 2))
    assert c.usage("cq-a", FR) == 2000
    assert c.cycle().admitted == []
    assert c.pending("cq-a") == [W2]


# -------------------------------------------------------------- docs/scheduling.md#queue-structures


def test_metadata_only_update_keeps_a_parked_workload_parked() -> None:
    c = full_cluster()
    queue = c.s.queues.queue("cq-a")
    assert queue is not None and queue.is_parked(W2)
    c.apply(workload(NS, "w2", "lq-a", {CPU: "2"}, created=1, labels={"team": "x"}))
    assert queue.is_parked(W2)
    assert not c.cycle().ran


def test_spec_update_moves_a_parked_workload_back_to_the_heap() -> None:
    c = full_cluster()
    queue = c.s.queues.queue("cq-a")
    assert queue is not None
    c.apply(workload(NS, "w2", "lq-a", {CPU: "1"}, created=1))
    assert queue.in_heap(W2)


# ------------------------------------------------------------------- docs/scheduling.md#flush flush


def test_reclaimable_pods_of_an_admitted_workload_free_quota_and_flush() -> None:
    c = basic_cluster(4)
    c.apply(
        admitted_workload(NS, "w1", "lq-a", "cq-a", {CPU: "4"}, count=4, per_pod={CPU: "1"}),
        workload(NS, "w2", "lq-a", {CPU: "1"}),
    )
    assert c.cycle().admitted == []
    queue = c.s.queues.queue("cq-a")
    assert queue is not None and queue.is_parked(W2)
    doc = admitted_workload(NS, "w1", "lq-a", "cq-a", {CPU: "4"}, count=4, per_pod={CPU: "1"})
    doc["status"]["reclaimablePods"] = [{"name": "main", "count": 2}]
    c.apply(doc)
    assert c.usage("cq-a", FR) == 2000
    assert queue.in_heap(W2)
    assert c.cycle().admitted == [W2]


def test_the_reclaimable_signal_frees_quota_only_ever_more_while_admitted() -> None:
    """A pod group's succeeded Pods (docs/cluster.md#pod-groups) reach the core as a
    signal, not a status write: the same effect as the status's reclaimablePods."""
    c = basic_cluster(4)
    c.apply(
        admitted_workload(NS, "w1", "lq-a", "cq-a", {CPU: "4"}, count=4, per_pod={CPU: "1"}),
        workload(NS, "w2", "lq-a", {CPU: "1"}),
    )
    assert c.cycle().admitted == []
    assert c.s.set_reclaimable(W1, {"main": 1, "other": 0})
    assert c.usage("cq-a", FR) == 3000
    assert dict(c.s.workload(W1).reclaimable) == {"main": 1}  # type: ignore[union-attr]
    assert not c.s.set_reclaimable(W1, {"main": 1})  # nothing new
    assert not c.s.set_reclaimable(W1, {})  # never fewer while it holds quota
    assert c.usage("cq-a", FR) == 3000
    assert c.cycle().admitted == [W2]
    assert not c.s.set_reclaimable("team/none", {"main": 1})


def test_a_group_waiting_for_replacement_pods_is_not_queued() -> None:
    """Kueue's WaitingForReplacementPods (docs/cluster.md#pod-groups)."""
    c = basic_cluster(4)
    c.apply(workload(NS, "w1", "lq-a", {CPU: "1"}))
    assert not c.s.set_waiting_for_replacements(W1, False)  # never set: nothing to say
    assert c.s.set_waiting_for_replacements(W1, True)
    waiting = c.s.workload(W1).conditions.get("WaitingForReplacementPods")  # type: ignore[union-attr]
    assert waiting is not None and waiting.is_true
    assert (waiting.reason, waiting.message) == ("PodsFailed", "Some Failed pods need replacement")
    assert not c.s.set_waiting_for_replacements(W1, True)  # said already
    assert c.cycle().admitted == []
    assert c.s.set_waiting_for_replacements(W1, False)
    whole = c.s.workload(W1).conditions.get("WaitingForReplacementPods")  # type: ignore[union-attr]
    assert whole is not None and (whole.status, whole.reason) == ("False", "PodsReady")
    assert c.cycle().admitted == [W1]


HOLD = "StatefulSet scaled to zero; workload on hold"


def test_a_held_quota_holder_gives_its_quota_back_without_an_eviction() -> None:
    """Kueue's OnHold (docs/cluster.md#statefulsets): the reservation is dropped, the
    workload is not queued, the one parked behind it is admitted."""
    c = full_cluster()
    assert c.s.set_on_hold(W1, HOLD)
    reserved = c.condition(W1, "QuotaReserved")
    assert reserved is not None
    assert (reserved["status"], reserved["reason"], reserved["message"]) == (
        "False",
        "OnHold",
        HOLD,
    )
    admitted = c.condition(W1, "Admitted")
    assert admitted is not None and admitted["status"] == "False"
    assert c.condition(W1, "Evicted") is None
    held = c.s.workload(W1)
    assert held is not None and held.admission is None and held.on_hold
    assert c.usage("cq-a", FR) == 0
    assert not c.s.set_on_hold(W1, HOLD)  # held already
    assert c.cycle().admitted == [W2]
    assert W1 not in c.pending("cq-a")


def test_a_hold_lifted_queues_the_workload_again() -> None:
    c = basic_cluster(4)
    c.apply(workload(NS, "w1", "lq-a", {CPU: "1"}))
    assert not c.s.set_on_hold(W1, None)  # not held: nothing to lift
    assert c.s.set_on_hold(W1, HOLD)  # pending: taken out of its queue
    assert c.cycle().admitted == []
    assert c.s.set_on_hold(W1, None)
    reserved = c.condition(W1, "QuotaReserved")
    assert reserved is not None
    assert (reserved["status"], reserved["reason"], reserved["message"]) == (
        "False",
        "Pending",
        "Workload no longer on hold; waiting for quota reservation",
    )
    assert c.cycle().admitted == [W1]
    assert not c.s.set_on_hold("team/none", HOLD)


def test_a_workload_arriving_on_hold_is_not_queued() -> None:
    """After a restart the hold is read back from the status."""
    c = basic_cluster(4)
    held = workload(NS, "w1", "lq-a", {CPU: "1"})
    held["status"] = {
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "OnHold",
                "message": HOLD,
                "lastTransitionTime": rfc3339(START),
            }
        ]
    }
    c.apply(held)
    assert c.cycle().admitted == []
    assert c.s.set_on_hold(W1, None)
    assert c.cycle().admitted == [W1]


def test_cohort_quota_change_flushes_its_tree() -> None:
    c = Cluster()
    c.apply(
        namespace(NS),
        flavor("default"),
        cohort("co"),
        simple_cq("cq-a", 0, cohort="co"),
        local_queue(NS, "lq-a", "cq-a"),
        workload(NS, "w1", "lq-a", {CPU: "2"}),
    )
    assert c.cycle().admitted == []
    c.apply(cohort("co", groups=[group([CPU], {"default": {CPU: 4}})]))
    assert c.cycle().admitted == [W1]
    assert c.cq_status("cq-a")["flavorsReservation"][0]["resources"] == [
        {"name": CPU, "total": "2", "borrowed": "2"}
    ]


def test_workload_arriving_mid_eviction_is_finalised_and_gives_quota_back() -> None:
    # docs/scheduling.md#eviction-finalisation / D9: an eviction is finalised at the end of the
    # event that set it; for an input object that event is its arrival. Without this its quota is
    # never released.
    c = basic_cluster(2)
    doc = admitted_workload(NS, "w1", "lq-a", "cq-a", {CPU: "2"})
    doc["status"]["conditions"].append(
        {
            "type": "Evicted",
            "status": "True",
            "reason": "Preempted",
            "message": "Preempted to accommodate a workload",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    )
    c.apply(doc)
    c.s.finalize_evictions()
    assert c.admission(W1) is None
    assert c.usage("cq-a", FR) == 0
    assert c.cond(W1, "Requeued") == ("True", "Preempted", "Preempted to accommodate a workload")
    assert c.pending("cq-a") == [W1]


# --------------------------------------------------------------------- queue entries


def test_queue_entry_gives_back_the_previous_entry_only_while_it_is_exact() -> None:
    c = full_cluster()
    wl = c.s.objects.workloads[W2]
    previous = c.s.queue_entry(wl)
    assert c.s.queue_entry(wl, previous) is previous
    assert c.s.queue_entry(wl, None) == previous
    # Every field the entry carries makes a new one when it moves.
    wl.revision += 1
    fresh = c.s.queue_entry(wl, previous)
    assert fresh is not previous and fresh.revision == previous.revision + 1
    assert c.s.queue_entry(wl, fresh) is fresh
    wl.priority += 5
    bumped = c.s.queue_entry(wl, fresh)
    assert bumped is not fresh and bumped.priority == fresh.priority + 5
    wl.conditions.set("Requeued", "False", "Backoff", "waiting", START)
    gated = c.s.queue_entry(wl, bumped)
    assert gated is not bumped and gated.requeued_false
    # An entry of another workload is never taken for this one's.
    other = c.s.queue_entry(c.s.objects.workloads[W1])
    assert c.s.queue_entry(wl, other).key == W2


def test_queue_entry_never_gives_back_a_previous_entry_that_differs_in_any_field() -> None:
    c = full_cluster()
    wl = c.s.objects.workloads[W2]
    exact = c.s.queue_entry(wl)
    # One field changed at a time, every field the record has (a field added later is
    # covered too): the previous entry is not returned, the exact one is.
    for f in dataclasses.fields(QueueEntry):
        value = getattr(exact, f.name)
        changed: object
        if isinstance(value, bool):
            changed = not value
        elif isinstance(value, int):
            changed = value + 1
        elif value is None:
            changed = 1
        else:
            changed = f"{value}-other"
        previous = dataclasses.replace(exact, **{f.name: changed})
        if f.name in ("namespace", "name"):
            # Both are parts of the key, compared through it: only a different key
            # makes them differ for one workload.
            previous = dataclasses.replace(previous, key=f"{previous.namespace}/{previous.name}")
        got = c.s.queue_entry(wl, previous)
        assert got is not previous, f.name
        assert got == exact, f.name


# ------------------------------------------------------------------ queue conditions


def test_queue_conditions_are_read_again_only_once_what_they_depend_on_moved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    c = full_cluster()
    lq = f"{NS}/lq-a"
    c.s.observe_conditions()
    assert c.s.condition_since("LocalQueue", lq) == START
    reads: list[tuple[str, str]] = []
    real = c.s.queue_condition_state

    def counted(kind: str, name: str) -> str:
        reads.append((kind, name))
        return real(kind, name)

    monkeypatch.setattr(c.s, "queue_condition_state", counted)
    # Cycles, finishes and arrivals move nothing a queue condition reads.
    c.clock.set(START + 5 * SECOND)
    c.finish(W1)
    c.cycle()
    c.apply(workload(NS, "w3", "lq-a", {CPU: "1"}, created=2))
    c.s.observe_conditions()
    assert reads == []
    # Each kind of queue object change is read again, and stamped when it changed.
    steps = [
        (local_queue(NS, "lq-a", "cq-a", stop_policy="Hold"), "LocalQueue", lq),
        (local_queue(NS, "lq-a", "cq-a"), "LocalQueue", lq),
        (simple_cq("cq-a", 2, stop_policy="Hold"), "ClusterQueue", "cq-a"),
        (simple_cq("cq-a", 2), "ClusterQueue", "cq-a"),
    ]
    for i, (doc, kind, name) in enumerate(steps, start=1):
        c.clock.set(START + (10 + i) * SECOND)
        reads.clear()
        c.apply(doc)
        c.s.observe_conditions()
        assert (kind, name) in reads, doc
        assert c.s.condition_since(kind, name) == START + (10 + i) * SECOND, doc
