"""The engine's idle-cycle stop: a repeated state found in constant memory."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scheduler.runtime.repeat_detector import RepeatDetector


def first_report(states: list[object]) -> int | None:
    detector = RepeatDetector()
    for i, state in enumerate(states):
        if detector.repeated(state):
            return i
    return None


@given(lead=st.integers(0, 300), period=st.integers(1, 300))
def test_a_loop_is_found_within_a_bounded_number_of_states(lead: int, period: int) -> None:
    loop = [("loop", i) for i in range(period)]
    states: list[object] = [("lead", i) for i in range(lead)] + loop * (4 + 4 * lead // period)
    found = first_report(states)
    assert found is not None
    # What it reports is a true repeat, never earlier than the first one.
    assert states[found] in states[:found]
    assert found >= lead + period
    # The checkpoint sits at 0, 2, 6, 14, ...: the first one past the lead with a
    # window as long as the period sees its state again one period later.
    assert found <= 2 * max(lead + 2, period) + period


@given(st.lists(st.integers(), unique=True, max_size=500))
def test_distinct_states_are_never_a_repeat(states: list[int]) -> None:
    assert first_report(list(states)) is None


def test_the_same_state_twice_in_a_row_stops_at_once() -> None:
    """A blocked StrictFIFO head: the second identical cycle is the last."""
    assert first_report(["blocked", "blocked"]) == 1


def test_reset_forgets_the_states_before_progress() -> None:
    detector = RepeatDetector()
    assert not detector.repeated("a")
    detector.reset()
    assert not detector.repeated("b")
    assert not detector.repeated("a")  # "a" was before the reset
    assert detector.repeated("b")
