"""Fair sharing (scheduling spec docs/scheduling.md#fair-sharing): DRS, the admission tournament,
fair-sharing preemption."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from scheduler.core.fair_sharing import (
    DEFAULT_STRATEGIES,
    LESS_THAN_INITIAL_SHARE,
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
    MAX_WEIGHTED_SHARE,
    FairItem,
    FairPreemptor,
    FairSharingOrder,
    Share,
    compare,
    dominant_resource_share,
    lendable,
    shares_with_usage,
    weighted_share,
)
from scheduler.core.flavor_assigner import GranularMode, Mode
from scheduler.core.holders import Holders
from scheduler.core.model import ClusterQueueInfo, PreemptionPolicy
from scheduler.core.preemption import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_FAIR_SHARING,
    Admitted,
    AdmittedIndex,
    Target,
    TargetQuery,
)
from scheduler.core.quota import NodeRef, QuotaTree, ResourceQuota
from scheduler.core.resources import FlavorResource, FRAmounts
from scheduler.core.workload import EVICTED, QUOTA_RESERVED, WorkloadState

CPU: FlavorResource = ("default", "cpu")
MEM: FlavorResource = ("default", "memory")
CPU_SPOT: FlavorResource = ("spot", "cpu")
Q = ResourceQuota
NOW = 1_000_000


def cq(name: str) -> NodeRef:
    return NodeRef.cq(name)


def co(name: str) -> NodeRef:
    return NodeRef.cohort(name)


def tree_state(t: QuotaTree) -> dict[NodeRef, tuple[dict[FlavorResource, int], int]]:
    """Usage of every node plus every CQ's generation: what "restored exactly" means."""
    out: dict[NodeRef, tuple[dict[FlavorResource, int], int]] = {}
    for name in t.cluster_queues():
        out[cq(name)] = (t.node_usages(cq(name)), t.generation(name))
    for name in t.cohorts():
        out[co(name)] = (t.node_usages(co(name)), 0)
    return out


# --------------------------------------------------- docs/scheduling.md#dominant-resource-share DRS


def b2_tree(weight: float = 1.0) -> QuotaTree:
    t = QuotaTree()
    t.set_cluster_queue("a", "team", {CPU: Q(10_000)}, weight=weight)
    t.set_cluster_queue("b", "team", {CPU: Q(10_000)})
    t.add_usage("a", {CPU: 14_000})
    return t


def test_appendix_b2_drs() -> None:
    t = b2_tree()
    assert lendable(t, co("team")) == {"cpu": 20_000}
    share = dominant_resource_share(t, cq("a"))
    assert share == Share(200.0, "cpu", 1.0)
    assert weighted_share(share) == 200
    # b does not borrow; the root (no parent) is always 0.
    assert dominant_resource_share(t, cq("b")) == Share(0.0, None, 1.0)
    assert dominant_resource_share(t, co("team")).ratio == 0.0


def test_appendix_b2_weights() -> None:
    two = dominant_resource_share(b2_tree(weight=2.0), cq("a"))
    assert two == Share(200.0, "cpu", 2.0)
    assert weighted_share(two) == 100
    zero = dominant_resource_share(b2_tree(weight=0.0), cq("a"))
    assert zero.ratio == 200.0
    assert weighted_share(zero) == MAX_WEIGHTED_SHARE == 9223372036854775807
    # Weight 0 without borrowing is simply 0.
    assert weighted_share(Share(0.0, None, 0.0)) == 0


def test_drs_extra_request_is_added_to_own_usage() -> None:
    t = QuotaTree()
    t.set_cluster_queue("a", "team", {CPU: Q(10_000)})
    t.set_cluster_queue("b", "team", {CPU: Q(10_000)})
    t.add_usage("a", {CPU: 10_000})
    before = tree_state(t)
    assert dominant_resource_share(t, cq("a")).ratio == 0.0
    assert dominant_resource_share(t, cq("a"), {CPU: 4_000}).ratio == 200.0
    # Extra on an FR outside the node's SQ is ignored.
    assert dominant_resource_share(t, cq("a"), {MEM: 99}).ratio == 0.0
    assert tree_state(t) == before


def test_drs_operation_order_is_double_arithmetic() -> None:
    t = QuotaTree()
    t.set_cluster_queue("a", "team", {CPU: Q(1)})
    t.set_cluster_queue("b", "team", {CPU: Q(2)})
    t.add_usage("a", {CPU: 2})
    # borrowed 1, lendable 3: float(1) * 1000.0 / float(3), not 1 / 3 * 1000.
    assert dominant_resource_share(t, cq("a")).ratio == float(1) * 1000.0 / float(3)
    assert weighted_share(dominant_resource_share(t, cq("a"))) == 334


def test_drs_dominant_resource_sums_flavors_and_ties_to_smaller_name() -> None:
    t = QuotaTree()
    t.set_cluster_queue("a", "team", {CPU: Q(10), CPU_SPOT: Q(10), MEM: Q(40)})
    t.set_cluster_queue("b", "team", {CPU: Q(10), CPU_SPOT: Q(10), MEM: Q(40)})
    # cpu borrowed 2 + 2 over lendable 40 (two flavors) = 100; memory 8 / 80 = 100.
    t.add_usage("a", {CPU: 12, CPU_SPOT: 12, MEM: 48})
    assert lendable(t, co("team")) == {"cpu": 40, "memory": 80}
    assert dominant_resource_share(t, cq("a")) == Share(100.0, "cpu", 1.0)
    t.add_usage("a", {MEM: 8})  # memory 16 / 80 = 200 dominates
    assert dominant_resource_share(t, cq("a")) == Share(200.0, "memory", 1.0)


def test_drs_lendable_is_potential_of_parent_with_limits() -> None:
    t = QuotaTree()
    t.set_cluster_queue("a", "team", {CPU: Q(10)})
    t.set_cluster_queue("b", "team", {CPU: Q(10, lending_limit=5)})
    t.add_usage("a", {CPU: 13})
    # pot(team) = SQ(team) = 10 + (10 - 5) = 15.
    assert lendable(t, co("team")) == {"cpu": 15}
    assert dominant_resource_share(t, cq("a")).ratio == 3 * 1000.0 / 15


def test_drs_of_cohort_in_two_level_tree() -> None:
    t = two_level_tree()
    t.add_usage("y1", {CPU: 16})
    # Y borrows 6 from root R (pot(R) = 30): the cohort's share, and y1's (pot(Y) = 30).
    assert dominant_resource_share(t, co("Y")).ratio == 200.0
    assert dominant_resource_share(t, cq("y1")).ratio == 200.0
    assert dominant_resource_share(t, co("X")).ratio == 0.0
    nodes = shares_with_usage(t, "x1", {CPU: 25})
    assert [n for n, _ in nodes] == [cq("x1"), co("X"), co("R")]
    assert [s.ratio for _, s in nodes] == [500.0, 1000.0 * 5 / 30, 0.0]


def test_compare_rules() -> None:
    low = Share(100.0, "cpu", 1.0)
    high = Share(300.0, "cpu", 1.0)
    assert compare(low, high) == -1
    assert compare(high, low) == 1
    assert compare(low, Share(100.0, "memory", 1.0)) == 0
    # ratio / weight: 300 with weight 3 equals 100 with weight 1.
    assert compare(Share(300.0, "cpu", 3.0), low) == 0
    assert compare(Share(300.0, "cpu", 4.0), low) == -1
    # Weight 0 with a positive share is worse than anything else...
    inf_small = Share(1.0, "cpu", 0.0)
    inf_big = Share(5.0, "cpu", 0.0)
    assert compare(inf_small, Share(1e300, "cpu", 1e-300)) == 1
    assert compare(Share(1e18, "cpu", 1.0), inf_small) == -1
    # ... and two of them compare by the unweighted ratio.
    assert compare(inf_small, inf_big) == -1
    assert compare(inf_big, inf_small) == 1
    assert compare(inf_big, Share(5.0, "memory", 0.0)) == 0
    # Weight 0 without a share is 0, like any zero share.
    zero_w0 = Share(0.0, None, 0.0)
    assert compare(zero_w0, Share(0.0, None, 1.0)) == 0
    assert compare(zero_w0, low) == -1
    assert compare(zero_w0, inf_small) == -1


def test_weighted_share_rounds_up() -> None:
    assert weighted_share(Share(100.5, "cpu", 1.0)) == 101
    assert weighted_share(Share(100.0, "cpu", 3.0)) == 34
    assert weighted_share(Share(100.0, "cpu", 0.5)) == 200


# -------------------------------------------- docs/scheduling.md#fair-sharing-tournament tournament


def item(
    cq_name: str,
    cpu: int,
    *,
    priority: int = 0,
    ts: int = 0,
    uid: str | None = None,
    name: str | None = None,
) -> FairItem[str]:
    name = name or f"wl-{cq_name}"
    return FairItem(
        cq_name=cq_name,
        priority=priority,
        timestamp=ts,
        uid=uid or f"uid-{name}",
        key=f"ns/{name}",
        usage={CPU: cpu},
        payload=name,
    )


def flat_tree() -> QuotaTree:
    t = QuotaTree()
    for name in ("a", "b", "c"):
        t.set_cluster_queue(name, "team", {CPU: Q(10)})
    return t


def drain(order: FairSharingOrder[FairItem[str]]) -> list[str]:
    return [e.cq_name for e in order]


def test_tournament_flat_cohort_lowest_drs_first() -> None:
    t = flat_tree()
    t.add_usage("a", {CPU: 8})
    before = tree_state(t)
    entries = [item("a", 4), item("b", 12), item("c", 13)]
    # a with 4: borrows 2 (66.7); b: 2 (66.7); c: 3 (100). a/b tie -> uid "uid-wl-a" first.
    assert drain(FairSharingOrder(entries, t)) == ["a", "b", "c"]
    assert tree_state(t) == before
    entries = [item("a", 5), item("b", 12), item("c", 11)]
    # a: 3 (100), b: 2 (66.7), c: 1 (33.3).
    assert drain(FairSharingOrder(entries, t)) == ["c", "b", "a"]
    assert tree_state(t) == before


def test_tournament_tie_breaks() -> None:
    t = flat_tree()
    # Equal DRS (all within nominal): higher priority, then earlier timestamp, then uid, key.
    entries = [
        item("a", 1, priority=1, ts=5),
        item("b", 1, priority=2, ts=9),
        item("c", 1, priority=1, ts=3),
    ]
    assert drain(FairSharingOrder(entries, t)) == ["b", "c", "a"]
    entries = [
        item("a", 1, ts=3, uid="u2"),
        item("b", 1, ts=3, uid="u1"),
        item("c", 1, ts=3, uid="u1", name="aaa"),
    ]
    # b and c share uid "u1": key ns/aaa < ns/wl-b.
    assert drain(FairSharingOrder(entries, t)) == ["c", "b", "a"]


def test_tournament_weights() -> None:
    t = QuotaTree()
    t.set_cluster_queue("a", "team", {CPU: Q(10)}, weight=1.0)
    t.set_cluster_queue("b", "team", {CPU: Q(10)}, weight=4.0)
    t.set_cluster_queue("c", "team", {CPU: Q(10)}, weight=0.0)
    # a borrows 2 (100), b borrows 6 (300 / 4 = 75), c borrows 1 with weight 0 (last).
    entries = [item("a", 12), item("b", 16), item("c", 11)]
    assert drain(FairSharingOrder(entries, t)) == ["b", "a", "c"]


def test_tournament_borrowing_level_is_not_a_key_and_priority_breaks_zero_ties() -> None:
    t = flat_tree()
    entries = [item("a", 10, priority=0), item("b", 1, priority=5), item("c", 11, priority=9)]
    # a and b do not borrow (DRS 0): b's priority wins; c borrows and comes last.
    assert drain(FairSharingOrder(entries, t)) == ["b", "a", "c"]


def test_standalone_cqs_are_yielded_by_name() -> None:
    t = flat_tree()
    t.set_cluster_queue("0solo", None, {CPU: Q(1)})
    t.set_cluster_queue("zsolo", None, {CPU: Q(1)})
    entries = [item("zsolo", 50), item("c", 1), item("b", 11), item("0solo", 50)]
    order = FairSharingOrder(entries, t)
    assert len(order) == 4
    # "0solo" is the smallest name: yielded at once; then team's tree ("b" is the
    # smallest name there) yields its winner c, then b; then zsolo.
    assert drain(order) == ["0solo", "c", "b", "zsolo"]
    assert order.pop_next() is None


def test_tournament_payload_and_duplicate_cq() -> None:
    t = flat_tree()
    order = FairSharingOrder([item("a", 1, name="x")], t)
    first = order.pop_next()
    assert first is not None
    assert first.payload == "x"
    with pytest.raises(ValueError, match="two entries"):
        FairSharingOrder([item("a", 1), item("a", 2, name="other")], t)


def two_level_tree() -> QuotaTree:
    """Root R (no quota) with cohort X (CQs x1, x2) and cohort Y (CQ y1); 10 cpu each."""
    t = QuotaTree()
    t.set_cohort("R", None, {})
    t.set_cohort("X", "R", {})
    t.set_cohort("Y", "R", {})
    t.set_cluster_queue("x1", "X", {CPU: Q(10)})
    t.set_cluster_queue("x2", "X", {CPU: Q(10)})
    t.set_cluster_queue("y1", "Y", {CPU: Q(10)})
    return t


def two_level_entries() -> list[FairItem[str]]:
    # x1 fits its nominal; x2 borrows 2 from X; y1 borrows 1 from R through Y.
    return [item("x1", 10), item("x2", 12), item("y1", 11)]


def test_tournament_two_level_tree() -> None:
    t = two_level_tree()
    before = tree_state(t)
    # In X: x1 (0) beats x2 (66.7). In R: X with x1 (0) beats Y with y1 (33.3); then X
    # with x2 is still within SQ(X) = 20 (0) and beats Y.
    assert drain(FairSharingOrder(two_level_entries(), t)) == ["x1", "x2", "y1"]
    assert tree_state(t) == before


def test_tournament_recomputes_after_admission_between_yields() -> None:
    t = two_level_tree()
    order = FairSharingOrder(two_level_entries(), t)
    got: list[str] = []
    for e in order:
        got.append(e.cq_name)
        t.add_usage(e.cq_name, e.usage)  # the cycle admits each yielded entry
    # After x1 is admitted, X with x2 uses 22 > 20: DRS 66.7 at R, worse than Y's 33.3.
    assert got == ["x1", "y1", "x2"]


def test_tournament_uses_ancestor_share_not_leaf_share() -> None:
    t = two_level_tree()
    t.add_usage("x1", {CPU: 18})  # X now uses 18 of its 20
    # x2 with 5: x2 itself does not borrow, but X does (23 > 20): 100 at R.
    # y1 with 12: borrows 2 at both levels: 66.7 at R.
    entries = [item("x2", 5), item("y1", 12)]
    assert drain(FairSharingOrder(entries, t)) == ["y1", "x2"]


# -------------------------------------------- docs/scheduling.md#fair-sharing-preemption preemption


def make_wl(
    name: str,
    *,
    priority: int = 0,
    reserved_at: int | None = 0,
    created: int = 0,
    evicted: bool = False,
    uid: str | None = None,
) -> WorkloadState:
    wl = WorkloadState(
        namespace="ns",
        name=name,
        uid=uid or f"uid-{name}",
        creation=created,
        labels={},
        queue_name="lq",
        priority=priority,
        priority_class_name="",
        priority_class_source="",
        active=True,
        pod_sets=[],
    )
    if reserved_at is not None:
        wl.conditions.set(QUOTA_RESERVED, "True", "QuotaReserved", "", reserved_at)
    if evicted:
        wl.conditions.set(EVICTED, "True", "Preempted", "", reserved_at or 0)
    return wl


def cq_info(
    name: str,
    cohort: str | None,
    *,
    within: str = "Never",
    reclaim: str = "Any",
) -> ClusterQueueInfo:
    return ClusterQueueInfo(
        name=name,
        cohort=cohort,
        groups=(),
        quotas={},
        preemption=PreemptionPolicy(within_cluster_queue=within, reclaim_within_cohort=reclaim),
    )


class World:
    """A tree plus the quota-holding workloads, consistent with each other."""

    def __init__(self, tree: QuotaTree) -> None:
        self.tree = tree
        self.admitted: dict[str, list[Admitted]] = {}

    def admit(self, cq_name: str, wl: WorkloadState, usage: Mapping[FlavorResource, int]) -> None:
        self.admitted.setdefault(cq_name, []).append(Admitted(wl, cq_name, dict(usage)))
        self.tree.add_usage(cq_name, usage)

    def preemptor(self, strategies: tuple[str, ...] = DEFAULT_STRATEGIES) -> FairPreemptor:
        return FairPreemptor(self.tree, self.admitted, NOW, True, strategies)

    def find(
        self,
        wl: WorkloadState,
        info: ClusterQueueInfo,
        requests: Mapping[FlavorResource, int],
        strategies: tuple[str, ...] = DEFAULT_STRATEGIES,
    ) -> list[Target]:
        before = tree_state(self.tree)
        targets = self.preemptor(strategies).find_targets(
            TargetQuery(wl, info, set(requests), dict(requests))
        )
        assert tree_state(self.tree) == before, "the snapshot must be restored exactly"
        return targets


def pair_world() -> World:
    w = World(QuotaTree())
    w.tree.set_cluster_queue("a", "team", {CPU: Q(10)})
    w.tree.set_cluster_queue("b", "team", {CPU: Q(10)})
    return w


@pytest.mark.parametrize(
    "strategies",
    [
        (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,),
        (LESS_THAN_INITIAL_SHARE,),
        DEFAULT_STRATEGIES,
    ],
)
def test_reclaim_from_borrowing_cq_under_each_strategy(strategies: tuple[str, ...]) -> None:
    w = pair_world()
    # b uses 16 (borrows 6: DRS 300); a is empty and wants 8, only 4 are free.
    w.admit("b", make_wl("b1", reserved_at=1), {CPU: 4})
    w.admit("b", make_wl("b2", reserved_at=2), {CPU: 4})
    w.admit("b", make_wl("b3", reserved_at=3), {CPU: 4})
    w.admit("b", make_wl("b4", reserved_at=4), {CPU: 4})
    targets = w.find(make_wl("p", priority=5), cq_info("a", "team"), {CPU: 8}, strategies)
    # Most recently reserved first: b4. preemptorNew 0 <= targetNew (2 borrowed: 100).
    assert targets == [Target("ns/b4", "b", IN_COHORT_FAIR_SHARING)]


def test_strategy_refuses_to_invert_shares() -> None:
    w = pair_world()
    w.admit("a", make_wl("a1"), {CPU: 8})
    w.admit("b", make_wl("b1", reserved_at=1), {CPU: 4})
    w.admit("b", make_wl("b2", reserved_at=2), {CPU: 4})
    w.admit("b", make_wl("b3", reserved_at=3), {CPU: 4})
    # a would use 14 (DRS 200) while b borrows only 2 (100) and 0 after one removal.
    p = make_wl("p", priority=5)
    for strategies in ((LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,), (LESS_THAN_INITIAL_SHARE,)):
        assert w.find(p, cq_info("a", "team"), {CPU: 6}, strategies) == []
    assert w.find(p, cq_info("a", "team"), {CPU: 6}) == []


def test_second_strategy_uses_retry_list() -> None:
    w = pair_world()
    w.admit("a", make_wl("a1"), {CPU: 4})
    w.admit("b", make_wl("b1", reserved_at=1), {CPU: 8})
    w.admit("b", make_wl("b2", reserved_at=2), {CPU: 8})
    # a with 8 more uses 12: DRS 100. b borrows 6 (300) and 0 after removing 8.
    p = make_wl("p", priority=5)
    a = cq_info("a", "team")
    # LessThanOrEqualToFinalShare: 100 <= 0 fails for both candidates.
    assert w.find(p, a, {CPU: 8}, (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,)) == []
    # LessThanInitialShare: 100 < 300 holds.
    expected = [Target("ns/b2", "b", IN_COHORT_FAIR_SHARING)]
    assert w.find(p, a, {CPU: 8}, (LESS_THAN_INITIAL_SHARE,)) == expected
    # Both: the first puts b2 and b1 on the retry list, the second takes b2 (first retried).
    assert w.find(p, a, {CPU: 8}) == expected


def test_targets_highest_share_cq_first() -> None:
    w = World(QuotaTree())
    for name in ("a", "b", "c"):
        w.tree.set_cluster_queue(name, "team", {CPU: Q(10)})
    w.admit("b", make_wl("b1", reserved_at=9), {CPU: 12})  # borrows 2: 66.7
    w.admit("c", make_wl("c1", reserved_at=1), {CPU: 8})
    w.admit("c", make_wl("c2", reserved_at=2), {CPU: 8})  # borrows 6: 200
    # free: 30 - 28 = 2; a wants 6.
    targets = w.find(make_wl("p", priority=5), cq_info("a", "team"), {CPU: 6})
    assert targets == [Target("ns/c2", "c", IN_COHORT_FAIR_SHARING)]


def test_only_borrowing_cqs_and_policy() -> None:
    w = pair_world()
    w.admit("a", make_wl("a1", priority=0), {CPU: 10})
    w.admit("b", make_wl("b1", priority=3), {CPU: 10})
    # Nobody borrows: no other-CQ candidates; withinClusterQueue Never: none at all.
    p = make_wl("p", priority=5)
    assert w.find(p, cq_info("a", "team"), {CPU: 2}) == []
    w2 = pair_world()
    w2.admit("b", make_wl("b1", priority=3), {CPU: 16})
    # reclaimWithinCohort LowerPriority: the priority-3 workload is not lower than 2.
    low = make_wl("p", priority=2)
    assert w2.find(low, cq_info("a", "team", reclaim="LowerPriority"), {CPU: 6}) == []
    assert w2.find(low, cq_info("a", "team", reclaim="Never"), {CPU: 6}) == []
    assert w2.find(low, cq_info("a", "team", reclaim="Any"), {CPU: 6}) == [
        Target("ns/b1", "b", IN_COHORT_FAIR_SHARING)
    ]


def test_same_cq_preemption_standalone() -> None:
    w = World(QuotaTree())
    w.tree.set_cluster_queue("a", None, {CPU: Q(10)})
    w.admit("a", make_wl("low", priority=0), {CPU: 6})
    w.admit("a", make_wl("high", priority=10), {CPU: 4})
    info = cq_info("a", None, within="LowerPriority")
    targets = w.find(make_wl("p", priority=5), info, {CPU: 6})
    assert targets == [Target("ns/low", "a", IN_CLUSTER_QUEUE)]
    # Nothing lower than priority 0.
    assert w.find(make_wl("p0", priority=0), info, {CPU: 6}) == []


def test_same_cq_preemption_in_cohort_with_fill_back() -> None:
    w = pair_world()
    # c1 sorts first (lower priority) but freeing c2 alone is enough: c1 is filled back.
    w.admit("a", make_wl("c1", priority=0), {CPU: 2})
    w.admit("a", make_wl("c2", priority=1), {CPU: 8})
    w.admit("b", make_wl("b1"), {CPU: 10})
    info = cq_info("a", "team", within="LowerPriority")
    targets = w.find(make_wl("p", priority=5), info, {CPU: 8})
    assert targets == [Target("ns/c2", "a", IN_CLUSTER_QUEUE)]


def test_evicted_candidates_first_and_mixed_reasons() -> None:
    w = pair_world()
    w.admit("a", make_wl("a-evicted", priority=1, evicted=True), {CPU: 6})
    w.admit("a", make_wl("a-low", priority=0), {CPU: 4})
    w.admit("b", make_wl("b1", priority=0, reserved_at=5), {CPU: 4})
    w.admit("b", make_wl("b2", priority=0, reserved_at=6), {CPU: 6})  # b borrows 0
    info = cq_info("a", "team", within="LowerPriority")
    # b does not borrow: only same-CQ candidates; the evicted one goes first.
    targets = w.find(make_wl("p", priority=5), info, {CPU: 6})
    assert targets == [Target("ns/a-evicted", "a", IN_CLUSTER_QUEUE)]


def test_hierarchical_reclaim_uses_almost_lca_shares() -> None:
    w = World(two_level_tree())
    w.admit("y1", make_wl("y-a", reserved_at=1), {CPU: 10})
    w.admit("y1", make_wl("y-b", reserved_at=2), {CPU: 10})  # Y borrows 10: 333
    w.admit("x2", make_wl("x2-a"), {CPU: 4})  # x2 within nominal: never a candidate
    before = tree_state(w.tree)
    # x1 wants 10, 6 are free. preemptorNew = DRS(X with 10) = 0; targetOld = DRS(Y).
    targets = w.find(make_wl("p", priority=5), cq_info("x1", "X"), {CPU: 10})
    assert targets == [Target("ns/y-b", "y1", IN_COHORT_FAIR_SHARING)]
    assert tree_state(w.tree) == before


def test_hierarchical_refusal_when_preemptor_subtree_would_borrow_more() -> None:
    w = World(two_level_tree())
    w.admit("x2", make_wl("x2-a"), {CPU: 10})
    w.admit("x1", make_wl("x1-a"), {CPU: 4})  # X uses 14
    w.admit("y1", make_wl("y-a", reserved_at=1), {CPU: 6})
    w.admit("y1", make_wl("y-b", reserved_at=2), {CPU: 6})  # Y borrows 2: 66.7
    # x1 wants 10 more: X would use 24 (borrows 4: 133) > Y's share: no targets.
    assert w.find(make_wl("p", priority=5), cq_info("x1", "X"), {CPU: 10}) == []


def test_target_cq_is_chosen_again_after_each_removal() -> None:
    w = World(QuotaTree())
    for name in ("a", "b", "c"):
        w.tree.set_cluster_queue(name, "team", {CPU: Q(10)})
    for i in range(1, 5):
        w.admit("b", make_wl(f"b{i}", reserved_at=i), {CPU: 4})  # 16: borrows 6 (200)
    for i in range(1, 8):
        w.admit("c", make_wl(f"c{i}", reserved_at=i), {CPU: 2})  # 14: borrows 4 (133)
    # a wants 6, nothing is free. b4 goes first (b 200); then b is at 66.7 and c (133)
    # is the new target; c7 frees the last 2. Fill-back cannot return b4.
    targets = w.find(make_wl("p", priority=5), cq_info("a", "team"), {CPU: 6})
    assert targets == [
        Target("ns/b4", "b", IN_COHORT_FAIR_SHARING),
        Target("ns/c7", "c", IN_COHORT_FAIR_SHARING),
    ]


def test_tie_between_cohorts_goes_to_smaller_name_d10() -> None:
    w = World(QuotaTree())
    w.tree.set_cohort("R", None, {})
    for cohort, leaf in (("X", "x1"), ("P", "p1"), ("Q", "q1")):
        w.tree.set_cohort(cohort, "R", {})
        w.tree.set_cluster_queue(leaf, cohort, {CPU: Q(10)})
    w.admit("p1", make_wl("p-wl", reserved_at=1), {CPU: 12})
    # q-wl was reserved later, so it would sort first by docs/scheduling.md#candidate-order; the
    # cohort tie decides.
    w.admit("q1", make_wl("q-wl", reserved_at=5), {CPU: 12})
    targets = w.find(make_wl("p", priority=5), cq_info("x1", "X"), {CPU: 8})
    assert targets == [Target("ns/p-wl", "p1", IN_COHORT_FAIR_SHARING)]


def test_cohort_wins_tie_against_cq() -> None:
    w = World(QuotaTree())
    w.tree.set_cohort("R", None, {})
    w.tree.set_cohort("X", "R", {})
    w.tree.set_cohort("Y", "R", {})
    w.tree.set_cluster_queue("x1", "X", {CPU: Q(10)})
    w.tree.set_cluster_queue("y1", "Y", {CPU: Q(10)})
    w.tree.set_cluster_queue("c", "R", {CPU: Q(10)})
    # 66.7, sorts first by docs/scheduling.md#candidate-order
    w.admit("c", make_wl("c-wl", reserved_at=5), {CPU: 12})
    w.admit("y1", make_wl("y-wl", reserved_at=1), {CPU: 12})  # Y at 66.7 too
    targets = w.find(make_wl("p", priority=5), cq_info("x1", "X"), {CPU: 8})
    assert targets == [Target("ns/y-wl", "y1", IN_COHORT_FAIR_SHARING)]


def test_tournament_entry_for_unknown_cq_is_yielded_directly() -> None:
    t = flat_tree()
    assert drain(FairSharingOrder([item("zz", 1), item("a", 1)], t)) == ["a", "zz"]


def test_preemption_is_deterministic_regardless_of_input_order() -> None:
    def build(reverse: bool) -> World:
        w = World(QuotaTree())
        for name in ("a", "b", "c"):
            w.tree.set_cluster_queue(name, "team", {CPU: Q(10)})
        wls = [
            ("b", make_wl("b1", reserved_at=3), 6),
            ("b", make_wl("b2", reserved_at=3), 6),
            ("c", make_wl("c1", reserved_at=3), 6),
            ("c", make_wl("c2", reserved_at=3), 6),
        ]
        for cq_name, wl, amount in reversed(wls) if reverse else wls:
            w.admit(cq_name, wl, {CPU: amount})
        return w

    results = []
    for reverse in (False, True):
        w = build(reverse)
        # b and c both borrow 2 (equal DRS): tie broken by first candidate (uid b1 < c1).
        results.append(w.find(make_wl("p", priority=5), cq_info("a", "team"), {CPU: 8}))
    assert results[0] == results[1]
    assert results[0] == [Target("ns/b1", "b", IN_COHORT_FAIR_SHARING)]


def test_restored_when_nothing_fits() -> None:
    w = pair_world()
    w.admit("b", make_wl("b1"), {CPU: 12})
    # Even removing b1 leaves 20 < 25: the search fails and restores everything.
    assert w.find(make_wl("p", priority=5), cq_info("a", "team"), {CPU: 25}) == []


def test_oracle_modes() -> None:
    w = pair_world()
    w.admit("a", make_wl("a-low", priority=0), {CPU: 6})
    w.admit("b", make_wl("b1", priority=0), {CPU: 12})
    p = make_wl("p", priority=5)
    fp = w.preemptor()
    before = tree_state(w.tree)
    same = fp.oracle(p, cq_info("a", "team", within="LowerPriority"))
    other = fp.oracle(p, cq_info("a", "team", within="Never"))
    nothing = fp.oracle(p, cq_info("a", "team", reclaim="Never"))
    # a holds 6 of 10, b 12: 2 free. A request of 4 reclaims b1 (b borrows 2, a with 4
    # stays within nominal), also when a-low is a candidate: b has the higher share.
    assert other(CPU, 4) == GranularMode(Mode.RECLAIM, 0)
    assert same(CPU, 4) == GranularMode(Mode.RECLAIM, 0)
    # A request of 12: a-low goes first (a's share 400 > b's 100), then b1 would invert
    # the shares (a at 100 is not below b's 100): nothing.
    assert same(CPU, 12) == GranularMode(Mode.NO_CANDIDATES, 1)
    assert nothing(CPU, 4) == GranularMode(Mode.NO_CANDIDATES, 0)
    assert tree_state(w.tree) == before

    w2 = pair_world()
    w2.admit("a", make_wl("a-low", priority=0), {CPU: 6})
    w2.admit("b", make_wl("b1", priority=0), {CPU: 10})  # b does not borrow
    own = w2.preemptor().oracle(p, cq_info("a", "team", within="LowerPriority"))
    before = tree_state(w2.tree)
    # 8 needed, 4 free: only a-low can go; afterwards a holds 8 of its own 10 (level 0).
    assert own(CPU, 8) == GranularMode(Mode.PREEMPT, 0)
    assert tree_state(w2.tree) == before


def test_works_with_the_cycles_admitted_index() -> None:
    w = pair_world()
    w.tree.set_cluster_queue("c", "team", {CPU: Q(0)})  # inactive: not in the index
    wls = {"ns/b1": make_wl("b1", reserved_at=1), "ns/c1": make_wl("c1", reserved_at=9)}
    counted: dict[str, FRAmounts] = {"ns/b1": {CPU: 16}, "ns/c1": {CPU: 2}}
    holders = Holders()
    holders.add("b", "ns/b1", 0)
    holders.add("c", "ns/c1", 0)
    w.tree.add_usage("b", {CPU: 16})
    w.tree.add_usage("c", {CPU: 2})
    index = AdmittedIndex(wls, holders, counted, ["a", "b"])
    fp = FairPreemptor(w.tree, index, NOW, True)
    before = tree_state(w.tree)
    p = make_wl("p", priority=5)
    # c borrows 2 (and its workload sorts first) but is inactive: only b1 is a candidate.
    assert fp.find_targets(TargetQuery(p, cq_info("a", "team"), {CPU}, {CPU: 6})) == [
        Target("ns/b1", "b", IN_COHORT_FAIR_SHARING)
    ]
    assert fp.oracle(p, cq_info("a", "team"))(CPU, 6) == GranularMode(Mode.RECLAIM, 0)
    assert tree_state(w.tree) == before


def test_invalid_strategies() -> None:
    t = QuotaTree()
    with pytest.raises(ValueError, match="strategies"):
        FairPreemptor(
            t, {}, NOW, True, (LESS_THAN_INITIAL_SHARE, LESS_THAN_OR_EQUAL_TO_FINAL_SHARE)
        )
    with pytest.raises(ValueError, match="strategies"):
        FairPreemptor(t, {}, NOW, True, ("Bogus",))
    assert FairPreemptor(t, {}, NOW, True, ()).strategies == DEFAULT_STRATEGIES
