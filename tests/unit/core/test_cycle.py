"""The scheduling cycle (docs/scheduling.md#the-scheduling-cycle): order, re-fit, strategies,
nomination checks, the docs/scheduling.md#admission-loop step 2 reservation and partial admission
(docs/scheduling.md#partial-admission, #example-partial-admission)."""

from __future__ import annotations

import pytest

from tests.unit.core.builders import (
    SECOND,
    START,
    Cluster,
    Json,
    admitted_workload,
    basic_cluster,
    cluster_queue,
    flavor,
    group,
    local_queue,
    namespace,
    pod_set,
    simple_cq,
    workload,
)

NS = "team-a"
CPU = "cpu"
FR = ("default", CPU)
NO_LONGER_FITS = "Workload no longer fits after processing another workload"


def cohort_cluster(*cqs: Json) -> Cluster:
    c = Cluster()
    c.apply(namespace(NS), flavor("default"), *cqs)
    for doc in cqs:
        name = doc["metadata"]["name"]
        c.apply(local_queue(NS, f"lq-{name}", name))
    return c


# ----------------------------------------------------- docs/scheduling.md#classic-entry-order order


def test_non_borrowing_entry_goes_before_a_borrowing_one() -> None:
    # Both fit alone; cq-a sorts first by name and wa has the higher priority, but wa
    # borrows (level 1) and wb does not (level 0): wb is admitted, wa no longer fits.
    c = cohort_cluster(
        simple_cq("cq-a", 0, cohort="co"),
        simple_cq("cq-b", 4, cohort="co"),
    )
    c.apply(
        workload(NS, "wa", "lq-cq-a", {CPU: "4"}, priority=10),
        workload(NS, "wb", "lq-cq-b", {CPU: "4"}, created=5),
    )
    stats = c.cycle()
    assert stats.admitted == [f"{NS}/wb"]
    assert c.cond(f"{NS}/wa", "QuotaReserved") == ("False", "Pending", NO_LONGER_FITS)


@pytest.mark.parametrize(
    ("a", "b", "winner"),
    [
        # (priority, created seconds, uid) of wa and wb
        ((0, 0, "uid-2"), (5, 1, "uid-3"), "wb"),  # priority first
        ((5, 1, "uid-3"), (0, 0, "uid-2"), "wa"),
        ((0, 1, "uid-1"), (0, 0, "uid-9"), "wb"),  # then the queue-order timestamp
        ((0, 0, "uid-9"), (0, 1, "uid-1"), "wa"),
        ((0, 0, "uid-2"), (0, 0, "uid-1"), "wb"),  # then the UID (D2)
        ((0, 0, "uid-1"), (0, 0, "uid-2"), "wa"),
    ],
)
def test_entries_at_the_same_level_by_priority_then_timestamp_then_uid(
    a: tuple[int, int, str], b: tuple[int, int, str], winner: str
) -> None:
    c = cohort_cluster(
        simple_cq("cq-a", 0, cohort="co"),
        simple_cq("cq-b", 0, cohort="co"),
        simple_cq("cq-l", 4, cohort="co"),
    )
    c.apply(
        workload(NS, "wa", "lq-cq-a", {CPU: "3"}, priority=a[0], created=a[1], uid=a[2]),
        workload(NS, "wb", "lq-cq-b", {CPU: "3"}, priority=b[0], created=b[1], uid=b[2]),
    )
    stats = c.cycle()
    assert stats.admitted == [f"{NS}/{winner}"]
    loser = "wb" if winner == "wa" else "wa"
    assert c.message(f"{NS}/{loser}") == NO_LONGER_FITS


def test_several_borrowers_are_admitted_in_one_cycle_while_each_fits() -> None:
    c = cohort_cluster(
        simple_cq("cq-a", 0, cohort="co"),
        simple_cq("cq-b", 0, cohort="co"),
        simple_cq("cq-l", 4, cohort="co"),
    )
    c.apply(
        workload(NS, "wa", "lq-cq-a", {CPU: "2"}),
        workload(NS, "wb", "lq-cq-b", {CPU: "2"}),
    )
    assert c.cycle().admitted == [f"{NS}/wa", f"{NS}/wb"]
    assert c.usage("cq-a", FR) + c.usage("cq-b", FR) == 4000


# --------------------------------------------------------- docs/scheduling.md#admission-loop step 4


def test_entry_skipped_by_the_refit_check_is_retried_and_forgets_its_flavor_scan() -> None:
    c = cohort_cluster(
        simple_cq("cq-a", 0, cohort="co"),
        simple_cq("cq-b", 0, cohort="co"),
        simple_cq("cq-l", 4, cohort="co"),
    )
    c.apply(
        workload(NS, "wa", "lq-cq-a", {CPU: "3"}, priority=1),
        workload(NS, "wb", "lq-cq-b", {CPU: "3"}),
    )
    c.cycle()
    wb = c.wl(f"{NS}/wb")
    # discarded on skip (docs/scheduling.md#flavor-scan-resumption)
    assert wb.last_assignment is None
    # Skipped after nomination: FailedAfterNomination, straight back to the heap
    # (docs/scheduling.md#requeue-after-a-cycle).
    queue = c.s.queues.queue("cq-b")
    assert queue is not None and queue.in_heap(f"{NS}/wb")
    assert c.status(f"{NS}/wb")["resourceRequests"] == [{"name": "main", "resources": {CPU: "3"}}]
    c.finish(f"{NS}/wa")
    assert c.cycle().admitted == [f"{NS}/wb"]


# --------------------------------------------------------------------------- strategies


def test_strict_fifo_head_blocks_the_queue() -> None:
    c = basic_cluster(4, strategy="StrictFIFO")
    c.apply(
        workload(NS, "big", "lq-a", {CPU: "5"}, priority=1),
        workload(NS, "small", "lq-a", {CPU: "1"}),
    )
    for _ in range(3):
        stats = c.cycle()
        assert stats.ran and stats.admitted == []
    assert c.pending("cq-a") == [f"{NS}/big", f"{NS}/small"]
    assert c.cond(f"{NS}/small", "QuotaReserved") is None


def test_best_effort_fifo_tries_the_next_workload() -> None:
    c = basic_cluster(4, strategy="BestEffortFIFO")
    c.apply(
        workload(NS, "big", "lq-a", {CPU: "5"}, priority=1),
        workload(NS, "small", "lq-a", {CPU: "1"}),
    )
    assert c.cycle().admitted == []
    queue = c.s.queues.queue("cq-a")
    assert queue is not None and queue.is_parked(f"{NS}/big")
    assert c.cycle().admitted == [f"{NS}/small"]
    # The parked head stays parked until a cluster event: nothing left to pop.
    assert not c.cycle().ran


def test_one_admission_per_cluster_queue_per_cycle() -> None:
    c = basic_cluster(4)
    c.apply(*(workload(NS, f"w{i}", "lq-a", {CPU: "1"}, created=i) for i in range(3)))
    assert [c.cycle().admitted for _ in range(4)] == [
        [f"{NS}/w0"],
        [f"{NS}/w1"],
        [f"{NS}/w2"],
        [],
    ]


def test_pending_condition_keeps_its_transition_time_while_unchanged() -> None:
    c = basic_cluster(4, strategy="StrictFIFO")
    c.apply(workload(NS, "big", "lq-a", {CPU: "5"}))
    c.cycle()
    first = c.condition(f"{NS}/big", "QuotaReserved")
    c.clock.set(START + 60 * SECOND)
    c.cycle()
    assert c.condition(f"{NS}/big", "QuotaReserved") == first


# ------------------------------------------------------ docs/scheduling.md#nomination-checks checks


def test_namespace_mismatch_is_parked_even_under_strict_fifo() -> None:
    c = Cluster()
    c.apply(
        namespace(NS, {"team": "a"}),
        namespace("other"),
        flavor("default"),
        simple_cq("cq-a", 4, strategy="StrictFIFO", selector={"matchLabels": {"team": "a"}}),
        local_queue(NS, "lq-a", "cq-a"),
        local_queue("other", "lq-a", "cq-a"),
        workload("other", "w", "lq-a", {CPU: "1"}),
        workload(NS, "w2", "lq-a", {CPU: "1"}, created=1),
    )
    assert c.cycle().admitted == []
    assert c.cond("other/w", "QuotaReserved") == (
        "False",
        "Pending",
        "Workload namespace doesn't match ClusterQueue selector",
    )
    queue = c.s.queues.queue("cq-a")
    assert queue is not None and queue.is_parked("other/w")
    # The StrictFIFO queue is not blocked by a namespace mismatch.
    assert c.cycle().admitted == [f"{NS}/w2"]
    # A label change that makes the selector match flushes the CQ.
    c.apply(namespace("other", {"team": "a"}))
    assert c.cycle().admitted == ["other/w"]


@pytest.mark.parametrize(("selector", "admitted"), [(None, False), ({}, True)])
def test_unset_namespace_selector_matches_nothing(selector: Json | None, admitted: bool) -> None:
    c = Cluster()
    c.apply(
        namespace(NS),
        flavor("default"),
        simple_cq("cq-a", 4, selector=selector, no_selector=selector is None),
        local_queue(NS, "lq-a", "cq-a"),
        workload(NS, "w", "lq-a", {CPU: "1"}),
    )
    c.cycle()
    assert c.admitted(f"{NS}/w") is admitted


def test_requests_above_limits_fail_nomination() -> None:
    c = basic_cluster(4)
    c.apply(workload(NS, "w", "lq-a", pod_sets=[pod_set({CPU: "2"}, limits={CPU: "1"})]))
    assert c.cycle().admitted == []
    status, reason, message = c.cond(f"{NS}/w", "QuotaReserved") or ("", "", "")
    assert (status, reason) == ("False", "Pending")
    assert message.startswith("resources validation failed: ")
    assert CPU in message.removeprefix("resources validation failed: ")


# --------------------------------------------------------- docs/scheduling.md#admission-loop step 2


def _reservation_cluster(preemption: Json | None = None) -> Cluster:
    """cq-a lends its nominal 6 to cq-b, which uses 4 of it; cq-c is a pure borrower."""
    c = cohort_cluster(
        simple_cq("cq-a", 6, cohort="co", preemption=preemption),
        simple_cq("cq-b", 0, cohort="co"),
        simple_cq("cq-c", 0, cohort="co"),
    )
    c.apply(
        admitted_workload(NS, "hb", "lq-cq-b", "cq-b", {CPU: "4"}),
        # 4 fits cq-a's nominal, but only 2 are unused: Preempt, no candidates.
        workload(NS, "wa", "lq-cq-a", {CPU: "4"}),
        # 2 fits what is left in the cohort, borrowing.
        workload(NS, "wc", "lq-cq-c", {CPU: "2"}),
    )
    return c


def test_preemptor_without_targets_reserves_capacity_for_the_cycle() -> None:
    c = _reservation_cluster()
    assert c.cycle().admitted == []
    assert c.message(f"{NS}/wa") == (
        "couldn't assign flavors to pod set main: "
        "insufficient unused quota for cpu in flavor default, 2 more needed"
    )
    assert c.message(f"{NS}/wc") == NO_LONGER_FITS
    # The reservation lives in the cycle's snapshot only.
    assert c.usage("cq-a", FR) == 0
    assert c.usage("cq-c", FR) == 0


def _own_usage_cluster(preemption: Json | None = None) -> Cluster:
    """cq-a's own workload uses 4 of its 6; nothing in the cohort can be reclaimed."""
    c = cohort_cluster(
        simple_cq("cq-a", 6, cohort="co", preemption=preemption),
        simple_cq("cq-c", 0, cohort="co"),
    )
    c.apply(
        admitted_workload(NS, "ha", "lq-cq-a", "cq-a", {CPU: "4"}),
        workload(NS, "wa", "lq-cq-a", {CPU: "4"}),
        workload(NS, "wc", "lq-cq-c", {CPU: "2"}),
    )
    return c


def test_reservation_also_holds_with_reclaim_lower_priority() -> None:
    c = _own_usage_cluster({"reclaimWithinCohort": "LowerPriority"})
    assert c.cycle().admitted == []
    assert c.message(f"{NS}/wc") == NO_LONGER_FITS


def test_no_reservation_when_reclaim_within_cohort_is_any() -> None:
    c = _own_usage_cluster({"reclaimWithinCohort": "Any"})
    assert c.cycle().admitted == [f"{NS}/wc"]
    assert not c.admitted(f"{NS}/wa")
    assert c.message(f"{NS}/wa") == (
        "couldn't assign flavors to pod set main: "
        "insufficient unused quota for cpu in flavor default, 2 more needed"
    )


def _borrowing_reservation_cluster(wb_request: str) -> Cluster:
    """cq-a (nominal 2, borrowingLimit 1, may preempt while borrowing) holds 1, cq-b holds 2
    of the cohort's 6; wa (cq-a) asks 3: level 1, Preempt without candidates."""
    policy = {
        "reclaimWithinCohort": "LowerPriority",
        "borrowWithinCohort": {"policy": "LowerPriority"},
    }
    c = cohort_cluster(
        simple_cq("cq-a", (2, 1, None), cohort="co", preemption=policy),
        simple_cq("cq-b", 0, cohort="co"),
        simple_cq("cq-l", 4, cohort="co"),
    )
    c.apply(
        admitted_workload(NS, "ha", "lq-cq-a", "cq-a", {CPU: "1"}, priority=100),
        admitted_workload(NS, "hb", "lq-cq-b", "cq-b", {CPU: "2"}, priority=100),
        workload(NS, "wa", "lq-cq-a", {CPU: "3"}, priority=10),
        workload(NS, "wb", "lq-cq-b", {CPU: wb_request}),
    )
    return c


def test_borrowing_reservation_is_capped_by_the_borrowing_limit() -> None:
    # Reserved: min(3, N + BL - u) = min(3, 2 + 1 - 1) = 2 of the 3 left in the cohort,
    # so a 1-cpu borrower of cq-b still fits in the same cycle.
    c = _borrowing_reservation_cluster("1")
    assert c.cycle().admitted == [f"{NS}/wb"]
    assert not c.admitted(f"{NS}/wa")


def test_borrowing_reservation_blocks_a_larger_borrower() -> None:
    c = _borrowing_reservation_cluster("2")
    assert c.cycle().admitted == []
    assert c.message(f"{NS}/wb") == NO_LONGER_FITS


# ------------------------------------------------------------- docs/scheduling.md#partial-admission


def test_partial_admission_appendix_b4() -> None:
    c = basic_cluster(13)
    c.apply(workload(NS, "w", "lq-a", {CPU: "2"}, count=10, min_count=4))
    c.cycle()
    adm = c.admission(f"{NS}/w")
    assert adm is not None
    assert adm["podSetAssignments"] == [
        {"name": "main", "flavors": {CPU: "default"}, "resourceUsage": {CPU: "12"}, "count": 6}
    ]
    assert c.cq_status("cq-a")["flavorsUsage"][0]["resources"][0]["total"] == "12"


def test_partial_admission_reduces_only_the_pod_set_with_min_count() -> None:
    # D = 8; the search finds k = 4: "b" gets 10 - floor(8 * 4 / 8) = 6 pods.
    c = basic_cluster(10)
    c.apply(
        workload(
            NS,
            "w",
            "lq-a",
            pod_sets=[
                pod_set({CPU: "1"}, name="a", count=4),
                pod_set({CPU: "1"}, name="b", count=10, min_count=2),
            ],
        )
    )
    c.cycle()
    adm = c.admission(f"{NS}/w")
    assert adm is not None
    assert [(p["name"], p["count"], p["resourceUsage"]) for p in adm["podSetAssignments"]] == [
        ("a", 4, {CPU: "4"}),
        ("b", 6, {CPU: "6"}),
    ]


def test_partial_admission_scales_the_pods_resource() -> None:
    c = Cluster()
    c.apply(
        namespace(NS),
        flavor("default"),
        cluster_queue("cq-a", [group([CPU, "pods"], {"default": {CPU: 100, "pods": 5}})]),
        local_queue(NS, "lq-a", "cq-a"),
        workload(NS, "w", "lq-a", {CPU: "1"}, count=8, min_count=2),
    )
    c.cycle()
    adm = c.admission(f"{NS}/w")
    assert adm is not None
    assert adm["podSetAssignments"][0]["count"] == 5
    assert adm["podSetAssignments"][0]["resourceUsage"] == {CPU: "5", "pods": "5"}


def test_partial_admission_that_finds_nothing_keeps_the_full_assignment() -> None:
    c = basic_cluster(5)
    c.apply(workload(NS, "w", "lq-a", {CPU: "1"}, count=10, min_count=8))
    c.cycle()
    assert not c.admitted(f"{NS}/w")
    assert c.message(f"{NS}/w") == (
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor "
        "default, previously considered podsets requests (0) + current podset request (10) "
        "> maximum capacity (5)"
    )
    assert c.status(f"{NS}/w")["resourceRequests"] == [{"name": "main", "resources": {CPU: "10"}}]
