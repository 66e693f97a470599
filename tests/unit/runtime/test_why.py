"""Why pending: the blockers of the core's QuotaReserved=False messages."""

from __future__ import annotations

from datetime import UTC, datetime

from scheduler.core.clock import ManualClock, instant_from_datetime
from scheduler.core.cycle import run_cycle
from scheduler.core.scheduler import Scheduler
from scheduler.runtime.capture import EntryCache, capture_quota, capture_snapshot
from scheduler.runtime.snapshot import Blocker
from scheduler.runtime.why import blockers
from tests.unit.runtime.support import (
    cluster,
    cluster_queue,
    flavor,
    local_queue,
    namespace,
    workload,
)

START = instant_from_datetime(datetime(2026, 1, 1, tzinfo=UTC))


def test_quota_shortfall_names_flavor_resource_and_amount() -> None:
    message = (
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in "
        "flavor on-demand, 2500m more needed, insufficient unused quota for memory in "
        "flavor spot, 1Gi more needed"
    )
    assert blockers(message) == (
        Blocker(
            "Quota",
            "insufficient unused quota for cpu in flavor on-demand, 2500m more needed",
            "on-demand",
            "cpu",
            "2500m",
        ),
        Blocker(
            "Quota",
            "insufficient unused quota for memory in flavor spot, 1Gi more needed",
            "spot",
            "memory",
            "1Gi",
        ),
    )


def test_capacity_taint_affinity_and_missing_flavor() -> None:
    message = (
        "couldn't assign flavors to pod set main: flavor gone not found, "
        "flavor arm doesn't match node affinity, untolerated taint "
        "{gpu=true:NoSchedule} in flavor a100, insufficient quota for cpu in flavor x86, "
        "previously considered podsets requests (0) + current podset request (64) > "
        "maximum capacity (32); couldn't assign flavors to pod set side: insufficient "
        "unused quota for cpu in flavor x86, 1 more needed"
    )
    found = blockers(message)
    assert [(b.kind, b.flavor, b.resource, b.amount) for b in found] == [
        ("FlavorNotFound", "gone", "", ""),
        ("NodeAffinity", "arm", "", ""),
        ("Taint", "a100", "", ""),
        ("Capacity", "x86", "cpu", "32"),
        ("Quota", "x86", "cpu", "1"),
    ]


def test_policies_and_preemption() -> None:
    assert blockers("ClusterQueue cq is inactive") == (
        Blocker("Policy", "ClusterQueue cq is inactive"),
    )
    assert [b.kind for b in blockers("Workload namespace doesn't match ClusterQueue selector")] == [
        "Policy"
    ]
    waiting = "waiting for all admitted workloads to be in PodsReady condition"
    assert blockers(waiting) == (Blocker("Policy", waiting),)
    preempting = (
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in "
        "flavor default, 1 more needed. Pending the preemption of 2 workload(s)"
    )
    assert [(b.kind, b.message) for b in blockers(preempting)] == [
        ("Quota", "insufficient unused quota for cpu in flavor default, 1 more needed"),
        ("Preemption", "Pending the preemption of 2 workload(s)"),
    ]
    assert blockers("") == ()
    assert blockers("something new") == (Blocker("Other", "something new"),)


def test_entries_carry_the_condition_of_a_real_cycle() -> None:
    s = Scheduler(ManualClock(START))
    cluster(
        s,
        namespace("team"),
        flavor(),
        cluster_queue("cq", "1"),
        local_queue("team", "main", "cq"),
        workload("team", "small", "main", "1"),
        workload("team", "big", "main", "2"),
    )
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
