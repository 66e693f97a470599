"""Status comparison tolerant of what the API server drops (nulls, empty values)."""

from __future__ import annotations

from scheduler.runtime.kube.normalize import normalized, same_status


def test_empty_values_are_dropped_recursively() -> None:
    value = {
        "a": None,
        "b": {},
        "c": [],
        "d": "",
        "e": {"f": {"g": None}},  # empty once its own empties are gone
        "h": 0,
        "i": False,
        "j": [{"k": None, "l": 1}, {}],
    }
    assert normalized(value) == {"h": 0, "i": False, "j": [{"l": 1}, {}]}


def test_same_status_ignores_omitempty_differences() -> None:
    desired: dict[str, object] = {"conditions": [], "admission": None, "requeueState": {"count": 1}}
    server = {"requeueState": {"count": 1, "requeueAt": None}}
    assert same_status(desired, server)
    assert same_status({}, None)
    assert same_status(None, {"conditions": []})


def test_same_status_sees_real_differences() -> None:
    assert not same_status({"requeueState": {"count": 1}}, {"requeueState": {"count": 2}})
    assert not same_status({"conditions": [{"type": "A"}]}, {})
    # Order of list items matters (conditions are rendered in a fixed order).
    assert not same_status({"l": [1, 2]}, {"l": [2, 1]})
    # Zero and False are values, not absences.
    assert not same_status({"count": 0}, {})
