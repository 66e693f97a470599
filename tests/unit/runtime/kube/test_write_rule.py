"""Which Workload status differences are written (docs/operations.md, "Workload status
writes"): decisions always; a pending condition only when it is news to a reader and
the workload is near the head of its queue."""

from __future__ import annotations

from typing import Any

from scheduler.runtime.kube.write_rule import judge, mask_quantities

WINDOW = 10


def pending(message: str, reason: str = "Pending", when: str = "2026-01-01T00:00:00Z") -> Any:
    return {
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "False",
                "lastTransitionTime": when,
                "reason": reason,
                "message": message,
            }
        ],
        "resourceRequests": [{"name": "main", "resources": {"cpu": "1"}}],
    }


NEEDED = (
    "couldn't assign flavors to pod set main: "
    "insufficient unused quota for cpu in flavor f-1, 3 more needed"
)


def test_nothing_to_write_when_equal_after_normalizing() -> None:
    v = judge(pending(NEEDED), {**pending(NEEDED), "admission": None}, 0, WINDOW)
    assert not v.write and not v.deferred


def test_first_pending_condition_is_written_near_the_head_only() -> None:
    assert judge(pending(NEEDED), {}, 0, WINDOW).write
    assert judge(pending(NEEDED), None, WINDOW - 1, WINDOW).write
    beyond = judge(pending(NEEDED), {}, WINDOW, WINDOW)
    assert (beyond.write, beyond.pending_only, beyond.deferred) == (False, True, True)
    # Not in any queue (inadmissible): always written, nothing else tells the user.
    assert judge(pending("LocalQueue main doesn't exist", "Inadmissible"), {}, None, WINDOW).write


def test_the_same_content_with_another_time_is_not_rewritten() -> None:
    later = pending(NEEDED, when="2026-02-02T00:00:00Z")
    v = judge(later, pending(NEEDED), 0, WINDOW)
    assert (v.write, v.pending_only, v.deferred) == (False, True, False)


def test_quantities_alone_are_not_news_but_reason_resource_and_flavor_are() -> None:
    assert not judge(pending(NEEDED.replace("3 more", "5 more")), pending(NEEDED), 0, WINDOW).write
    assert judge(pending(NEEDED.replace("f-1", "f-2")), pending(NEEDED), 0, WINDOW).write
    assert judge(pending(NEEDED.replace("cpu", "memory")), pending(NEEDED), 0, WINDOW).write
    assert judge(pending(NEEDED, reason="Inadmissible"), pending(NEEDED), 0, WINDOW).write
    assert mask_quantities("request (1) > maximum capacity (0.5) 500m v1 a-2") == (
        "request (#) > maximum capacity (#) # v1 a-2"
    )


def test_changed_resource_requests_are_news() -> None:
    other = pending(NEEDED)
    other["resourceRequests"] = [{"name": "main", "resources": {"cpu": "2"}}]
    assert judge(other, pending(NEEDED), 0, WINDOW).write


def test_decisions_are_written_whatever_the_position() -> None:
    admitted = {
        "admission": {"clusterQueue": "cq"},
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"}],
    }
    v = judge(admitted, pending(NEEDED), 10_000, WINDOW)
    assert (v.write, v.pending_only) == (True, False)
    evicted = pending(NEEDED)
    evicted["conditions"].append({"type": "Evicted", "status": "True", "reason": "Preempted"})
    assert judge(evicted, pending(NEEDED), 10_000, WINDOW).write
    # Losing a reservation: the server still says QuotaReserved=True.
    assert judge(pending(NEEDED), admitted, 10_000, WINDOW).write


def test_a_core_that_says_less_than_the_server_erases_nothing() -> None:
    # A new leader rebuilt from the server: its cycles have not reached the workload
    # yet, so it has the condition (from the server) but no resourceRequests.
    bare = pending(NEEDED)
    del bare["resourceRequests"]
    assert not judge(bare, pending(NEEDED), 0, WINDOW).write
    assert not judge({}, pending(NEEDED), 0, WINDOW).write
