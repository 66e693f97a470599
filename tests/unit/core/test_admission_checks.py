"""Two-phase admission with AdmissionChecks (docs/scheduling.md#admission-checks)."""

from __future__ import annotations

from typing import Any

from scheduler.core.admission_checks import set_check_state
from tests.unit.core.builders import (
    Cluster,
    flavor,
    local_queue,
    namespace,
    simple_cq,
    workload,
)

KEY = "team-a/wl-1"


def check(name: str, *, active: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": name},
        "spec": {"controllerName": "example.com/ctl"},
        "status": {
            "conditions": [
                {
                    "type": "Active",
                    "status": "True" if active else "False",
                    "reason": "Test",
                    "message": "",
                    "lastTransitionTime": "2024-01-01T00:00:00Z",
                }
            ]
        },
    }


def cluster(*, active: bool = True) -> Cluster:
    c = Cluster()
    c.apply(
        namespace("team-a"),
        flavor("default"),
        check("ac-1", active=active),
        simple_cq("cq-a", 4, admission_checks=["ac-1"]),
        local_queue("team-a", "lq-a", "cq-a"),
        workload("team-a", "wl-1", "lq-a", {"cpu": "1"}),
    )
    return c


def test_quota_is_reserved_first_and_admitted_once_the_check_is_ready() -> None:
    c = cluster()
    c.cycle()
    status = c.status(KEY)
    assert c.cond(KEY, "QuotaReserved")[0] == "True"  # type: ignore[index]
    assert not c.wl(KEY).is_admitted
    assert [(x["name"], x["state"]) for x in status["admissionChecks"]] == [("ac-1", "Pending")]
    set_check_state(c.s, KEY, "ac-1", "Ready")
    assert c.wl(KEY).is_admitted


def test_retry_evicts_resets_to_pending_and_requeues_after_the_delay() -> None:
    c = cluster()
    c.cycle()
    set_check_state(c.s, KEY, "ac-1", "Retry", "no capacity", requeue_after_seconds=60)
    c.s.finalize_evictions()
    evicted = c.cond(KEY, "Evicted")
    assert evicted == (
        "True",
        "AdmissionCheck",
        'Evicted due to AdmissionCheck in Retry state: "ac-1" (no capacity)',
    )
    assert c.admission(KEY) is None
    (state,) = c.status(KEY)["admissionChecks"]
    assert state["state"] == "Pending" and state["retryCount"] == 1
    assert state["message"] == "Reset to Pending after eviction. Previously: Retry"
    assert c.cond(KEY, "Requeued")[:2] == ("False", "AdmissionCheck")  # type: ignore[index]
    blockers = c.wl(KEY).pending_why().blockers  # type: ignore[union-attr]
    assert [(b.kind, b.check, b.state) for b in blockers] == [("AdmissionCheck", "ac-1", "Retry")]
    c.cycle()
    assert c.admission(KEY) is None  # still backing off
    c.advance(61)
    assert c.cond(KEY, "Requeued")[:2] == ("True", "BackoffFinished")  # type: ignore[index]
    c.cycle()
    assert c.admission(KEY) is not None
    set_check_state(c.s, KEY, "ac-1", "Ready")
    assert c.wl(KEY).is_admitted


def test_rejected_deactivates() -> None:
    c = cluster()
    c.cycle()
    set_check_state(c.s, KEY, "ac-1", "Rejected", "never")
    c.s.finalize_evictions()
    assert not c.wl(KEY).active
    assert c.cond(KEY, "Evicted") == (
        "True",
        "DeactivatedDueToAdmissionCheck",
        'The workload is deactivated due to AdmissionCheck in Rejected state: "ac-1" (never)',
    )
    assert c.admission(KEY) is None


def test_an_inactive_check_gates_the_cluster_queue_until_it_turns_active() -> None:
    c = cluster(active=False)
    (cond,) = c.cq_status("cq-a")["conditions"]
    assert (cond["reason"], cond["message"]) == (
        "AdmissionCheckInactive",
        "Can't admit new workloads: references inactive AdmissionCheck(s): ac-1.",
    )
    c.cycle()
    assert c.admission(KEY) is None
    c.apply(check("ac-1", active=True))
    assert c.cq_status("cq-a")["conditions"][0]["reason"] == "Ready"
    c.cycle()
    assert c.admission(KEY) is not None
