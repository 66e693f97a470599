"""The shared backoff formula: growth, jitter, cap."""

from __future__ import annotations

import pytest

from scheduler.kubeapi.backoff import RECONNECT, Backoff


def test_pauses_grow_by_the_factor_from_the_initial_pause() -> None:
    backoff = Backoff(initial=0.5, factor=1.5)
    assert [backoff.delay(n) for n in range(4)] == [0.5, 0.75, 1.125, 1.6875]


def test_jitter_adds_at_most_its_fraction_of_the_pause() -> None:
    backoff = Backoff(initial=2.0, factor=2.0, jitter=0.2)
    assert backoff.delay(1, rand=0.0) == 4.0
    assert backoff.delay(1, rand=0.5) == pytest.approx(4.4)
    assert backoff.delay(1, rand=0.999) < 4.8


def test_reconnects_double_up_to_the_cap_including_jitter() -> None:
    assert [RECONNECT.delay(n) for n in range(7)] == [0.5, 1, 2, 4, 8, 16, 30]
    assert RECONNECT.delay(5, rand=0.99) == pytest.approx(16 * 1.198)
    assert RECONNECT.delay(6, rand=0.99) == 30.0
    # However long the failure, the pause stays finite and capped.
    assert RECONNECT.delay(10_000, rand=0.5) == 30.0
    assert Backoff(initial=1.0, factor=2.0).delay(10_000) == 2.0**64
