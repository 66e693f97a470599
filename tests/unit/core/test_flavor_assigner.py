"""Flavor assignment (docs/scheduling.md#flavor-assignment) and its
docs/scheduling.md#condition-messages messages.

Most tests drive whole cycles through :class:`Cluster`; the ones about the scan
mechanics (resume index, fungibility with a preemption oracle that finds targets)
call :class:`FlavorAssigner` directly on the live tree.
"""

from __future__ import annotations

import pytest

from scheduler.core.flavor_assigner import (
    FIT,
    NO_FIT,
    PREEMPT,
    Assignment,
    FlavorAssigner,
    GranularMode,
    Mode,
    PreemptionOracle,
)
from scheduler.core.preemption import no_candidates_oracle
from tests.unit.core.builders import (
    Cluster,
    Json,
    admitted_workload,
    cluster_queue,
    cohort,
    flavor,
    group,
    local_queue,
    namespace,
    pod_set,
    workload,
)

NS = "team-a"
CPU = "cpu"
MEM = "memory"
GPU = "example.com/gpu"
TAINT = {"key": "gpu", "value": "true", "effect": "NoSchedule"}


def cq_flavors(name: str, quotas: dict[str, object], **kwargs: object) -> Json:
    """A CQ covering cpu with the given flavors (in try order) and cpu quotas."""
    return cluster_queue(
        name,
        [group([CPU], {f: {CPU: q} for f, q in quotas.items()})],
        **kwargs,  # type: ignore[misc]
    )


def setup(*docs: Json, flavors: tuple[str, ...] = ("f0", "f1", "f2")) -> Cluster:
    c = Cluster()
    c.apply(namespace(NS), *(flavor(f) for f in flavors), *docs)
    return c


def assigner(c: Cluster, cq: str, oracle: PreemptionOracle | None = None) -> FlavorAssigner:
    return FlavorAssigner(
        c.s.objects.cluster_queues[cq],
        c.s._tree,
        c.s.objects.flavors,
        oracle or no_candidates_oracle(c.s._tree, cq),
        fair_sharing=False,
    )


def preempt_oracle(fr: tuple[str, str], value: int) -> GranularMode:
    """An oracle that always finds targets inside the CQ (mode `preempt`,
    docs/scheduling.md#preemption-oracle)."""
    return GranularMode(Mode.PREEMPT, 0)


def chosen(a: Assignment, pod_set_index: int = 0, resource: str = CPU) -> str:
    return a.pod_sets[pod_set_index].flavors[resource].flavor


# ------------------------------------------- docs/scheduling.md#per-pod-set-and-resource-group scan


def test_first_flavor_that_fits_is_taken_without_reasons() -> None:
    c = setup(cq_flavors("cq-a", {"f0": 1, "f1": 4, "f2": 4}), local_queue(NS, "lq", "cq-a"))
    c.apply(workload(NS, "w", "lq", {CPU: "2"}))
    a = assigner(c, "cq-a").assign(c.wl(f"{NS}/w"))
    assert a.mode == FIT
    assert chosen(a) == "f1"
    # The chosen flavor fits: the reasons collected on f0 are dropped
    # (docs/scheduling.md#per-pod-set-and-resource-group step 6).
    assert a.pod_sets[0].reasons == []
    assert a.message() == ""
    # Scan stopped at f1 (index 1), which is not the last flavor.
    assert a.last_state.tried_flavor_idx == {(0, CPU): 1}
    c.cycle()
    assert c.flavors_of(f"{NS}/w") == [{CPU: "f1"}]


def test_tried_index_is_minus_one_when_the_last_flavor_was_examined() -> None:
    c = setup(cq_flavors("cq-a", {"f0": 1, "f1": 4}), local_queue(NS, "lq", "cq-a"))
    c.apply(workload(NS, "w", "lq", {CPU: "2"}))
    a = assigner(c, "cq-a").assign(c.wl(f"{NS}/w"))
    assert chosen(a) == "f1"
    assert a.last_state.tried_flavor_idx == {(0, CPU): -1}
    assert not a.last_state.has_untried_flavors()


def test_derived_values_are_kept_and_usage_is_a_new_dict_each_time() -> None:
    cq = cluster_queue(
        "cq-a",
        [
            group([CPU], {"f0": {CPU: 0}, "f1": {CPU: 4}}),
            group([GPU], {"f2": {GPU: 4}}),
        ],
    )
    c = setup(cq, local_queue(NS, "lq", "cq-a"))
    c.apply(workload(NS, "w", "lq", {CPU: "1", GPU: "2"}))
    a = assigner(c, "cq-a").assign(c.wl(f"{NS}/w"))
    assert (a.mode, a.borrowing) == (FIT, 0)
    first = a.usage()
    assert first == {("f1", CPU): 1000, ("f2", GPU): 2}
    first[("f1", CPU)] = 0  # a caller's change never reaches the kept value
    assert a.usage() == {("f1", CPU): 1000, ("f2", GPU): 2}
    assert a.usage() is not a.usage()
    assert (a.mode, a.borrowing) == (FIT, 0)


def test_all_requested_resources_of_a_group_get_one_flavor_together() -> None:
    # f0 has cpu but not enough gpu: the whole group moves to f1
    # (docs/scheduling.md#per-pod-set-and-resource-group step 2).
    cq = cluster_queue(
        "cq-a",
        [group([CPU, GPU], {"f0": {CPU: 8, GPU: 0}, "f1": {CPU: 8, GPU: 4}})],
    )
    c = setup(cq, local_queue(NS, "lq", "cq-a"))
    c.apply(workload(NS, "w", "lq", {CPU: "1", GPU: "1"}))
    c.cycle()
    assert c.flavors_of(f"{NS}/w") == [{CPU: "f1", GPU: "f1"}]


def test_resource_groups_are_assigned_independently() -> None:
    cq = cluster_queue(
        "cq-a",
        [
            group([CPU], {"f0": {CPU: 0}, "f1": {CPU: 4}}),
            group([GPU], {"f2": {GPU: 4}}),
        ],
    )
    c = setup(cq, local_queue(NS, "lq", "cq-a"))
    c.apply(workload(NS, "w", "lq", {CPU: "1", GPU: "2"}))
    c.cycle()
    adm = c.admission(f"{NS}/w")
    assert adm is not None
    assert adm["podSetAssignments"] == [
        {
            "name": "main",
            "flavors": {CPU: "f1", GPU: "f2"},
            "resourceUsage": {CPU: "1", GPU: "2"},
            "count": 1,
        }
    ]


def test_pod_set_requesting_nothing_fits() -> None:
    c = setup(cq_flavors("cq-a", {"f0": 0}), local_queue(NS, "lq", "cq-a"))
    c.apply(workload(NS, "w", "lq", pod_sets=[pod_set(None)]))
    c.cycle()
    adm = c.admission(f"{NS}/w")
    assert adm is not None
    assert adm["podSetAssignments"][0]["flavors"] == {}
    assert adm["podSetAssignments"][0]["resourceUsage"] == {}


# ----------------------------------- docs/scheduling.md#evaluating-one-flavor-and-resource messages


def test_message_insufficient_unused_quota_is_byte_exact() -> None:
    c = setup(
        cq_flavors("cq-a", {"f0": 2}),
        local_queue(NS, "lq", "cq-a"),
    )
    c.apply(
        admitted_workload(NS, "old", "lq", "cq-a", {CPU: "1"}, flavor_name="f0"),
        workload(NS, "w", "lq", {CPU: "1500m"}),
    )
    c.cycle()
    assert c.cond(f"{NS}/w", "QuotaReserved") == (
        "False",
        "Pending",
        "couldn't assign flavors to pod set main: "
        "insufficient unused quota for cpu in flavor f0, 500m more needed",
    )


def test_message_maximum_capacity_is_byte_exact() -> None:
    c = setup(cq_flavors("cq-a", {"f0": 4}), local_queue(NS, "lq", "cq-a"))
    c.apply(workload(NS, "w", "lq", {CPU: "5"}))
    c.cycle()
    assert c.message(f"{NS}/w") == (
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor f0, "
        "previously considered podsets requests (0) + current podset request (5) > "
        "maximum capacity (4)"
    )


def test_reasons_are_sorted_and_joined_with_comma() -> None:
    # Scan order: f1 (unused quota) then f0 (maximum capacity); output is sorted.
    c = setup(cq_flavors("cq-a", {"f1": 4, "f0": 1}), local_queue(NS, "lq", "cq-a"))
    c.apply(
        admitted_workload(NS, "old", "lq", "cq-a", {CPU: "3"}, flavor_name="f1"),
        workload(NS, "w", "lq", {CPU: "2"}),
    )
    c.cycle()
    assert c.message(f"{NS}/w") == (
        "couldn't assign flavors to pod set main: "
        "insufficient quota for cpu in flavor f0, previously considered podsets requests (0)"
        " + current podset request (2) > maximum capacity (1), "
        "insufficient unused quota for cpu in flavor f1, 1 more needed"
    )


def test_resource_unavailable_message() -> None:
    c = setup(cq_flavors("cq-a", {"f0": 4}), local_queue(NS, "lq", "cq-a"))
    c.apply(workload(NS, "w", "lq", {CPU: "1", "memory": "1Gi"}))
    c.cycle()
    assert c.message(f"{NS}/w") == (
        "couldn't assign flavors to pod set main: resource memory unavailable in ClusterQueue"
    )


def test_missing_flavor_reason() -> None:
    c = setup(cq_flavors("cq-a", {"f9": 4, "f0": 4}), local_queue(NS, "lq", "cq-a"))
    # The CQ is inactive (FlavorNotFound) so no cycle pops it; the assigner still reports.
    c.apply(workload(NS, "w", "lq", {CPU: "1"}))
    a = assigner(c, "cq-a").assign(c.wl(f"{NS}/w"))
    assert chosen(a) == "f0"
    assert a.mode == FIT
    only_missing = setup(cq_flavors("cq-b", {"f9": 4}), local_queue(NS, "lq", "cq-b"))
    only_missing.apply(workload(NS, "w", "lq", {CPU: "1"}))
    b = assigner(only_missing, "cq-b").assign(only_missing.wl(f"{NS}/w"))
    assert b.mode == NO_FIT
    assert b.message() == "couldn't assign flavors to pod set main: flavor f9 not found"


def test_messages_of_several_pod_sets_are_joined_with_semicolon() -> None:
    # Only the pod sets that are not Fit are rendered (docs/scheduling.md#assignment-messages).
    # 2 of 4 available; "b" and "c" are evaluated with the usage assumed before them.
    c = setup(cq_flavors("cq-a", {"f0": 4}), local_queue(NS, "lq", "cq-a"))
    c.apply(
        admitted_workload(NS, "old", "lq", "cq-a", {CPU: "2"}, flavor_name="f0"),
        workload(
            NS,
            "w",
            "lq",
            pod_sets=[
                pod_set({CPU: "1"}, name="a"),
                pod_set({CPU: "2"}, name="b"),
                pod_set({CPU: "1"}, name="c"),
            ],
        ),
    )
    a = assigner(c, "cq-a").assign(c.wl(f"{NS}/w"))
    assert a.mode == PREEMPT
    assert a.message() == (
        "couldn't assign flavors to pod set b: "
        "insufficient unused quota for cpu in flavor f0, 1 more needed; "
        "couldn't assign flavors to pod set c: "
        "insufficient unused quota for cpu in flavor f0, 2 more needed"
    )


# --------------------------------------------------------------------------- assumed usage


def test_later_pod_sets_see_the_usage_assumed_by_earlier_ones() -> None:
    c = setup(cq_flavors("cq-a", {"f0": 4, "f1": 4}), local_queue(NS, "lq", "cq-a"))
    c.apply(
        workload(
            NS, "w", "lq", pod_sets=[pod_set({CPU: "3"}, name="a"), pod_set({CPU: "3"}, name="b")]
        )
    )
    c.cycle()
    assert c.flavors_of(f"{NS}/w") == [{CPU: "f0"}, {CPU: "f1"}]


def test_assumed_usage_appears_in_the_maximum_capacity_message() -> None:
    c = setup(cq_flavors("cq-a", {"f0": 4, "f1": 2}), local_queue(NS, "lq", "cq-a"))
    c.apply(
        workload(
            NS, "w", "lq", pod_sets=[pod_set({CPU: "3"}, name="a"), pod_set({CPU: "3"}, name="b")]
        )
    )
    c.cycle()
    assert c.message(f"{NS}/w") == (
        "couldn't assign flavors to pod set b: "
        "insufficient quota for cpu in flavor f0, previously considered podsets requests (3)"
        " + current podset request (3) > maximum capacity (4), "
        "insufficient quota for cpu in flavor f1, previously considered podsets requests (0)"
        " + current podset request (3) > maximum capacity (2)"
    )


def test_failing_group_replaces_reasons_and_stops_the_assignment() -> None:
    # cpu (group 1) gets f0 with a non-fit mode, gpu (group 2) gets nothing: the pod set
    # keeps only the gpu group's reasons and pod set "b" is never evaluated
    # (docs/scheduling.md#per-pod-set-and-resource-group).
    cq = cluster_queue(
        "cq-a",
        [group([CPU], {"f0": {CPU: 2}}), group([GPU], {"f1": {GPU: 1}})],
    )
    c = setup(cq, local_queue(NS, "lq", "cq-a"))
    c.apply(
        admitted_workload(NS, "old", "lq", "cq-a", {CPU: "1"}, flavor_name="f0"),
        workload(
            NS,
            "w",
            "lq",
            pod_sets=[pod_set({CPU: "2", GPU: "2"}, name="a"), pod_set({CPU: "9"}, name="b")],
        ),
    )
    a = assigner(c, "cq-a").assign(c.wl(f"{NS}/w"))
    assert a.mode == NO_FIT
    assert [ps.name for ps in a.pod_sets] == ["a"]
    assert a.pod_sets[0].flavors == {}
    assert a.message() == (
        "couldn't assign flavors to pod set a: insufficient quota for example.com/gpu in "
        "flavor f1, previously considered podsets requests (0) + current podset request (2) "
        "> maximum capacity (1)"
    )


# --------------------------------------------------------------------------- pods


def test_pods_resource_is_requested_when_covered() -> None:
    cq = cluster_queue("cq-a", [group([CPU, "pods"], {"f0": {CPU: 10, "pods": 3}})])
    c = setup(cq, local_queue(NS, "lq", "cq-a"))
    c.apply(workload(NS, "w", "lq", {CPU: "1"}, count=3), workload(NS, "x", "lq", {CPU: "1"}))
    c.cycle()
    adm = c.admission(f"{NS}/w")
    assert adm is not None
    assert adm["podSetAssignments"][0] == {
        "name": "main",
        "flavors": {CPU: "f0", "pods": "f0"},
        "resourceUsage": {CPU: "3", "pods": "3"},
        "count": 3,
    }
    c.cycle()
    assert c.message(f"{NS}/x") == (
        "couldn't assign flavors to pod set main: "
        "insufficient unused quota for pods in flavor f0, 1 more needed"
    )
    assert c.status(f"{NS}/x")["resourceRequests"] == [
        {"name": "main", "resources": {CPU: "1", "pods": "1"}}
    ]


def test_pods_resource_alone_counts_pods() -> None:
    cq = cluster_queue("cq-a", [group(["pods"], {"f0": {"pods": 2}})])
    c = setup(cq, local_queue(NS, "lq", "cq-a"))
    c.apply(workload(NS, "w", "lq", pod_sets=[pod_set(None, count=3)]))
    c.cycle()
    assert c.message(f"{NS}/w") == (
        "couldn't assign flavors to pod set main: insufficient quota for pods in flavor f0, "
        "previously considered podsets requests (0) + current podset request (3) > "
        "maximum capacity (2)"
    )


# --------------------------------------------------------------------------- taints


def _taint_setup(f0: Json, *, tolerations: list[Json] | None = None) -> Cluster:
    c = Cluster()
    c.apply(
        namespace(NS),
        f0,
        flavor("f1"),
        cq_flavors("cq-a", {"f0": 4, "f1": 4}),
        local_queue(NS, "lq", "cq-a"),
        workload(NS, "w", "lq", pod_sets=[pod_set({CPU: "5"}, tolerations=tolerations)]),
    )
    c.cycle()
    return c


def test_untolerated_taint_reason_is_byte_exact() -> None:
    c = _taint_setup(flavor("f0", taints=[TAINT]))
    assert c.message(f"{NS}/w") == (
        "couldn't assign flavors to pod set main: "
        "insufficient quota for cpu in flavor f1, previously considered podsets requests (0)"
        " + current podset request (5) > maximum capacity (4), "
        "untolerated taint {gpu true NoSchedule <nil>} in flavor f0"
    )


@pytest.mark.parametrize(
    ("f0", "tolerations", "expected"),
    [
        (flavor("f0", taints=[TAINT]), None, "f1"),
        (flavor("f0", taints=[TAINT]), [{"key": "gpu", "operator": "Exists"}], "f0"),
        (flavor("f0", taints=[TAINT]), [{"key": "gpu", "value": "true"}], "f0"),
        (flavor("f0", taints=[TAINT]), [{"key": "gpu", "value": "false"}], "f1"),
        (flavor("f0", taints=[TAINT]), [{"operator": "Exists"}], "f0"),
        (
            flavor("f0", taints=[TAINT]),
            [{"key": "gpu", "operator": "Exists", "effect": "NoExecute"}],
            "f1",
        ),
        (
            flavor("f0", taints=[TAINT], tolerations=[{"key": "gpu", "operator": "Exists"}]),
            None,
            "f0",
        ),
        (flavor("f0", taints=[{**TAINT, "effect": "PreferNoSchedule"}]), None, "f0"),
        (flavor("f0", taints=[{**TAINT, "effect": "NoExecute"}]), None, "f1"),
    ],
)
def test_taints_and_tolerations(f0: Json, tolerations: list[Json] | None, expected: str) -> None:
    c = Cluster()
    c.apply(
        namespace(NS),
        f0,
        flavor("f1"),
        cq_flavors("cq-a", {"f0": 4, "f1": 4}),
        local_queue(NS, "lq", "cq-a"),
        workload(NS, "w", "lq", pod_sets=[pod_set({CPU: "1"}, tolerations=tolerations)]),
    )
    c.cycle()
    assert c.flavors_of(f"{NS}/w") == [{CPU: expected}]


# --------------------------------------------------------------------------- affinity


def _affinity(*terms: list[Json]) -> Json:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": list(t)} for t in terms]
            }
        }
    }


def _zone_cluster(**pod: object) -> Cluster:
    c = Cluster()
    c.apply(
        namespace(NS),
        flavor("f0", labels={"zone": "a", "size": "1"}),
        flavor("f1", labels={"zone": "b", "size": "8"}),
        cq_flavors("cq-a", {"f0": 4, "f1": 4}),
        local_queue(NS, "lq", "cq-a"),
        workload(NS, "w", "lq", pod_sets=[pod_set({CPU: "1"}, **pod)]),  # type: ignore[arg-type]
    )
    c.cycle()
    return c


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        ({"node_selector": {"zone": "b"}}, "f1"),
        ({"node_selector": {"zone": "a"}}, "f0"),
        # keys no flavor of the group defines are ignored
        ({"node_selector": {"kubernetes.io/hostname": "n1", "zone": "b"}}, "f1"),
        ({"affinity": _affinity([{"key": "zone", "operator": "In", "values": ["b"]}])}, "f1"),
        ({"affinity": _affinity([{"key": "zone", "operator": "NotIn", "values": ["a"]}])}, "f1"),
        ({"affinity": _affinity([{"key": "size", "operator": "Gt", "values": ["4"]}])}, "f1"),
        ({"affinity": _affinity([{"key": "size", "operator": "Lt", "values": ["4"]}])}, "f0"),
        # terms are OR-ed, expressions AND-ed
        (
            {
                "affinity": _affinity(
                    [
                        {"key": "zone", "operator": "In", "values": ["a"]},
                        {"key": "size", "operator": "Gt", "values": ["4"]},
                    ],
                    [{"key": "zone", "operator": "In", "values": ["b"]}],
                )
            },
            "f1",
        ),
        # a term left empty after dropping foreign keys matches everything
        (
            {
                "affinity": _affinity(
                    [{"key": "other", "operator": "In", "values": ["x"]}],
                    [{"key": "zone", "operator": "In", "values": ["b"]}],
                )
            },
            "f0",
        ),
    ],
)
def test_node_affinity(pod: dict[str, object], expected: str) -> None:
    c = _zone_cluster(**pod)
    assert c.flavors_of(f"{NS}/w") == [{CPU: expected}]


def test_affinity_mismatch_reason_is_byte_exact() -> None:
    c = _zone_cluster(node_selector={"zone": "c"})
    assert c.message(f"{NS}/w") == (
        "couldn't assign flavors to pod set main: flavor f0 doesn't match node affinity, "
        "flavor f1 doesn't match node affinity"
    )


def test_affinity_that_cannot_be_evaluated_is_an_error_of_the_pod_set() -> None:
    c = _zone_cluster(affinity=_affinity([{"key": "size", "operator": "Gt", "values": ["x"]}]))
    assert not c.admitted(f"{NS}/w")
    assert c.message(f"{NS}/w").startswith("failed to assign flavors to pod set main: ")


# --------------------------------------------------------------------------- fungibility


def _lending_cohort(**cq_kwargs: object) -> Cluster:
    """cq-a tries f0 (nominal 0, borrowable from cq-l) then f1 (own nominal 4)."""
    return setup(
        cq_flavors("cq-a", {"f0": 0, "f1": 4}, cohort="co", **cq_kwargs),
        cq_flavors("cq-l", {"f0": 4}, cohort="co"),
        local_queue(NS, "lq", "cq-a"),
        workload(NS, "w", "lq", {CPU: "2"}),
    )


def test_when_can_borrow_borrow_takes_the_first_flavor_even_if_it_borrows() -> None:
    c = _lending_cohort()
    c.cycle()
    assert c.flavors_of(f"{NS}/w") == [{CPU: "f0"}]
    assert c.cq_status("cq-a")["flavorsReservation"][0] == {
        "name": "f0",
        "resources": [{"name": CPU, "total": "2", "borrowed": "2"}],
    }


def test_when_can_borrow_try_next_flavor_prefers_a_non_borrowing_flavor() -> None:
    c = _lending_cohort(when_can_borrow="TryNextFlavor")
    c.cycle()
    assert c.flavors_of(f"{NS}/w") == [{CPU: "f1"}]


def _hierarchy(when_can_borrow: str, *, f1_in_team: bool = True) -> Cluster:
    """org <- team <- cq-a; f1 is lendable inside team, f0 only at the org level."""
    return setup(
        cohort("org"),
        cohort("team", "org"),
        cq_flavors("cq-a", {"f0": 0, "f1": 0}, cohort="team", when_can_borrow=when_can_borrow),
        cq_flavors("cq-o", {"f0": 4}, cohort="org"),
        cq_flavors("cq-t", {"f1": 4}, cohort="team" if f1_in_team else "org"),
        local_queue(NS, "lq", "cq-a"),
        workload(NS, "w", "lq", {CPU: "2"}),
    )


def test_try_next_flavor_prefers_the_lowest_borrowing_level() -> None:
    c = _hierarchy("TryNextFlavor")
    a = assigner(c, "cq-a").assign(c.wl(f"{NS}/w"))
    assert chosen(a) == "f1"
    assert a.pod_sets[0].flavors[CPU].mode == GranularMode(Mode.FIT, 1)
    c.cycle()
    assert c.flavors_of(f"{NS}/w") == [{CPU: "f1"}]


def test_try_next_flavor_tie_on_borrowing_level_keeps_the_first() -> None:
    c = _hierarchy("TryNextFlavor", f1_in_team=False)
    a = assigner(c, "cq-a").assign(c.wl(f"{NS}/w"))
    assert chosen(a) == "f0"
    assert a.pod_sets[0].flavors[CPU].mode == GranularMode(Mode.FIT, 2)
    assert a.last_state.tried_flavor_idx == {(0, CPU): -1}


def test_borrow_policy_takes_the_first_flavor_at_any_level() -> None:
    c = _hierarchy("Borrow")
    c.cycle()
    assert c.flavors_of(f"{NS}/w") == [{CPU: "f0"}]


def _preempt_setup(**kwargs: object) -> Cluster:
    """f0 is full (used by `old`), f1 and f2 are free; `w` fits f0's nominal."""
    return setup(
        cq_flavors("cq-a", {"f0": 2, "f1": 2, "f2": 2}, **kwargs),
        local_queue(NS, "lq", "cq-a"),
        admitted_workload(NS, "old", "lq", "cq-a", {CPU: "2"}, flavor_name="f0"),
        workload(NS, "w", "lq", {CPU: "2"}),
    )


def test_when_can_preempt_preempt_stops_at_a_flavor_with_targets() -> None:
    c = _preempt_setup(when_can_preempt="Preempt")
    a = assigner(c, "cq-a", preempt_oracle).assign(c.wl(f"{NS}/w"))
    assert chosen(a) == "f0"
    assert a.mode == PREEMPT
    assert a.last_state.tried_flavor_idx == {(0, CPU): 0}


def test_when_can_preempt_try_next_flavor_moves_on_to_a_fitting_flavor() -> None:
    c = _preempt_setup(when_can_preempt="TryNextFlavor")
    a = assigner(c, "cq-a", preempt_oracle).assign(c.wl(f"{NS}/w"))
    assert chosen(a) == "f1"
    assert a.mode == FIT
    assert a.last_state.tried_flavor_idx == {(0, CPU): 1}


def test_try_next_flavor_remembers_the_preempt_flavor_when_nothing_fits() -> None:
    c = setup(
        cq_flavors("cq-a", {"f0": 2, "f1": 1}),
        local_queue(NS, "lq", "cq-a"),
        admitted_workload(NS, "old", "lq", "cq-a", {CPU: "2"}, flavor_name="f0"),
        workload(NS, "w", "lq", {CPU: "2"}),
    )
    a = assigner(c, "cq-a", preempt_oracle).assign(c.wl(f"{NS}/w"))
    assert chosen(a) == "f0"
    assert a.pod_sets[0].flavors[CPU].mode == GranularMode(Mode.PREEMPT, 0)
    assert a.last_state.tried_flavor_idx == {(0, CPU): -1}


def test_no_candidates_always_tries_the_next_flavor() -> None:
    # With the default oracle (no targets) even whenCanPreempt=Preempt moves on
    # (docs/scheduling.md#fungibility).
    c = _preempt_setup(when_can_preempt="Preempt")
    c.cycle()
    assert c.flavors_of(f"{NS}/w") == [{CPU: "f1"}]


def test_request_above_nominal_without_reclaim_is_no_fit() -> None:
    # Flat cohort, no borrowWithinCohort: preemption only within nominal
    # (docs/scheduling.md#evaluating-one-flavor-and-resource step 4).
    c = setup(
        cq_flavors("cq-a", {"f0": 2}, cohort="co"),
        cq_flavors("cq-b", {"f0": 2}, cohort="co"),
        local_queue(NS, "lq", "cq-a"),
        admitted_workload(NS, "old", "lq", "cq-a", {CPU: "1"}, flavor_name="f0"),
        local_queue(NS, "lqb", "cq-b"),
        admitted_workload(NS, "oldb", "lqb", "cq-b", {CPU: "2"}, flavor_name="f0"),
        workload(NS, "w", "lq", {CPU: "2"}),
    )
    calls: list[tuple[tuple[str, str], int]] = []

    def spy(fr: tuple[str, str], value: int) -> GranularMode:
        calls.append((fr, value))
        return GranularMode(Mode.PREEMPT, 0)

    within = assigner(c, "cq-a", spy).assign(c.wl(f"{NS}/w"))
    assert within.mode == PREEMPT and calls == [(("f0", CPU), 2000)]
    c.apply(workload(NS, "w", "lq", {CPU: "3"}))
    calls.clear()
    above = assigner(c, "cq-a", spy).assign(c.wl(f"{NS}/w"))
    assert above.mode == NO_FIT and calls == []


# ------------------------------------------------- docs/scheduling.md#flavor-scan-resumption resume


def test_resume_index_starts_the_next_scan_after_the_tried_flavor() -> None:
    c = _preempt_setup(when_can_preempt="Preempt")
    wl = c.wl(f"{NS}/w")
    fa = assigner(c, "cq-a", preempt_oracle)
    first = fa.assign(wl)
    assert chosen(first) == "f0"
    # The resumed scan starts at f1, which fits and stops the scan.
    second = fa.assign(wl, last=first.last_state)
    assert chosen(second) == "f1"
    assert second.last_state.tried_flavor_idx == {(0, CPU): 1}
    third = fa.assign(wl, last=second.last_state)
    assert chosen(third) == "f2"
    assert third.last_state.tried_flavor_idx == {(0, CPU): -1}
    # -1 means "start again from the first flavor".
    fourth = fa.assign(wl, last=third.last_state)
    assert chosen(fourth) == "f0"


def test_resume_index_is_discarded_when_the_generation_changes() -> None:
    c = _preempt_setup(when_can_preempt="Preempt")
    wl = c.wl(f"{NS}/w")
    first = assigner(c, "cq-a", preempt_oracle).assign(wl)
    assert first.last_state.tried_flavor_idx == {(0, CPU): 0}
    generation = c.s._tree.generation("cq-a")
    # a workload left the CQ: its generation moves (docs/scheduling.md#changing-usage)
    c.finish(f"{NS}/old")
    assert c.s._tree.generation("cq-a") > generation
    again = assigner(c, "cq-a", preempt_oracle).assign(wl, last=first.last_state)
    assert chosen(again) == "f0"
    assert again.mode == FIT


def _resume_cluster(*, single_pod_set: bool) -> Cluster:
    """cpu: [a0 (0), a1, a2]; gpu: [g0] tainted, so the first attempt is NoFit."""
    cq = cluster_queue(
        "cq-a",
        [
            group([CPU], {"a0": {CPU: 0}, "a1": {CPU: 4}, "a2": {CPU: 4}}),
            group([GPU], {"g0": {GPU: 4}}),
        ],
    )
    if single_pod_set:
        pod_sets = [pod_set({CPU: "1", GPU: "1"}, name="main")]
    else:
        pod_sets = [pod_set({CPU: "1"}, name="a"), pod_set({GPU: "1"}, name="b")]
    c = Cluster()
    c.apply(
        namespace(NS),
        flavor("a0"),
        flavor("a1"),
        flavor("a2"),
        flavor("g0", taints=[TAINT]),
        cq,
        local_queue(NS, "lq", "cq-a"),
        workload(NS, "w", "lq", pod_sets=pod_sets),
    )
    c.cycle()
    assert not c.admitted(f"{NS}/w")
    return c


def test_resume_survives_requeue_and_flavor_changes() -> None:
    # Pod set "a" got a1 (index 1, a2 untried); "b" failed. A flavor change does not
    # move the CQ generation, so the next attempt resumes "a" at a2
    # (docs/scheduling.md#flavor-scan-resumption).
    c = _resume_cluster(single_pod_set=False)
    c.apply(flavor("g0"))  # taint removed
    c.cycle()
    assert c.flavors_of(f"{NS}/w") == [{CPU: "a2"}, {GPU: "g0"}]


def test_resume_is_reset_by_a_cluster_queue_change() -> None:
    c = _resume_cluster(single_pod_set=False)
    c.apply(flavor("g0"))
    # a spec change of the CQ bumps its generation: the scan starts from a0 again
    c.apply(
        cluster_queue(
            "cq-a",
            [
                group([CPU], {"a0": {CPU: 0}, "a1": {CPU: 5}, "a2": {CPU: 4}}),
                group([GPU], {"g0": {GPU: 4}}),
            ],
        )
    )
    c.cycle()
    assert c.flavors_of(f"{NS}/w") == [{CPU: "a1"}, {GPU: "g0"}]


def test_resume_is_reset_by_a_workload_spec_change() -> None:
    c = _resume_cluster(single_pod_set=False)
    c.apply(flavor("g0"))
    c.apply(
        workload(
            NS,
            "w",
            "lq",
            pod_sets=[pod_set({CPU: "1"}, name="a"), pod_set({GPU: "1"}, name="b")],
            priority=3,
        )
    )
    c.cycle()
    assert c.flavors_of(f"{NS}/w") == [{CPU: "a1"}, {GPU: "g0"}]


def test_failed_pod_set_records_no_resume_index() -> None:
    c = _resume_cluster(single_pod_set=True)
    wl = c.wl(f"{NS}/w")
    assert wl.last_assignment is not None
    assert wl.last_assignment.tried_flavor_idx == {}
    c.apply(flavor("g0"))  # taint removed, generation unchanged
    c.cycle()
    assert c.flavors_of(f"{NS}/w") == [{CPU: "a1", GPU: "g0"}]


# ------------------------------------------- docs/scheduling.md#preference-between-modes preference


@pytest.mark.parametrize(
    ("modes", "expected"),
    [
        # reclaim beats preempt beats noPreemptionCandidates
        ({"f0": (Mode.PREEMPT, 0), "f1": (Mode.RECLAIM, 0)}, "f1"),
        ({"f0": (Mode.NO_CANDIDATES, 0), "f1": (Mode.PREEMPT, 0)}, "f1"),
        ({"f0": (Mode.RECLAIM, 0), "f1": (Mode.PREEMPT, 0)}, "f0"),
        # the preemption mode is compared before the borrowing level
        ({"f0": (Mode.PREEMPT, 0), "f1": (Mode.RECLAIM, 2)}, "f1"),
        # same mode: the lower borrowing level, then the first flavor
        ({"f0": (Mode.RECLAIM, 1), "f1": (Mode.RECLAIM, 0)}, "f1"),
        ({"f0": (Mode.RECLAIM, 1), "f1": (Mode.RECLAIM, 1)}, "f0"),
    ],
)
def test_preference_between_flavors_needing_preemption(
    modes: dict[str, tuple[Mode, int]], expected: str
) -> None:
    c = setup(
        cq_flavors("cq-a", {"f0": 2, "f1": 2}),
        local_queue(NS, "lq", "cq-a"),
        admitted_workload(NS, "a", "lq", "cq-a", {CPU: "2"}, flavor_name="f0"),
        admitted_workload(NS, "b", "lq", "cq-a", {CPU: "2"}, flavor_name="f1"),
        workload(NS, "w", "lq", {CPU: "2"}),
    )

    def oracle(fr: tuple[str, str], value: int) -> GranularMode:
        mode, level = modes[fr[0]]
        return GranularMode(mode, level)

    a = assigner(c, "cq-a", oracle).assign(c.wl(f"{NS}/w"))
    assert chosen(a) == expected
    assert a.mode == PREEMPT
    assert a.last_state.tried_flavor_idx == {(0, CPU): -1}


def test_unused_quota_message_uses_binary_memory_quantities() -> None:
    cq = cluster_queue("cq-a", [group([MEM], {"f0": {MEM: "1Gi"}})])
    c = setup(cq, local_queue(NS, "lq", "cq-a"))
    c.apply(
        admitted_workload(NS, "old", "lq", "cq-a", {MEM: "768Mi"}, flavor_name="f0"),
        workload(NS, "w", "lq", {MEM: "512Mi"}),
    )
    c.cycle()
    assert c.message(f"{NS}/w") == (
        "couldn't assign flavors to pod set main: "
        "insufficient unused quota for memory in flavor f0, 256Mi more needed"
    )


def test_affinity_term_with_only_match_fields_matches_everything() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
                ]
            }
        }
    }
    c = _zone_cluster(affinity=affinity)
    assert c.flavors_of(f"{NS}/w") == [{CPU: "f0"}]
