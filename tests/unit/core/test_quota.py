"""Tests of the hierarchical quota tree (scheduling spec docs/scheduling.md#hierarchical-quota,
KEP-79)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.quota import NodeRef, QuotaTree, ResourceQuota
from scheduler.core.resources import FlavorResource

GPU: FlavorResource = ("default", "nvidia.com/gpu")
CPU: FlavorResource = ("default", "cpu")

Q = ResourceQuota


def cq(name: str) -> NodeRef:
    return NodeRef.cq(name)


def co(name: str) -> NodeRef:
    return NodeRef.cohort(name)


# --------------------------------------------------------------------------- B.1


def b1_tree() -> QuotaTree:
    t = QuotaTree()
    t.set_cohort("org", None, {})
    t.set_cohort("research", "org", {GPU: Q(4, lending_limit=2)})
    t.set_cluster_queue("r-a", "research", {GPU: Q(4, lending_limit=1)})
    t.set_cluster_queue("prod", "org", {GPU: Q(8, borrowing_limit=3)})
    return t


def test_appendix_b1_hierarchical_accounting() -> None:
    t = b1_tree()
    assert t.guaranteed(cq("r-a"), GPU) == 3
    assert t.subtree_quota(co("research"), GPU) == 5
    assert t.guaranteed(co("research"), GPU) == 3
    assert t.subtree_quota(co("org"), GPU) == 10
    assert t.potential_available("prod", GPU) == 10
    assert t.potential_available("r-a", GPU) == 16

    t.add_usage("prod", {GPU: 9})
    assert t.node_usage(co("org"), GPU) == 9
    assert t.node_usage(co("research"), GPU) == 0
    assert t.available("prod", GPU) == 1
    assert t.available("r-a", GPU) == 7

    # A 7-GPU request fits at borrowing level 1 (inside research, which has a parent).
    assert t.borrowing_level("r-a", GPU, 7) == (1, True)
    assert t.height("research") == 1
    assert t.height("org") == 2
    # An 8-GPU request does not fit now but is below the potential: preemption land.
    assert t.available("r-a", GPU) < 8
    assert t.potential_available("r-a", GPU) >= 8


# --------------------------------------------------------------------------- flat cohorts


def test_flat_cohort_borrowing_and_lending_limits() -> None:
    t = QuotaTree()
    t.set_cluster_queue("a", "team", {CPU: Q(10, borrowing_limit=2)})
    t.set_cluster_queue("b", "team", {CPU: Q(10, lending_limit=4)})
    assert t.guaranteed(cq("b"), CPU) == 6
    assert t.subtree_quota(co("team"), CPU) == 14
    assert t.potential_available("a", CPU) == 12
    assert t.available("a", CPU) == 12  # capped by a's borrowing limit
    assert t.available("b", CPU) == 20

    t.add_usage("a", {CPU: 12})
    assert t.usage("a", CPU) == 12
    assert t.node_usage(co("team"), CPU) == 12
    assert t.available("a", CPU) == 0
    assert t.available("b", CPU) == 8  # b lent 2 of its lendable 4
    assert t.borrows(cq("a"), CPU, 0)
    assert not t.within_nominal(cq("a"), [CPU])

    t.add_usage("b", {CPU: 8})
    assert t.node_usage(co("team"), CPU) == 14  # 6 stay guaranteed, 2 spill
    assert t.available("b", CPU) == 0

    t.remove_usage("a", {CPU: 12})
    assert t.node_usage(co("team"), CPU) == 2
    assert t.available("b", CPU) == 12  # all of a's 10 is free again


def test_lending_limit_caps_what_others_can_take() -> None:
    t = QuotaTree()
    t.set_cluster_queue("greedy", "team", {CPU: Q(10)})
    t.set_cluster_queue("lender", "team", {CPU: Q(10, lending_limit=4)})
    assert t.available("greedy", CPU) == 14
    assert t.borrowing_limit("greedy", CPU) is None
    assert t.lending_limit("lender", CPU) == 4
    t.add_usage("greedy", {CPU: 14})
    assert t.available("lender", CPU) == 6
    assert t.available("greedy", CPU) == 0


def test_standalone_cluster_queue() -> None:
    t = QuotaTree()
    t.set_cluster_queue("solo", None, {CPU: Q(5)})
    assert t.available("solo", CPU) == 5
    assert t.potential_available("solo", CPU) == 5
    assert t.borrowing_level("solo", CPU, 9) == (0, False)
    t.add_usage("solo", {CPU: 5})
    assert t.available("solo", CPU) == 0
    assert t.parent(cq("solo")) is None
    assert t.root(cq("solo")) == cq("solo")
    assert t.tree_cluster_queues("solo") == ["solo"]


# --------------------------------------------------------------------------- nested


def test_nested_cohort_nominal_is_added_to_the_pool() -> None:
    t = QuotaTree()
    t.set_cohort("org", None, {CPU: Q(5)})
    t.set_cohort("team", "org", {})
    t.set_cluster_queue("x", "team", {CPU: Q(3)})
    t.set_cluster_queue("y", "org", {CPU: Q(0)})
    assert t.subtree_quota(co("org"), CPU) == 8
    assert t.available("y", CPU) == 8
    t.add_usage("x", {CPU: 3})
    assert t.available("y", CPU) == 5  # the cohort's own 5 remain
    t.add_usage("y", {CPU: 5})
    assert t.available("x", CPU) == 0
    assert t.within_nominal(co("org"), [CPU])

    # A borrowing limit on the sub-cohort bounds the whole subtree.
    t.remove_usage("x", {CPU: 3})
    t.remove_usage("y", {CPU: 5})
    t.set_cohort("team", "org", {CPU: Q(0, borrowing_limit=1)})
    assert t.available("x", CPU) == 4
    assert t.potential_available("x", CPU) == 4
    assert t.available("y", CPU) == 8


def test_borrowing_level_values() -> None:
    t = QuotaTree()
    t.set_cohort("root", None, {})
    t.set_cohort("mid", "root", {})
    t.set_cluster_queue("q", "mid", {CPU: Q(2, lending_limit=1)})
    t.set_cluster_queue("s", "mid", {CPU: Q(2)})
    t.set_cluster_queue("t", "root", {CPU: Q(4)})
    assert (t.height("mid"), t.height("root")) == (1, 2)
    assert t.subtree_quota(co("mid"), CPU) == 3
    assert t.borrowing_level("q", CPU, 2) == (0, True)
    # 3 borrows; rem = 3 - LA(q)=1 = 2 fits in mid (U 0 + 2 <= SQ 3).
    assert t.borrowing_level("q", CPU, 3) == (1, True)
    assert t.borrowing_level("q", CPU, 4) == (1, True)
    # 5: rem 4 > 3 in mid; root: 0 + 4 <= 7.
    assert t.borrowing_level("q", CPU, 5) == (2, False)
    assert t.borrowing_level("q", CPU, 100) == (2, False)
    t.add_usage("t", {CPU: 4})
    t.add_usage("s", {CPU: 2})
    # Usage makes the same request climb higher.
    assert t.borrowing_level("q", CPU, 3) == (2, False)
    assert t.borrowing_level("q", CPU, 1) == (0, True)


def test_fits_in_quota_remaining() -> None:
    t = QuotaTree()
    t.set_cluster_queue("q", "c", {CPU: Q(4, lending_limit=1), GPU: Q(1)})
    t.add_usage("q", {CPU: 1})
    assert t.local_available(cq("q"), CPU) == 2
    assert t.fits_in_quota(cq("q"), {CPU: 5, GPU: 1}) == (False, {CPU: 3, GPU: 1})
    assert t.fits_in_quota(cq("q"), {CPU: 2}) == (True, {CPU: 0})
    fits, rem = t.fits_in_quota(co("c"), {CPU: 3})
    # SQ(c) = 4 - 3 = 1, U(c) = 0: 3 does not fit; LA of a cohort without LL is 0.
    assert (fits, rem) == (False, {CPU: 3})


def test_usage_on_fr_without_quota_is_tracked() -> None:
    t = QuotaTree()
    t.set_cluster_queue("q", "c", {CPU: Q(4)})
    odd: FlavorResource = ("ghost-flavor", "memory")
    t.add_usage("q", {odd: 7})
    assert t.usage("q", odd) == 7
    assert t.nominal("q", odd) == 0
    assert t.node_usage(co("c"), odd) == 7
    assert t.available("q", odd) == 0
    assert t.borrows(cq("q"), odd, 0)
    assert odd in t.frs()
    t.remove_usage("q", {odd: 7})
    assert t.node_usage(co("c"), odd) == 0


# --------------------------------------------------------------------------- structure


def test_implicit_cohorts_appear_and_disappear() -> None:
    t = QuotaTree()
    t.set_cluster_queue("q", "ghost", {CPU: Q(4)})
    assert t.cohorts() == ["ghost"]
    assert t.explicit_cohorts() == []
    assert t.height("ghost") == 1
    assert t.weight(co("ghost")) == 1.0

    t.set_cohort("ghost", "top", {CPU: Q(2)}, weight=3.0)
    assert t.cohorts() == ["ghost", "top"]
    assert t.explicit_cohorts() == ["ghost"]
    assert not t.is_explicit("top")
    assert t.available("q", CPU) == 6
    assert t.root(cq("q")) == co("top")
    assert t.children(co("top")) == [co("ghost")]

    t.delete_cohort("ghost")  # still referenced by q: implicit again
    assert t.cohorts() == ["ghost"]
    assert t.quotas(co("ghost")) == {}
    assert t.parent(co("ghost")) is None
    assert t.weight(co("ghost")) == 1.0
    assert t.available("q", CPU) == 4

    t.delete_cluster_queue("q")
    assert t.cohorts() == []
    assert t.cluster_queues() == []


def test_delete_unreferenced_explicit_cohort_disappears() -> None:
    t = QuotaTree()
    t.set_cohort("lonely", "p", {})
    assert t.cohorts() == ["lonely", "p"]
    t.delete_cohort("lonely")
    assert t.cohorts() == []


def test_children_and_listings_are_name_ordered() -> None:
    t = QuotaTree()
    for name in ["z", "b", "m"]:
        t.set_cluster_queue(name, "c", {})
    t.set_cohort("k", "c", {})
    t.set_cohort("b", "c", {})
    assert t.children(co("c")) == [co("b"), cq("b"), co("k"), cq("m"), cq("z")]
    assert t.child_cohorts("c") == ["b", "k"]
    assert t.child_cluster_queues("c") == ["b", "m", "z"]
    assert t.cluster_queues() == ["b", "m", "z"]
    assert t.tree_cluster_queues("m") == ["b", "m", "z"]
    assert t.children(cq("b")) == []


def test_usage_survives_spec_changes_and_moves() -> None:
    t = QuotaTree()
    t.set_cluster_queue("q", "a", {CPU: Q(2)})
    t.set_cluster_queue("other", "b", {CPU: Q(10)})
    t.add_usage("q", {CPU: 5})
    assert t.node_usage(co("a"), CPU) == 5
    t.set_cluster_queue("q", "b", {CPU: Q(3)})  # move: a disappears, b carries usage
    assert t.cohorts() == ["b"]
    assert t.usage("q", CPU) == 5
    assert t.node_usage(co("b"), CPU) == 5
    assert t.available("other", CPU) == 8
    t.set_cluster_queue("q", None, {CPU: Q(3)})
    assert t.node_usage(co("b"), CPU) == 0
    assert t.available("q", CPU) == 0  # quota went below usage: clamped


def test_unknown_cluster_queue() -> None:
    t = QuotaTree()
    with pytest.raises(KeyError):
        t.add_usage("nope", {CPU: 1})
    t.remove_usage("nope", {CPU: 1})  # a deleted CQ's release is a no-op
    t.delete_cluster_queue("nope")
    t.delete_cohort("nope")
    assert not t.cohort_in_cycle("nope")


def test_negative_quota_rejected() -> None:
    with pytest.raises(ValueError):
        Q(-1)


# --------------------------------------------------------------------------- cycles


def test_cycle_detection_and_breaking() -> None:
    t = QuotaTree()
    t.set_cohort("a", "b", {CPU: Q(2)})
    t.set_cohort("b", "a", {CPU: Q(3)})
    t.set_cohort("c", "a", {})
    t.set_cluster_queue("x", "a", {CPU: Q(4)})
    t.set_cluster_queue("y", "c", {CPU: Q(1)})
    t.set_cluster_queue("free", "elsewhere", {CPU: Q(1)})

    assert t.in_cycle("x") and t.in_cycle("y")
    assert not t.in_cycle("free")
    assert all(t.cohort_in_cycle(c) for c in ["a", "b", "c"])
    assert t.cycle_description("a") == "a -> b -> a"
    assert t.cycle_description("b") == "b -> a -> b"
    assert t.cycle_description("c") == "a -> b -> a"
    assert t.cycle_description("elsewhere") == ""
    assert t.available("x", CPU) == 0
    assert t.potential_available("x", CPU) == 0
    assert t.borrowing_level("x", CPU, 1) == (0, False)
    assert t.tree_cluster_queues("y") == []
    assert t.tree_cohorts("c") == ["a", "b", "c"]
    assert t.root(cq("y")) == co("a")
    assert t.path_to_root(cq("y")) == []
    assert t.height("a") == 0
    assert t.fits_in_quota(co("a"), {CPU: 1}) == (False, {CPU: 1})
    assert t.available("free", CPU) == 1

    # Usage is still recorded on the CQ while the tree is cyclic.
    t.add_usage("x", {CPU: 6})
    t.add_usage("y", {CPU: 1})
    t.remove_usage("y", {CPU: 1})
    gen = t.generation("x")

    t.set_cohort("b", None, {CPU: Q(3)})  # break the cycle
    assert not t.in_cycle("x") and not t.cohort_in_cycle("c")
    assert t.cycle_description("a") == ""
    assert t.generation("x") > gen
    assert t.subtree_quota(co("b"), CPU) == 10  # 3 + (2 + 4 + 1)
    assert t.node_usage(co("a"), CPU) == 6
    assert t.node_usage(co("b"), CPU) == 6
    assert t.available("y", CPU) == 4
    assert t.tree_cluster_queues("y") == ["x", "y"]
    assert t.root(cq("y")) == co("b")
    assert t.height("b") == 3


def test_self_cycle_and_cycle_through_deletion() -> None:
    t = QuotaTree()
    t.set_cohort("s", "s", {})
    t.set_cluster_queue("q", "s", {CPU: Q(1)})
    assert t.in_cycle("q")
    assert t.cycle_description("s") == "s -> s"
    t.delete_cohort("s")  # implicit now: no parent, cycle gone
    assert not t.in_cycle("q")
    assert t.available("q", CPU) == 1


def test_creating_a_cycle_after_usage() -> None:
    t = QuotaTree()
    t.set_cohort("a", None, {})
    t.set_cohort("b", "a", {})
    t.set_cluster_queue("q", "b", {CPU: Q(1)})
    t.set_cluster_queue("r", "a", {CPU: Q(4)})
    t.add_usage("q", {CPU: 3})
    t.set_cohort("a", "b", {})  # a <-> b
    assert t.in_cycle("r")
    t.remove_usage("q", {CPU: 1})
    t.set_cohort("a", None, {})
    assert t.node_usage(co("a"), CPU) == 2
    assert t.available("r", CPU) == 3


# --------------------------------------------------------------------------- generation


def test_generation_bumps() -> None:
    t = QuotaTree()
    t.set_cluster_queue("a", "c", {CPU: Q(2)})
    t.set_cluster_queue("b", "c", {CPU: Q(2)})
    t.set_cluster_queue("z", "other", {CPU: Q(2)})
    ga, gb, gz = t.generation("a"), t.generation("b"), t.generation("z")

    t.add_usage("a", {CPU: 1})
    assert (t.generation("a"), t.generation("b")) == (ga, gb)

    t.remove_usage("a", {CPU: 1})
    assert t.generation("a") > ga and t.generation("b") == gb
    ga = t.generation("a")

    t.set_cluster_queue("a", "c", {CPU: Q(2)}, weight=2.0)  # weight only: no bump
    assert t.generation("a") == ga
    assert t.weight(cq("a")) == 2.0

    t.set_cohort("c", None, {CPU: Q(1)})
    assert t.generation("a") > ga and t.generation("b") > gb
    assert t.generation("z") == gz
    ga, gb = t.generation("a"), t.generation("b")

    t.set_cluster_queue("b", "other", {CPU: Q(2)})  # move: both trees change
    assert t.generation("a") > ga and t.generation("z") > gz

    # Re-creating a CQ never reuses an old generation.
    old = t.generation("z")
    t.delete_cluster_queue("z")
    t.set_cluster_queue("z", None, {})
    assert t.generation("z") > old


# --------------------------------------------------------------------------- clone


def test_clone_is_independent() -> None:
    live = b1_tree()
    live.add_usage("prod", {GPU: 2})
    snap = live.clone()
    snap.add_usage("prod", {GPU: 7})
    snap.remove_usage("prod", {GPU: 1})
    assert live.usage("prod", GPU) == 2
    assert live.node_usage(co("org"), GPU) == 2
    assert snap.node_usage(co("org"), GPU) == 8

    live.add_usage("r-a", {GPU: 1})
    assert snap.usage("r-a", GPU) == 0

    snap.set_cluster_queue("new", "research", {GPU: Q(1)})
    snap.delete_cohort("org")
    assert live.cluster_queues() == ["prod", "r-a"]
    assert live.children(co("research")) == [cq("r-a")]
    assert live.explicit_cohorts() == ["org", "research"]
    # LA(r-a) = 3 - 1, LA(research) = 3, org has 10 - 2 left.
    assert live.available("r-a", GPU) == 2 + 3 + 8


# --------------------------------------------------------------------------- properties

FRS: list[FlavorResource] = [("f1", "cpu"), ("f2", "cpu"), ("f3", "gpu")]


@dataclass
class Spec:
    cohorts: dict[str, tuple[str | None, dict[FlavorResource, ResourceQuota]]] = field(
        default_factory=dict
    )
    cqs: dict[str, tuple[str | None, dict[FlavorResource, ResourceQuota]]] = field(
        default_factory=dict
    )


@st.composite
def quotas(draw: st.DrawFn, has_parent: bool, is_cq: bool) -> dict[FlavorResource, Q]:
    out: dict[FlavorResource, Q] = {}
    # f3 is nobody's quota on purpose: usage on it must never crash
    # (docs/scheduling.md#invalid-input).
    for fr in FRS[:2]:
        if not draw(st.booleans()):
            continue
        nominal = draw(st.integers(0, 6))
        bl = draw(st.none() | st.integers(0, 6)) if has_parent else None
        ll_max = nominal if is_cq else 8
        ll = draw(st.none() | st.integers(0, ll_max)) if has_parent else None
        out[fr] = Q(nominal, bl, ll)
    return out


@st.composite
def trees(draw: st.DrawFn) -> Spec:
    spec = Spec()
    n_cohorts = draw(st.integers(0, 4))
    names = [f"co{i}" for i in range(n_cohorts)]
    # Cohorts only point at earlier names (acyclic), or at an implicit "imp" root.
    for i, name in enumerate(names):
        parent = draw(st.sampled_from([None, "imp", *names[:i]]))
        spec.cohorts[name] = (parent, draw(quotas(parent is not None, False)))
    for i in range(draw(st.integers(1, 5))):
        cohort = draw(st.sampled_from([None, "imp", "imp2", *names]))
        spec.cqs[f"cq{i}"] = (cohort, draw(quotas(cohort is not None, True)))
    return spec


def build(spec: Spec) -> QuotaTree:
    t = QuotaTree()
    for name, (parent, qs) in spec.cohorts.items():
        t.set_cohort(name, parent, qs)
    for name, (cohort, qs) in spec.cqs.items():
        t.set_cluster_queue(name, cohort, qs)
    return t


def reference(t: QuotaTree) -> dict[NodeRef, tuple[dict[FlavorResource, int], ...]]:
    """SQ, G, U of every acyclic node, from scratch through the public API."""
    out: dict[NodeRef, tuple[dict[FlavorResource, int], ...]] = {}

    def g_of(sq: dict[FlavorResource, int], node: NodeRef) -> dict[FlavorResource, int]:
        g = {}
        for fr in FRS:
            q = t.quotas(node).get(fr)
            if q is not None and q.lending_limit is not None:
                g[fr] = max(0, sq[fr] - q.lending_limit)
            else:
                g[fr] = 0
        return g

    def visit(node: NodeRef) -> tuple[dict[FlavorResource, int], ...]:
        own = t.quotas(node)
        sq = {fr: own[fr].nominal if fr in own else 0 for fr in FRS}
        if node.is_cq:
            u = {fr: t.usage(node.name, fr) for fr in FRS}
        else:
            u = dict.fromkeys(FRS, 0)
            for child in t.children(node):
                csq, cg, cu = visit(child)
                for fr in FRS:
                    sq[fr] += csq[fr] - cg[fr]
                    u[fr] += max(0, cu[fr] - cg[fr])
        res = (sq, g_of(sq, node), u)
        out[node] = res
        return res

    for name in t.cluster_queues():
        if t.parent(cq(name)) is None:
            visit(cq(name))
    for name in t.cohorts():
        if not t.cohort_in_cycle(name) and t.parent(co(name)) is None:
            visit(co(name))
    return out


def kep79_violations(t: QuotaTree) -> list[str]:
    """Nodes where T(x) < -BL(x) (roots: T < 0), with T as defined in KEP-79."""
    bad: list[str] = []

    def slack(node: NodeRef, fr: FlavorResource) -> int:
        q = t.quotas(node).get(fr)
        own = q.nominal if q is not None else 0
        if node.is_cq:
            value = own - t.usage(node.name, fr)
        else:
            value = own
            for child in t.children(node):
                ct = slack(child, fr)
                cq_ = t.quotas(child).get(fr)
                if cq_ is not None and cq_.lending_limit is not None:
                    ct = min(cq_.lending_limit, ct)
                value += ct
        if t.parent(node) is None:
            if value < 0:
                bad.append(f"{node} {fr} T={value} at root")
        elif q is not None and q.borrowing_limit is not None and value < -q.borrowing_limit:
            bad.append(f"{node} {fr} T={value} BL={q.borrowing_limit}")
        return value

    roots = {t.root(cq(name)) for name in t.cluster_queues()}
    for root in sorted(roots, key=lambda r: (r.name, r.kind)):
        for fr in FRS:
            slack(root, fr)
    return bad


def assert_matches_reference(t: QuotaTree) -> None:
    for node, (sq, g, u) in reference(t).items():
        for fr in FRS:
            assert t.subtree_quota(node, fr) == sq[fr], (node, fr)
            assert t.guaranteed(node, fr) == g[fr], (node, fr)
            assert t.node_usage(node, fr) == u[fr], (node, fr)


ops = st.lists(
    st.tuples(st.booleans(), st.integers(0, 4), st.sampled_from(FRS), st.integers(1, 8)),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(spec=trees(), steps=ops, data=st.data())
def test_property_admission_respects_limits(
    spec: Spec, steps: list[tuple[bool, int, FlavorResource, int]], data: st.DataObject
) -> None:
    t = build(spec)
    names = t.cluster_queues()
    held: list[tuple[str, FlavorResource, int]] = []
    for is_add, idx, fr, amount in steps:
        if is_add or not held:
            name = names[idx % len(names)]
            avail = t.available(name, fr)
            if amount <= avail:
                t.add_usage(name, {fr: amount})
                held.append((name, fr, amount))
            else:
                # available() is tight: one unit more than it allows breaks KEP-79.
                probe = t.clone()
                probe.add_usage(name, {fr: avail + 1})
                assert kep79_violations(probe), (name, fr, avail)
        else:
            name, held_fr, held_amount = held.pop(idx % len(held))
            t.remove_usage(name, {held_fr: held_amount})
        assert kep79_violations(t) == []  # (a) nothing over-admitted
        assert_matches_reference(t)  # (b) incremental == rebuild

    # (c) removing everything, in a random order, returns all usage to 0.
    for item in data.draw(st.permutations(held)):
        t.remove_usage(item[0], {item[1]: item[2]})
    for name in t.cluster_queues():
        assert all(t.node_usage(cq(name), fr) == 0 for fr in FRS)
    for name in t.cohorts():
        assert all(t.node_usage(co(name), fr) == 0 for fr in FRS)


Target = int | str | None
restructure = st.tuples(
    st.sampled_from(["usage", "reparent", "move", "requota", "delete_cohort"]),
    st.integers(0, 4),  # which CQ or cohort
    st.sampled_from([None, 0, 1, 2, 3, "x"]),  # new parent: coN, implicit "x" or none
    st.integers(1, 8),  # an amount or a nominal quota
    st.sampled_from(FRS),
)


@settings(max_examples=300, deadline=None)
@given(spec=trees(), steps=st.lists(restructure, max_size=25), data=st.data())
def test_property_restructuring_keeps_usage_consistent(
    spec: Spec,
    steps: list[tuple[str, int, Target, int, FlavorResource]],
    data: st.DataObject,
) -> None:
    """Spec and edge changes (including cycles) rebuild to the from-scratch values
    and never lose CQ usage."""
    t = build(spec)
    cqs = t.cluster_queues()
    held: list[tuple[str, FlavorResource, int]] = []

    def cohort_name(v: Target) -> str | None:
        return None if v is None else f"co{v}" if isinstance(v, int) else v

    for kind, idx, target, amount, fr in steps:
        cq_name = cqs[idx % len(cqs)]
        cohort = f"co{idx % 4}"
        if kind == "usage":
            t.add_usage(cq_name, {fr: amount})
            held.append((cq_name, fr, amount))
        elif kind == "reparent":
            qs = dict(t.quotas(co(cohort))) if t.has_cohort(cohort) else {}
            t.set_cohort(cohort, cohort_name(target), qs)
        elif kind == "move":
            t.set_cluster_queue(cq_name, cohort_name(target), dict(t.quotas(cq(cq_name))))
        elif kind == "requota":
            t.set_cluster_queue(cq_name, t.cohort_of(cq_name), {FRS[0]: Q(amount)})
        else:
            t.delete_cohort(cohort)

        # Cycle flags agree with an independent parent walk.
        for name in t.cohorts():
            seen: set[str] = set()
            cur: str | None = name
            while cur is not None and cur not in seen:
                seen.add(cur)
                p = t.parent(co(cur))
                cur = None if p is None else p.name
            assert t.cohort_in_cycle(name) == (cur is not None)
        for name in cqs:
            home = t.cohort_of(name)
            assert t.in_cycle(name) == (home is not None and t.cohort_in_cycle(home))
            if t.in_cycle(name):
                assert t.available(name, FRS[0]) == 0
        assert_matches_reference(t)

    # Break every cycle, then the incremental state still equals the rebuild.
    for name in t.explicit_cohorts():
        t.set_cohort(name, None, dict(t.quotas(co(name))))
    assert_matches_reference(t)
    for item in data.draw(st.permutations(held)):
        t.remove_usage(item[0], {item[1]: item[2]})
    for name in t.cohorts():
        assert all(t.node_usage(co(name), fr) == 0 for fr in FRS)
    for name in cqs:
        assert all(t.usage(name, fr) == 0 for fr in FRS)


def test_kept_children_and_chains_follow_structure_changes() -> None:
    t = b1_tree()
    assert t.children(co("org")) == [cq("prod"), co("research")]
    assert t.potential_available("prod", GPU) == 10
    snapshot = t.clone()
    listed = snapshot.children(co("org"))
    listed.append(cq("bogus"))  # a caller's list is its own
    assert snapshot.children(co("org")) == [cq("prod"), co("research")]
    # A change of the live tree is seen at once; the snapshot keeps its structure.
    t.set_cluster_queue("new", "org", {GPU: Q(2)})
    t.set_cluster_queue("prod", "research", {GPU: Q(8, borrowing_limit=1)})
    assert t.children(co("org")) == [cq("new"), co("research")]
    assert t.children(co("research")) == [cq("prod"), cq("r-a")]
    assert t.potential_available("prod", GPU) == 9
    assert snapshot.children(co("org")) == [cq("prod"), co("research")]
    assert snapshot.potential_available("prod", GPU) == 10
    # A cycle empties potentials, a broken cycle gives them back.
    t.set_cohort("org", "research", {})
    assert t.potential_available("prod", GPU) == 0
    t.set_cohort("org", None, {})
    assert t.potential_available("prod", GPU) == 9
