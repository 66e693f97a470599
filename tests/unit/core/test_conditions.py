"""conditions.py: the ordered condition set of a workload."""

from __future__ import annotations

from scheduler.core.conditions import Condition, Conditions

T = 1_000_000


def test_empty_sets_are_independent_once_written() -> None:
    # Empty sets share storage until their first condition; a write must never leak.
    a, b = Conditions(), Conditions()
    assert a.set("QuotaReserved", "False", "Pending", "waiting", T)
    assert [c.type for c in a] == ["QuotaReserved"]
    assert list(b) == [] and b.get("QuotaReserved") is None
    assert Conditions().items() == []
    assert not b.remove("QuotaReserved")
    assert b.set("Admitted", "True", "Admitted", "", T)
    assert [c.type for c in b] == ["Admitted"] and [c.type for c in a] == ["QuotaReserved"]


def test_insertion_order_and_transition_times() -> None:
    c = Conditions([Condition("A", "True", "r", "m", T, None)])
    assert not c.set("A", "True", "r", "m", 2 * T)  # nothing observable changed
    assert c.set("B", "False", "r", "m", 2 * T)
    assert c.set("A", "False", "r2", "m2", 3 * T)
    assert [x.type for x in c] == ["A", "B"]
    a = c.get("A")
    assert a is not None and a.last_transition == 3 * T
    copied = c.copy()
    assert copied.set("A", "True", "r", "m", 4 * T)
    assert c.is_false("A") and copied.is_true("A")


def test_removal_keeps_the_others_in_order_and_iteration_sees_a_fixed_set() -> None:
    c = Conditions(
        [
            Condition("A", "True", "r", "m", T, None),
            Condition("B", "True", "r", "m", T, None),
            Condition("A", "False", "later", "m", 2 * T, None),  # the last of a type wins
        ]
    )
    assert [(x.type, x.status) for x in c] == [("A", "False"), ("B", "True")]
    assert c.set("C", "True", "r", "m", T)
    seen = []
    for x in c:  # changing the set while iterating it: the loop sees the set it started on
        seen.append(x.type)
        c.remove(x.type)
    assert seen == ["A", "B", "C"] and c.items() == []
    assert c.set("B", "True", "r", "m", T) and c.set("A", "True", "r", "m", T)
    assert [x.type for x in c] == ["B", "A"]
    assert c.remove("B") and not c.remove("B")
    assert [x.type for x in c] == ["A"] and c.get("B") is None
