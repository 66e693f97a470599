"""What the pendingposition lookup says of a Workload that holds quota and waits for its
admission checks (docs/visibility-api.md#pending-position): not pending, `QuotaReserved`,
and a `whyPending` naming each check not Ready with its state."""

from __future__ import annotations

from scheduler.core.admission_checks import set_check_state
from scheduler.runtime.standing import standing
from scheduler.runtime.workload_records import NotPending, NotPendingReason
from tests.unit.core.test_admission_checks import KEY, cluster
from visibility_server.http.position import not_pending_position


def answer(state: NotPending) -> dict[str, object]:
    return not_pending_position("visibility.kueue.x-k8s.io/v1beta2", "team-a", "wl-1", state)


def test_a_reserved_workload_names_the_checks_it_waits_for_and_their_states() -> None:
    c = cluster()
    c.cycle()
    found = standing(c.s, "team-a", "wl-1")
    assert found is not None and found.reason == NotPendingReason.QUOTA_RESERVED
    assert found.why is not None
    body = answer(
        NotPending(
            NotPendingReason(found.reason),
            creation=found.creation,
            cluster_queue=found.cluster_queue,
            local_queue=found.local_queue,
            why=found.why,
        )
    )
    assert body["pending"] is False and body["reason"] == "QuotaReserved"
    assert body["message"] == "Waiting for admission checks: ac-1 (Pending)"
    why = body["whyPending"]
    assert isinstance(why, dict)
    assert why["reason"] == "UnsatisfiedChecks"
    assert why["blockers"] == [
        {
            "kind": "AdmissionCheck",
            "check": "ac-1",
            "state": "Pending",
            "message": "waiting for admission check ac-1 (Pending)",
        }
    ]


def test_an_admitted_workload_waits_for_nothing() -> None:
    c = cluster()
    c.cycle()
    set_check_state(c.s, KEY, "ac-1", "Ready")
    found = standing(c.s, "team-a", "wl-1")
    assert found is not None and found.reason == NotPendingReason.QUOTA_RESERVED
    assert found.why is None
    body = answer(NotPending(NotPendingReason(found.reason), why=found.why))
    assert "whyPending" not in body and "message" not in body
