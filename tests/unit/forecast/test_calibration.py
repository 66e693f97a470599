"""docs/forecasting.md#calibration: the band from the forecaster's own errors."""

from __future__ import annotations

import math
import pickle
import random

import pytest

from scheduler.forecast.calibration import (
    ALPHA_FLOOR,
    GAMMA,
    HIGH_Q,
    LOW_Q,
    MIN_OBSERVATIONS,
    OFFSET_SECONDS,
    TARGET_MISS,
    WINDOW,
    Calibration,
    DepthBands,
    ErrorWindow,
    Miscoverage,
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


# Adaptive conformal inference: the band's quantile levels follow its misses.

RAW = 1000.0


def actual_of(error: float) -> float:
    """The actual wait whose log error against RAW is `error`."""
    return (RAW + OFFSET_SECONDS) * math.exp(error) - OFFSET_SECONDS


def served_coverage(c: Calibration, errors: list[float], delay: int = 0) -> list[bool]:
    """Serve a band for each error in turn and record it `delay` forecasts later (as a
    workload starts after others were forecast); whether each served band covered."""
    pending: list[tuple[StartBand, float]] = []
    covered = []
    for error in errors:
        band = c.band("cq", RAW)
        actual = actual_of(error)
        covered.append(band.low <= actual <= band.high)
        pending.append((band, actual))
        if len(pending) > delay:
            served, done = pending.pop(0)
            c.record("cq", RAW, done, served=served)
    return covered


CALM, BURST = 300, 600


def shifting_errors(seed: int) -> list[float]:
    """Errors whose scale triples after a calm start."""
    rng = random.Random(seed)
    return [rng.gauss(0, 0.3) for _ in range(CALM)] + [rng.gauss(0, 0.9) for _ in range(BURST)]


def share(flags: list[bool]) -> float:
    return sum(flags) / len(flags)


def test_a_miss_widens_the_next_bands_and_a_hit_narrows_them_back() -> None:
    c = Calibration()
    rng = random.Random(3)
    for _ in range(WINDOW):
        c.record("cq", RAW, actual_of(rng.gauss(0, 1)))
    assert c.level("cq").alpha == TARGET_MISS  # nothing served yet: the nominal 90%
    before = c.band("cq", RAW)
    c.record("cq", RAW, before.high + 1.0, served=before)  # above the band: a miss
    assert c.level("cq").alpha == pytest.approx(TARGET_MISS - GAMMA * (1 - TARGET_MISS))
    wider = c.band("cq", RAW)
    assert wider.low < before.low and wider.high > before.high
    c.record("cq", RAW, wider.p50, served=wider)  # inside: a hit
    assert c.level("cq").alpha == pytest.approx(TARGET_MISS - GAMMA * (1 - 2 * TARGET_MISS))
    # An error recorded without its served band does not move the level.
    c.record("cq", RAW, wider.p50)
    assert c.level("cq").alpha == pytest.approx(TARGET_MISS - GAMMA * (1 - 2 * TARGET_MISS))
    assert c.levels.keys() == {"cq"}
    for _ in range(round(1 / GAMMA)):
        c.level("cq").update(missed=False)
    # Hits narrow it back to the windows' own 90% band, never further.
    assert c.level("cq").alpha == TARGET_MISS
    assert c.band("cq", RAW) == DepthBands(c, "cq", 0, LOW_Q, HIGH_Q).band(RAW)


def test_the_band_stops_at_the_widest_and_misses_there_are_a_bounded_debt() -> None:
    c = Calibration()
    errors = [i / 100 - 0.5 for i in range(101)]  # -0.5 .. 0.5
    for e in errors:
        c.record("cq", RAW, actual_of(e))
    nominal = c.band("cq", RAW)
    far = StartBand(p50=0.0, low=0.0, high=0.0)
    for _ in range(round(2 / GAMMA)):  # misses enough to take alpha below the floor
        c.record("other", RAW, 1e9, served=far)
        c.level("cq").update(missed=True)
    assert pytest.approx(-0.5) == ALPHA_FLOOR  # repaid by WINDOW hits of GAMMA * TARGET_MISS
    assert c.level("other").alpha == c.level("cq").alpha == ALPHA_FLOOR
    widest = c.band("cq", RAW)  # the window's extremes, no further
    assert widest.low == pytest.approx(actual_of(-0.5))
    assert widest.high == pytest.approx(actual_of(0.5))
    assert widest.low < nominal.low and widest.high > nominal.high
    # The debt: hits repay it before the band narrows; WINDOW of them repay it all.
    for _ in range(WINDOW - 1):
        c.level("cq").update(missed=False)
    assert c.level("cq").alpha < 0
    assert c.band("cq", RAW) == widest
    c.level("cq").update(missed=False)
    assert c.level("cq").alpha == pytest.approx(0.0, abs=1e-9)
    c.level("cq").update(missed=False)
    assert c.band("cq", RAW).high < widest.high


def test_coverage_adapts_when_the_errors_scale_shifts() -> None:
    errors = shifting_errors(11)
    adaptive = share(served_coverage(Calibration(), errors, delay=20)[CALM:])
    fixed = Calibration()
    fixed.levels["cq"] = FixedLevel()
    constant = share(served_coverage(fixed, errors, delay=20)[CALM:])
    assert fixed.levels["cq"].alpha == TARGET_MISS
    # Over the burst, the fixed 90% band, calibrated on the calm errors, misses much
    # until the window holds enough of the burst; the adaptive one widens within it.
    assert constant < 0.8
    assert 0.85 <= adaptive <= 0.95


def test_the_level_survives_between_refreshes() -> None:
    c = Calibration()
    errors = shifting_errors(5)
    served_coverage(c, errors, delay=10)
    alpha = c.level("cq").alpha
    assert alpha != TARGET_MISS
    kept = pickle.loads(pickle.dumps(c))  # as the serving worker's state crosses a refresh
    assert kept.level("cq").alpha == alpha
    assert kept.band("cq", RAW) == c.band("cq", RAW)
    # A DepthBands made before a start keeps the level it was made with.
    bands = c.at_depth("cq", 0)
    first = bands.band(RAW)
    c.record("cq", RAW, 1e9, served=first)
    assert bands.band(RAW) == first
    assert c.band("cq", RAW).high > first.high


class FixedLevel(Miscoverage):
    """The band of a fixed 90% level, for comparison."""

    def update(self, missed: bool) -> None:
        del missed
