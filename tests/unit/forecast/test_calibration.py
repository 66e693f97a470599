"""docs/forecasting.md#calibration: the band from the forecaster's own errors."""

from __future__ import annotations

import math
import random

import pytest

from scheduler.forecast.calibration import (
    MIN_OBSERVATIONS,
    OFFSET_SECONDS,
    WINDOW,
    Calibration,
    ErrorWindow,
)
from scheduler.forecast.records import StartBand


def assert_prior(band: StartBand, raw: float) -> None:
    """The prior: the raw wait as median, a factor of ten either way (with the offset)."""
    assert band.p50 == pytest.approx(raw)
    assert band.low == pytest.approx((raw + OFFSET_SECONDS) / 10 - OFFSET_SECONDS)
    assert band.high == pytest.approx((raw + OFFSET_SECONDS) * 10 - OFFSET_SECONDS)


def test_without_history_the_prior_spans_a_factor_of_ten() -> None:
    assert_prior(Calibration().band("cq", 1140.0), 1140.0)


def test_a_biased_forward_run_is_corrected_by_its_median_error() -> None:
    c = Calibration()
    for _ in range(MIN_OBSERVATIONS):
        c.record("cq", 540.0, 1140.0)  # always twice as long (with the offset)
    band = c.band("cq", 540.0)
    assert band.p50 == pytest.approx(1140.0)
    assert band.low == pytest.approx(band.p50) and band.high == pytest.approx(band.p50)


def test_the_band_covers_ninety_percent_of_a_known_error_distribution() -> None:
    rng = random.Random(7)
    c = Calibration()
    for _ in range(1000):
        c.record("cq", 1000.0, (1000 + OFFSET_SECONDS) * math.exp(rng.gauss(0, 1)) - OFFSET_SECONDS)
    band = c.band("cq", 1000.0)
    covered = 0
    for _ in range(2000):
        actual = (1000 + OFFSET_SECONDS) * math.exp(rng.gauss(0, 1)) - OFFSET_SECONDS
        covered += band.low <= actual <= band.high
    assert 0.87 <= covered / 2000 <= 0.93


def test_queues_and_immediate_starts_learn_apart() -> None:
    c = Calibration()
    for _ in range(MIN_OBSERVATIONS):
        c.record("a", 0.0, 600.0)
    assert c.observations("a", 0.0) == MIN_OBSERVATIONS
    assert c.observations("a", 10.0) == 0 and c.observations("b", 0.0) == 0
    assert c.band("b", 0.0).p50 == 0.0
    assert c.band("a", 0.0).p50 == pytest.approx(600.0)


def test_short_and_long_raw_waits_learn_their_own_factor() -> None:
    c = Calibration()
    for _ in range(MIN_OBSERVATIONS):
        c.record("cq", 240.0, 540.0)  # short forecasts: (540+60)/(240+60) = twice too short
        c.record("cq", 86_340.0, 43_140.0)  # day-long ones: twice too long
    assert c.band("cq", 240.0).p50 == pytest.approx(540.0)
    assert c.band("cq", 86_340.0).p50 == pytest.approx(43_140.0)
    # A magnitude with no errors of its own: the band of every later forecast (a factor
    # of 2 either way) is widened by the prior's (a factor of 10), whose median is the
    # raw wait itself.
    assert_prior(c.band("cq", 7_140.0), 7_140.0)


def test_the_median_comes_from_errors_made_at_a_similar_depth() -> None:
    c = Calibration()
    for _ in range(MIN_OBSERVATIONS):
        c.record("cq", 540.0, 1140.0, depth=10)  # twice too short, 10 pending then
    # (14 + 1) / (10 + 1) = 1.36 is within a factor of 1.5: the same state.
    assert c.band("cq", 540.0, depth=14).p50 == pytest.approx(1140.0)
    # (16 + 1) / (10 + 1) = 1.55 is not, nor is a queue five times deeper: a state not
    # seen yet gets the raw wait as median and the prior's band around it.
    for depth in (16, 50):
        assert_prior(c.band("cq", 540.0, depth=depth), 540.0)


def test_the_band_covers_every_depth_and_its_own() -> None:
    c = Calibration()
    for _ in range(MIN_OBSERVATIONS):
        c.record("cq", 1140.0, 1200 / 3 - OFFSET_SECONDS, depth=5)  # shallow: 3 times too long
        c.record("cq", 1140.0, 1200 * 3 - OFFSET_SECONDS, depth=300)  # deep: 3 times too short
    deep = c.band("cq", 1140.0, depth=300)
    assert deep.p50 == pytest.approx(1200 * 3 - OFFSET_SECONDS)
    assert deep.low == pytest.approx(1200 / 3 - OFFSET_SECONDS)  # every depth's low
    assert deep.high == pytest.approx(1200 * 3 - OFFSET_SECONDS)
    shallow = c.band("cq", 1140.0, depth=5)
    assert shallow.p50 == pytest.approx(1200 / 3 - OFFSET_SECONDS)
    assert shallow.high == pytest.approx(1200 * 3 - OFFSET_SECONDS)  # every depth's high


def test_a_window_forgets_depths_with_their_errors() -> None:
    w = ErrorWindow()
    for i in range(WINDOW + 5):
        w.add(float(i), depth=i)
    assert len(w.errors) == len(w.levels) == WINDOW
    assert w.errors[0] == 5.0 and w.levels[0] == pytest.approx(math.log(6))
    # Depths 4 to 9 are within a factor of 1.5 of 6 (depth + 1: 5 to 10 against 7); the
    # window holds 5 onward.
    assert w.near(6) == [5.0, 6.0, 7.0, 8.0, 9.0]
