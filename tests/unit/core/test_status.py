"""Status rendering (docs/scheduling.md#workload-status, #clusterqueue-status, #localqueue-status,
#condition-messages)."""

from __future__ import annotations

import pytest

from scheduler.core.conditions import Conditions
from tests.unit.core.builders import (
    SECOND,
    START,
    Cluster,
    Json,
    admitted_workload,
    basic_cluster,
    cluster_queue,
    cohort,
    flavor,
    group,
    local_queue,
    namespace,
    pod_set,
    rfc3339,
    simple_cq,
    workload,
)

NS = "team-a"
CPU = "cpu"
MEM = "memory"
GPU = "example.com/gpu"
TAINT = {"key": "gpu", "value": "true", "effect": "NoSchedule"}


def t(seconds: int) -> str:
    return rfc3339(START + seconds * SECOND)[:19] + "Z"


def active(status: Json) -> tuple[str, str, str]:
    [cond] = status["conditions"]
    assert cond["type"] == "Active"
    return cond["status"], cond["reason"], cond["message"]


def res(name: str, total: str, borrowed: str | None = None) -> Json:
    out: Json = {"name": name, "total": total}
    if borrowed is not None:
        out["borrowed"] = borrowed
    return out


# ----------------------------------------------------------- docs/scheduling.md#clusterqueue-status


def _two_group_cluster() -> Cluster:
    c = Cluster()
    c.apply(
        namespace(NS),
        flavor("f0"),
        flavor("f1", labels={"zone": "b"}, taints=[TAINT]),
        flavor("g0"),
        cluster_queue(
            "cq-a",
            [
                # covered resources deliberately not sorted
                group([MEM, CPU], {"f0": {MEM: "8Gi", CPU: 4}, "f1": {MEM: "8Gi", CPU: 4}}),
                group([GPU], {"g0": {GPU: 2}}),
            ],
            cohort="co",
        ),
        simple_cq("cq-l", 10, cohort="co", flavor_name="f0"),
        local_queue(NS, "lq-a", "cq-a"),
        local_queue(NS, "lq-b", "cq-a"),
        workload(NS, "w1", "lq-a", {CPU: "6", MEM: "512Mi"}),
        workload(NS, "w2", "lq-b", {GPU: "1", CPU: "1500m"}, created=1),
        workload(NS, "w3", "lq-b", {GPU: "5"}, created=2),
    )
    c.cycles(3)
    assert c.admitted_keys() == [f"{NS}/w1", f"{NS}/w2"]
    return c


def test_cluster_queue_counts_and_flavor_usage() -> None:
    c = _two_group_cluster()
    status = c.cq_status("cq-a")
    assert status["pendingWorkloads"] == 1
    assert status["reservingWorkloads"] == 2
    assert status["admittedWorkloads"] == 2
    # every flavor of every group, group order then flavor spec order, resources by name
    expected = [
        {"name": "f0", "resources": [res(CPU, "7500m", "3500m"), res(MEM, "512Mi", "0")]},
        {"name": "f1", "resources": [res(CPU, "0", "0"), res(MEM, "0", "0")]},
        {"name": "g0", "resources": [res(GPU, "1", "0")]},
    ]
    assert status["flavorsReservation"] == expected
    assert status["flavorsUsage"] == expected
    assert active(status) == ("True", "Ready", "Can admit new workloads")


def test_local_queue_counts_flavor_usage_and_flavors() -> None:
    c = _two_group_cluster()
    a = c.lq_status(f"{NS}/lq-a")
    b = c.lq_status(f"{NS}/lq-b")
    assert (a["pendingWorkloads"], a["reservingWorkloads"], a["admittedWorkloads"]) == (0, 1, 1)
    assert (b["pendingWorkloads"], b["reservingWorkloads"], b["admittedWorkloads"]) == (1, 1, 1)
    assert a["flavorsReservation"] == [
        {"name": "f0", "resources": [res(CPU, "6"), res(MEM, "512Mi")]},
        {"name": "f1", "resources": [res(CPU, "0"), res(MEM, "0")]},
        {"name": "g0", "resources": [res(GPU, "0")]},
    ]
    assert b["flavorUsage"] == [
        {"name": "f0", "resources": [res(CPU, "1500m"), res(MEM, "0")]},
        {"name": "f1", "resources": [res(CPU, "0"), res(MEM, "0")]},
        {"name": "g0", "resources": [res(GPU, "1")]},
    ]
    assert a["flavors"] == [
        {"name": "f0", "resources": [CPU, MEM]},
        {"name": "f1", "resources": [CPU, MEM], "nodeLabels": {"zone": "b"}, "nodeTaints": [TAINT]},
        {"name": "g0", "resources": [GPU]},
    ]
    assert active(a) == ("True", "Ready", "Can submit new workloads to localQueue")


def test_borrowed_is_zero_without_a_cohort() -> None:
    c = basic_cluster(2)
    c.apply(admitted_workload(NS, "big", "lq-a", "cq-a", {CPU: "3"}))
    status = c.cq_status("cq-a")
    assert status["flavorsReservation"] == [{"name": "default", "resources": [res(CPU, "3", "0")]}]


def test_reservation_versus_usage() -> None:
    # A workload holding quota without Admitted=True counts in flavorsReservation only.
    c = basic_cluster(4)
    doc = admitted_workload(NS, "reserved", "lq-a", "cq-a", {CPU: "1"})
    doc["status"]["conditions"] = doc["status"]["conditions"][:1]  # QuotaReserved only
    c.apply(doc, admitted_workload(NS, "running", "lq-a", "cq-a", {CPU: "2"}))
    status = c.cq_status("cq-a")
    assert (status["reservingWorkloads"], status["admittedWorkloads"]) == (2, 1)
    assert status["flavorsReservation"][0]["resources"] == [res(CPU, "3", "0")]
    assert status["flavorsUsage"][0]["resources"] == [res(CPU, "2", "0")]
    lq = c.lq_status(f"{NS}/lq-a")
    assert (lq["reservingWorkloads"], lq["admittedWorkloads"]) == (2, 1)


@pytest.mark.parametrize(
    ("count", "usage", "reclaimable", "expected", "milli"),
    [(4, "4", 1, "3", 3000), (3, "1500m", 2, "500m", 500)],
)
def test_reclaimable_pods_reduce_usage(
    count: int, usage: str, reclaimable: int, expected: str, milli: int
) -> None:
    # usage / admitted count x remaining count (docs/scheduling.md#quantities)
    c = basic_cluster(8)
    doc = admitted_workload(
        NS, "w", "lq-a", "cq-a", {CPU: usage}, count=count, per_pod={CPU: "100m"}
    )
    doc["status"]["reclaimablePods"] = [{"name": "main", "count": reclaimable}]
    c.apply(doc)
    assert c.cq_status("cq-a")["flavorsReservation"][0]["resources"] == [res(CPU, expected, "0")]
    assert c.usage("cq-a", ("default", CPU)) == milli


# --------------------------------------------------------------------------- conditions


@pytest.mark.parametrize(
    ("cq", "reason", "message"),
    [
        (
            simple_cq("cq-a", 4, stop_policy="Hold"),
            "Stopped",
            "Can't admit new workloads: is stopped.",
        ),
        (
            cluster_queue(
                "cq-a", [group([CPU], {"f2": {CPU: 1}, "default": {CPU: 1}, "f0": {CPU: 1}})]
            ),
            "FlavorNotFound",
            "Can't admit new workloads: references missing ResourceFlavor(s): f2,f0.",
        ),
        (
            simple_cq("cq-a", 4, admission_checks=["ac-1"]),
            "AdmissionCheckNotFound",
            "Can't admit new workloads: references missing AdmissionCheck(s): ac-1.",
        ),
        (
            cluster_queue(
                "cq-a",
                [group([CPU], {"fx": {CPU: 1}})],
                stop_policy="HoldAndDrain",
                admission_checks=["ac-1"],
            ),
            "Stopped",
            "Can't admit new workloads: is stopped, references missing ResourceFlavor(s): fx, "
            "references missing AdmissionCheck(s): ac-1.",
        ),
    ],
)
def test_cluster_queue_inactive_conditions(cq: Json, reason: str, message: str) -> None:
    c = Cluster()
    c.apply(namespace(NS), flavor("default"), cq, local_queue(NS, "lq-a", "cq-a"))
    assert active(c.cq_status("cq-a")) == ("False", reason, message)
    assert active(c.lq_status(f"{NS}/lq-a")) == (
        "False",
        "ClusterQueueIsInactive",
        "Can't submit new workloads to clusterQueue",
    )


def test_cluster_queue_in_a_cohort_cycle_is_inactive() -> None:
    c = Cluster()
    c.apply(
        namespace(NS),
        flavor("default"),
        cohort("a", "b"),
        cohort("b", "a"),
        simple_cq("cq-a", 4, cohort="a"),
        local_queue(NS, "lq-a", "cq-a"),
        workload(NS, "w", "lq-a", {CPU: "1"}),
    )
    assert active(c.cq_status("cq-a")) == (
        "False",
        "CohortCycleDetected",
        "Can't admit new workloads: is in a cohort tree that contains a cycle.",
    )
    assert not c.cycle().ran
    c.apply(cohort("b"))  # cycle broken
    assert active(c.cq_status("cq-a"))[0] == "True"
    assert c.cycle().admitted == [f"{NS}/w"]


def test_deleted_cluster_queue_holding_workloads_is_terminating() -> None:
    c = basic_cluster(2)
    c.apply(workload(NS, "w1", "lq-a", {CPU: "2"}), workload(NS, "w2", "lq-a", {CPU: "1"}))
    c.cycle()
    c.delete("ClusterQueue", None, "cq-a")
    status = c.cq_status("cq-a")
    assert active(status) == (
        "False",
        "Terminating",
        "Can't admit new workloads; clusterQueue is terminating",
    )
    assert status["reservingWorkloads"] == 1
    assert not c.cycle().admitted


def test_local_queue_conditions() -> None:
    c = basic_cluster(4)
    c.apply(
        local_queue(NS, "lq-stopped", "cq-a", stop_policy="Hold"),
        local_queue(NS, "lq-ghost", "cq-ghost"),
    )
    assert active(c.lq_status(f"{NS}/lq-stopped")) == ("False", "Stopped", "LocalQueue is stopped")
    ghost = c.lq_status(f"{NS}/lq-ghost")
    assert active(ghost) == (
        "False",
        "ClusterQueueDoesNotExist",
        "Can't submit new workloads to clusterQueue",
    )
    assert "flavorsReservation" not in ghost


def test_condition_transition_time_moves_only_on_change() -> None:
    c = basic_cluster(4)
    assert c.cq_status("cq-a")["conditions"][0]["lastTransitionTime"] == t(0)
    c.clock.set(START + 60 * SECOND)
    c.apply(simple_cq("cq-a", 5))  # still Ready
    assert c.cq_status("cq-a")["conditions"][0]["lastTransitionTime"] == t(0)
    c.clock.set(START + 120 * SECOND)
    c.apply(simple_cq("cq-a", 5, stop_policy="Hold"))
    assert c.cq_status("cq-a")["conditions"][0]["lastTransitionTime"] == t(120)
    assert c.lq_status(f"{NS}/lq-a")["conditions"][0]["lastTransitionTime"] == t(120)


# --------------------------------------------------------------- docs/scheduling.md#workload-status


def test_workload_status_rendering() -> None:
    c = basic_cluster(4)
    c.apply(
        workload(
            NS,
            "w",
            "lq-a",
            pod_sets=[
                pod_set({CPU: "500m"}, name="driver"),
                pod_set({CPU: "250m"}, name="workers", count=4),
            ],
        )
    )
    c.clock.set(START + 5 * SECOND)
    c.cycle()
    status = c.status(f"{NS}/w")
    assert status == {
        "admission": {
            "clusterQueue": "cq-a",
            "podSetAssignments": [
                {
                    "name": "driver",
                    "flavors": {CPU: "default"},
                    "resourceUsage": {CPU: "500m"},
                    "count": 1,
                },
                {
                    "name": "workers",
                    "flavors": {CPU: "default"},
                    "resourceUsage": {CPU: "1"},
                    "count": 4,
                },
            ],
        },
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "True",
                "lastTransitionTime": t(5),
                "reason": "QuotaReserved",
                "message": "Quota reserved in ClusterQueue cq-a",
            },
            {
                "type": "Admitted",
                "status": "True",
                "lastTransitionTime": t(5),
                "reason": "Admitted",
                "message": "The workload is admitted",
            },
        ],
    }


def test_pending_workload_status_has_resource_requests() -> None:
    c = basic_cluster(1)
    c.apply(workload(NS, "w", "lq-a", {CPU: "1", MEM: "1Gi"}, count=2))
    c.cycle()
    status = c.status(f"{NS}/w")
    assert "admission" not in status
    assert status["resourceRequests"] == [{"name": "main", "resources": {CPU: "2", MEM: "2Gi"}}]
    [cond] = status["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("QuotaReserved", "False", "Pending")


def test_previously_prefix_is_added_once() -> None:
    c = basic_cluster(2)
    c.apply(workload(NS, "w", "lq-a", {CPU: "1"}))
    for _ in range(2):
        c.cycle()
        c.set_active(f"{NS}/w", False)
        c.set_active(f"{NS}/w", True)
    c.cycle()
    assert c.cond(f"{NS}/w", "Evicted") == (
        "False",
        "QuotaReserved",
        "Previously: The workload is deactivated",
    )


def test_condition_messages_are_truncated_by_bytes_not_characters() -> None:
    conditions = Conditions()
    four_bytes = "\U0001f600"
    conditions.set("QuotaReserved", "False", "Pending", four_bytes * 8192, 0)  # 32768 bytes
    cond = conditions.get("QuotaReserved")
    assert cond is not None and cond.message == four_bytes * 8192
    conditions.set("QuotaReserved", "False", "Pending", four_bytes * 8193, 0)
    assert cond.message == four_bytes * 8191 + " ..."
    short = "x" * (32768 // 4)
    conditions.set("QuotaReserved", "False", "Pending", short, 0)
    assert cond.message is short


def test_condition_messages_are_truncated() -> None:
    conditions = Conditions()
    conditions.set("QuotaReserved", "False", "Pending", "x" * 40000, 0)
    cond = conditions.get("QuotaReserved")
    assert cond is not None
    assert cond.message == "x" * 32764 + " ..."
    conditions.set("QuotaReserved", "False", "Pending", "y" * 32768, 0)
    cond = conditions.get("QuotaReserved")
    assert cond is not None
    assert cond.message == "y" * 32768
