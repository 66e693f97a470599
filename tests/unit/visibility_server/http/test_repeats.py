"""docs/operations.md#why-a-request-is-401: the same failure logged once an interval, with
the count of the ones held back; distinct reasons apart; the reasons kept are bounded."""

from __future__ import annotations

from tests.unit.visibility_server.test_looplag import Clock
from visibility_server.http.repeats import RepeatFilter


def test_a_reason_is_logged_once_an_interval_with_the_count_held_back() -> None:
    clock = Clock()
    repeats = RepeatFilter(interval=10.0, clock=clock)
    assert repeats.admit("bad cn") == 0
    clock.now += 4.0
    assert repeats.admit("bad cn") is None
    clock.now += 5.9
    assert repeats.admit("bad cn") is None
    clock.now += 0.1  # ten seconds after the line
    assert repeats.admit("bad cn") == 2
    assert repeats.admit("bad cn") is None
    clock.now += 10.0
    assert repeats.admit("bad cn") == 1
    clock.now += 30.0
    assert repeats.admit("bad cn") == 0


def test_distinct_reasons_are_counted_apart() -> None:
    clock = Clock()
    repeats = RepeatFilter(interval=10.0, clock=clock)
    assert repeats.admit("bad cn") == 0
    assert repeats.admit("expired") == 0
    assert repeats.admit("bad cn") is None
    assert repeats.admit("expired") is None
    assert repeats.admit("expired") is None
    clock.now += 10.0
    assert repeats.admit("expired") == 2
    assert repeats.admit("bad cn") == 1


def test_the_reasons_kept_are_bounded_and_the_oldest_is_logged_again() -> None:
    clock = Clock()
    repeats = RepeatFilter(interval=10.0, reasons=2, clock=clock)
    assert repeats.admit("a") == 0
    assert repeats.admit("b") == 0
    assert repeats.admit("a") is None  # "a" is now the most recently used
    assert repeats.admit("c") == 0  # pushes out "b"
    assert repeats.admit("b") == 0  # forgotten: logged again at once (and pushes out "a")
    assert repeats.admit("c") is None
    assert repeats.admit("a") == 0
