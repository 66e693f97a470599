"""Why pending: the blockers the core recorded with its QuotaReserved=False condition."""

from __future__ import annotations

from datetime import UTC, datetime

from scheduler.core.blockers import Blocker
from scheduler.core.clock import ManualClock, instant_from_datetime
from scheduler.core.cycle import run_cycle
from scheduler.core.scheduler import Scheduler
from scheduler.runtime.capture import EntryCache, capture_quota, capture_snapshot
from scheduler.runtime.why import why_pending
from tests.unit.runtime.support import (
    Json,
    cluster,
    cluster_queue,
    flavor,
    local_queue,
    namespace,
    workload,
)

START = instant_from_datetime(datetime(2026, 1, 1, tzinfo=UTC))


def one_queue(s: Scheduler, cpu: str, *workloads: Json) -> None:
    """Namespace `team`, one flavor, ClusterQueue `cq` with `cpu` of quota, LocalQueue
    `main`, then the workloads."""
    cluster(
        s,
        namespace("team"),
        flavor(),
        cluster_queue("cq", cpu),
        local_queue("team", "main", "cq"),
        *workloads,
    )


def test_quota_shortfall_names_flavor_resource_and_amounts() -> None:
    s = Scheduler(ManualClock(START))
    one_queue(
        s,
        "4",
        workload("team", "first", "main", "2500m", priority=1),
        workload("team", "second", "main", "3"),
    )
    assert run_cycle(s).admitted == ["team/first"]
    run_cycle(s)
    why = why_pending(s.objects.workloads["team/second"])
    assert why is not None and why.reason == "Pending"
    assert why.message == (
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in "
        "flavor default, 1500m more needed"
    )
    assert why.blockers == (
        Blocker(
            "Quota",
            "insufficient unused quota for cpu in flavor default, 1500m more needed",
            "default",
            "cpu",
            "1500m",
            requested=3000,
            available=1500,
        ),
    )


def test_a_policy_blocks_as_a_whole() -> None:
    s = Scheduler(ManualClock(START))
    stopped = cluster_queue("cq", "4")
    stopped["spec"]["stopPolicy"] = "Hold"
    cluster(
        s,
        namespace("team"),
        flavor(),
        stopped,
        local_queue("team", "main", "cq"),
        workload("team", "w", "main"),
    )
    why = why_pending(s.objects.workloads["team/w"])
    assert why is not None and why.reason == "Inadmissible"
    assert why.blockers == (Blocker("Policy", "ClusterQueue cq is inactive"),)


def test_a_condition_the_core_did_not_set_is_one_other_blocker() -> None:
    s = Scheduler(ManualClock(START))
    written = workload("team", "w", "main")
    message = "couldn't assign flavors to pod set main: written by another replica"
    written["status"] = {
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "Pending",
                "message": message,
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
    cluster(s, namespace("team"), flavor(), cluster_queue("cq", "0"))
    cluster(s, local_queue("team", "main", "cq"), written)
    why = why_pending(s.objects.workloads["team/w"])
    assert why is not None and why.blockers == (Blocker("Other", message),)
    run_cycle(s)  # the core tries it: its own blockers replace the stand-in
    why = why_pending(s.objects.workloads["team/w"])
    assert why is not None and [b.kind for b in why.blockers] == ["Capacity"]


def test_entries_carry_the_condition_of_a_real_cycle() -> None:
    s = Scheduler(ManualClock(START))
    one_queue(s, "1", workload("team", "small", "main", "1"), workload("team", "big", "main", "2"))
    before = capture_snapshot(s, EntryCache(), 1).locate("team", "big")
    assert before is not None and before.entry.why is None  # not tried yet
    run_cycle(s)
    run_cycle(s)
    item = capture_snapshot(s, EntryCache(), 2).locate("team", "big")
    assert item is not None and item.entry.why is not None
    why = item.entry.why
    assert why.reason == "Pending"
    assert why.message == item.entry.why_pending
    assert why.since == START
    # 2 cpus asked, 1 nominal: more than the queue could ever hold.
    assert [(b.kind, b.flavor, b.resource, b.amount) for b in why.blockers] == [
        ("Capacity", "default", "cpu", "1")
    ]
    assert (why.blockers[0].requested, why.blockers[0].available) == (2000, 1000)


def test_quota_capture_reads_the_tree() -> None:
    s = Scheduler(ManualClock(START))
    cohort = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Cohort",
        "metadata": {"name": "pool"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "4"}]}
                    ],
                }
            ]
        },
    }
    lender = cluster_queue("lender", "4")
    lender["spec"]["cohort"] = "pool"
    lender["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"] = "1"
    borrower = cluster_queue("borrower", "2")
    borrower["spec"]["cohort"] = "pool"
    borrower["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = "3"
    cluster(
        s,
        namespace("team"),
        flavor(),
        cohort,
        lender,
        borrower,
        local_queue("team", "main", "borrower"),
        workload("team", "w", "main", "4"),
    )
    assert run_cycle(s).admitted == ["team/w"]
    quota = capture_quota(s)
    assert [cq.name for cq in quota.cluster_queues] == ["borrower", "lender"]
    b = quota.cluster_queue("borrower")
    assert b is not None and b.cohort == "pool" and b.active and b.reserving == 1
    (cpu,) = b.resources
    assert (cpu.nominal, cpu.usage, cpu.borrowed, cpu.borrowing_limit) == (2000, 4000, 2000, 3000)
    lender_cpu = quota.cluster_queue("lender").resources[0]  # type: ignore[union-attr]
    assert (lender_cpu.lending_limit, lender_cpu.lendable, lender_cpu.usage) == (1000, 1000, 0)
    (pool,) = quota.cohorts
    assert (pool.name, pool.parent) == ("pool", "")
    (pool_cpu,) = pool.resources
    # SQ(pool) = own 4 + lender's lendable 1 + borrower's 2 (no lending limit): 7 cpus;
    # the borrower uses all of its 2 and 2 more from the pool.
    assert (pool_cpu.nominal, pool_cpu.subtree_quota, pool_cpu.usage) == (4000, 7000, 4000)


def test_workloads_blocked_the_same_way_share_one_tuple_of_blockers() -> None:
    s = Scheduler(ManualClock(START))
    one_queue(s, "0", workload("team", "a", "main", "1"), workload("team", "b", "main", "1"))
    run_cycle(s)
    run_cycle(s)
    a = s.objects.workloads["team/a"]
    b = s.objects.workloads["team/b"]
    assert a.pending_why() is not None and a.pending_why() is b.pending_why()
    why_a, why_b = why_pending(a), why_pending(b)
    assert why_a is not None and why_b is not None
    assert why_a.blockers and why_a.blockers is why_b.blockers
    # The shared tuple is the record's own blockers, whatever was read in between.
    assert why_pending(a) == why_a
