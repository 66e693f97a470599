"""Which checks apply and how their states combine (docs/scheduling.md#admission-checks):
`admissionChecksStrategy` with `onFlavors`, the v1beta1 list, several checks, a check
leaving Ready, a state set before the reservation, and the merge of the states a
controller wrote with the core's own."""

from __future__ import annotations

from typing import Any

from scheduler.core.admission_checks import (
    applying_checks,
    checks_message,
    merge_controller_states,
    set_check_state,
)
from scheduler.core.workload import CheckStatus
from tests.unit.core.builders import (
    Cluster,
    cluster_queue,
    flavor,
    group,
    local_queue,
    namespace,
    workload,
)
from tests.unit.core.test_admission_checks import check

V1BETA2 = "kueue.x-k8s.io/v1beta2"


def strategy_queue(rules: list[dict[str, Any]], spot_cpu: int = 2) -> dict[str, Any]:
    """cq-a: cpu from `spot` first, then `on-demand`; the checks of `rules`."""
    cq = cluster_queue(
        "cq-a", [group(["cpu"], {"spot": {"cpu": spot_cpu}, "on-demand": {"cpu": 4}})]
    )
    cq["apiVersion"] = V1BETA2
    cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": rules}
    return cq


def cluster_with(cq: dict[str, Any], *checks: str) -> Cluster:
    c = Cluster()
    c.apply(
        namespace("team-a"),
        flavor("spot"),
        flavor("on-demand"),
        *(check(name) for name in checks),
        cq,
        local_queue("team-a", "lq-a", "cq-a"),
    )
    return c


def listed(c: Cluster, key: str) -> list[tuple[str, str]]:
    return [(x["name"], x["state"]) for x in c.status(key).get("admissionChecks", [])]


def test_on_flavors_limits_a_check_to_the_flavors_it_names() -> None:
    c = cluster_with(
        strategy_queue([{"name": "ac-spot", "onFlavors": ["spot"]}, {"name": "ac-all"}]),
        "ac-spot",
        "ac-all",
    )
    c.apply(workload("team-a", "on-spot", "lq-a", {"cpu": "2"}, created=0))
    c.apply(workload("team-a", "on-demand", "lq-a", {"cpu": "2"}, created=1))
    c.run_until_idle()
    assert c.flavors_of("team-a/on-spot") == [{"cpu": "spot"}]
    assert listed(c, "team-a/on-spot") == [("ac-all", "Pending"), ("ac-spot", "Pending")]
    # spot is full: on-demand is assigned, and the spot-only check does not apply.
    assert c.flavors_of("team-a/on-demand") == [{"cpu": "on-demand"}]
    assert listed(c, "team-a/on-demand") == [("ac-all", "Pending")]
    set_check_state(c.s, "team-a/on-demand", "ac-all", "Ready")
    assert c.wl("team-a/on-demand").is_admitted
    set_check_state(c.s, "team-a/on-spot", "ac-all", "Ready")
    assert not c.wl("team-a/on-spot").is_admitted  # ac-spot is still Pending
    set_check_state(c.s, "team-a/on-spot", "ac-spot", "Ready")
    assert c.wl("team-a/on-spot").is_admitted


def test_a_workload_no_check_applies_to_is_admitted_in_the_reservation() -> None:
    c = cluster_with(
        strategy_queue([{"name": "ac-spot", "onFlavors": ["spot"]}], spot_cpu=0), "ac-spot"
    )
    c.apply(workload("team-a", "plain", "lq-a", {"cpu": "1"}))
    c.cycle()
    assert c.flavors_of("team-a/plain") == [{"cpu": "on-demand"}]
    assert c.wl("team-a/plain").is_admitted
    assert listed(c, "team-a/plain") == []


def test_the_v1beta1_list_applies_every_check_to_every_flavor() -> None:
    c = cluster_with(
        cluster_queue(
            "cq-a",
            [group(["cpu"], {"spot": {"cpu": 2}, "on-demand": {"cpu": 4}})],
            admission_checks=["ac-b", "ac-a"],
        ),
        "ac-a",
        "ac-b",
    )
    info = c.s.objects.cluster_queues["cq-a"]
    assert info.admission_checks == ("ac-b", "ac-a")
    c.apply(workload("team-a", "w", "lq-a", {"cpu": "3"}))
    c.cycle()
    assert c.flavors_of("team-a/w") == [{"cpu": "on-demand"}]
    wl = c.wl("team-a/w")
    assert wl.admission is not None
    assert applying_checks(info, wl.admission) == ["ac-a", "ac-b"]  # sorted by name
    assert listed(c, "team-a/w") == [("ac-a", "Pending"), ("ac-b", "Pending")]


def test_a_check_leaving_ready_takes_the_admission_back() -> None:
    c = cluster_with(strategy_queue([{"name": "ac-1"}]), "ac-1")
    c.apply(workload("team-a", "w", "lq-a", {"cpu": "1"}))
    c.cycle()
    set_check_state(c.s, "team-a/w", "ac-1", "Ready")
    assert c.wl("team-a/w").is_admitted
    c.advance(30)
    set_check_state(c.s, "team-a/w", "ac-1", "Pending", "capacity lost")
    wl = c.wl("team-a/w")
    assert not wl.is_admitted and wl.holds_quota  # the reservation stays
    assert c.cond("team-a/w", "Admitted") == (
        "False",
        "UnsatisfiedChecks",
        "The workload has not all checks ready",
    )
    assert wl.accumulated_execution_seconds == 30


def test_a_state_set_before_the_reservation_is_kept_by_it() -> None:
    c = cluster_with(strategy_queue([{"name": "ac-1"}]), "ac-1")
    c.apply(workload("team-a", "w", "lq-a", {"cpu": "1"}))
    assert set_check_state(c.s, "team-a/w", "ac-1", "Ready")
    assert not c.wl("team-a/w").holds_quota
    c.cycle()
    assert c.wl("team-a/w").is_admitted  # reserved and admitted in the same cycle
    assert not set_check_state(c.s, "team-a/missing", "ac-1", "Ready")


def test_several_checks_in_retry_are_named_together() -> None:
    c = cluster_with(strategy_queue([{"name": "ac-a"}, {"name": "ac-b"}]), "ac-a", "ac-b")
    c.apply(workload("team-a", "w", "lq-a", {"cpu": "1"}))
    c.cycle()
    wl = c.wl("team-a/w")
    wl.admission_checks = tuple(
        CheckStatus(name=x.name, state="Retry", last_transition=x.last_transition, message="m")
        if x.name == "ac-a"
        else CheckStatus(name=x.name, state="Retry", last_transition=x.last_transition)
        for x in wl.admission_checks
    )
    assert (
        checks_message(wl.admission_checks, "Retry")
        == 'AdmissionChecks in Retry state: "ac-a" (m); "ac-b"'
    )
    set_check_state(c.s, "team-a/w", "ac-b", "Retry")
    c.s.finalize_evictions()
    assert c.cond("team-a/w", "Evicted") == (
        "True",
        "AdmissionCheck",
        'Evicted due to AdmissionChecks in Retry state: "ac-a" (m); "ac-b"',
    )
    assert [(x["state"], x.get("retryCount")) for x in c.status("team-a/w")["admissionChecks"]] == [
        ("Pending", 1),
        ("Pending", 1),
    ]


# -- merging what a controller wrote ----------------------------------------------------


def entry(name: str, state: str, retries: int | None = None, at: int = 0) -> CheckStatus:
    return CheckStatus(name=name, state=state, last_transition=at, retry_count=retries)


def test_the_controllers_state_replaces_the_cores_for_a_listed_check() -> None:
    ours = (entry("a", "Pending"), entry("b", "Pending"))
    merged = merge_controller_states(ours, [entry("b", "Ready", at=5)])
    assert merged == (entry("a", "Pending"), entry("b", "Ready", at=5))


def test_a_check_the_core_does_not_list_is_not_taken() -> None:
    ours = (entry("a", "Pending"),)
    assert merge_controller_states(ours, [entry("z", "Ready")]) == ours
    assert merge_controller_states((), [entry("z", "Ready")]) == ()


def test_a_state_older_than_the_cores_reset_is_ignored() -> None:
    ours = (entry("a", "Pending", retries=2),)
    # The server still holds the Retry that caused the reset (one retry fewer).
    assert merge_controller_states(ours, [entry("a", "Retry", retries=1)]) == ours
    assert merge_controller_states(ours, [entry("a", "Retry")]) == ours
    # The same count or more: written after the server saw the reset.
    newer = entry("a", "Ready", retries=2, at=9)
    assert merge_controller_states(ours, [newer]) == (newer,)


# -- the ClusterQueue's checks change under a reservation -------------------------------


def test_a_workload_waiting_on_a_check_the_queue_drops_is_admitted() -> None:
    c = cluster_with(strategy_queue([{"name": "ac-a"}, {"name": "ac-b"}]), "ac-a", "ac-b")
    c.apply(workload("team-a", "w", "lq-a", {"cpu": "1"}))
    c.cycle()
    set_check_state(c.s, "team-a/w", "ac-a", "Ready")
    assert not c.wl("team-a/w").is_admitted
    revision = c.wl("team-a/w").revision
    c.apply(strategy_queue([{"name": "ac-a"}]))  # ac-b is no longer named
    wl = c.wl("team-a/w")
    assert listed(c, "team-a/w") == [("ac-a", "Ready")]
    assert wl.is_admitted and wl.revision > revision
    # Every check dropped: nothing left to wait for either.
    c.apply(strategy_queue([]))
    assert listed(c, "team-a/w") == []
    assert c.wl("team-a/w").is_admitted


def test_a_check_the_queue_adds_is_pending_and_takes_the_admission_back() -> None:
    c = cluster_with(strategy_queue([]), "ac-new")
    c.apply(workload("team-a", "w", "lq-a", {"cpu": "1"}))
    c.cycle()
    assert c.wl("team-a/w").is_admitted
    c.apply(strategy_queue([{"name": "ac-new"}]))
    assert listed(c, "team-a/w") == [("ac-new", "Pending")]
    assert c.cond("team-a/w", "Admitted")[:2] == ("False", "UnsatisfiedChecks")  # type: ignore[index]
    assert c.wl("team-a/w").holds_quota
    set_check_state(c.s, "team-a/w", "ac-new", "Ready")
    assert c.wl("team-a/w").is_admitted


def test_on_flavors_narrowed_away_from_the_assigned_flavor_drops_the_check() -> None:
    c = cluster_with(strategy_queue([{"name": "ac-1"}], spot_cpu=0), "ac-1")
    c.apply(workload("team-a", "w", "lq-a", {"cpu": "1"}))
    c.cycle()
    assert listed(c, "team-a/w") == [("ac-1", "Pending")]  # on-demand, every flavor
    c.apply(strategy_queue([{"name": "ac-1", "onFlavors": ["spot"]}], spot_cpu=0))
    assert listed(c, "team-a/w") == []
    assert c.wl("team-a/w").is_admitted


def test_a_check_going_inactive_keeps_reservations_and_stops_new_ones() -> None:
    c = cluster_with(strategy_queue([{"name": "ac-1"}]), "ac-1")
    c.apply(workload("team-a", "first", "lq-a", {"cpu": "1"}, created=0))
    c.cycle()
    c.apply(check("ac-1", active=False))
    assert c.cq_status("cq-a")["conditions"][0]["reason"] == "AdmissionCheckInactive"
    c.apply(workload("team-a", "second", "lq-a", {"cpu": "1"}, created=1))
    c.cycle()
    assert c.admission("team-a/second") is None
    assert c.wl("team-a/first").holds_quota
    set_check_state(c.s, "team-a/first", "ac-1", "Ready")
    assert c.wl("team-a/first").is_admitted
