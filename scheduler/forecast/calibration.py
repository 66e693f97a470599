"""The band from the forecaster's own errors, per ClusterQueue
(docs/forecasting.md#calibration).

When a forecast's workload actually starts, its error is recorded as a log ratio
`ln((actual + s) / (raw + s))`, with `s` = OFFSET_SECONDS so that waits of zero
compare. The band of a new forecast is the raw wait scaled by the empirical 5th,
50th and 95th percentiles of the ClusterQueue's recent errors: the median corrects
the forward run's bias, the tails say how wrong it has been. With fewer than
MIN_OBSERVATIONS errors, the window is padded with PRIOR_ERRORS, a spread that
assumes the raw wait is right within a factor of about ten either way.

Forecasts whose raw wait is zero (the forward run admits the workload right away)
and the others are wrong in different ways; each kind keeps its own window.

The state of the queue when the forecast was made matters too: each error is kept
with the depth of its ClusterQueue then (workloads pending in it). A new forecast's
median comes from the errors of the narrowest window made at a similar depth (within
a factor DEPTH_FACTOR, of depth + 1), and its band covers both that band and the
band of every depth; with fewer than MIN_OBSERVATIONS errors at a similar depth the
prior pads them, so a queue deeper (or shallower) than any seen gets the raw wait as
its median and a wide band rather than a correction learned in unlike states.

The band's quantile levels adapt (adaptive conformal inference): each ClusterQueue
keeps a miscoverage level `alpha`, TARGET_MISS (0.1) to start. When a forecast's
workload starts, `alpha` moves by GAMMA * (TARGET_MISS - missed), `missed` being 1 when
the actual wait fell outside the band served for it: each miss widens the next bands,
each hit narrows them a little, so the misses of a shift (errors larger than the
window has seen) are made up for within it rather than once the window has refilled.
The band's tails are the quantiles at alpha / 2 and 1 - alpha / 2; `alpha` is kept
within [ALPHA_FLOOR, TARGET_MISS]: at 0 and below the band spans the widest errors the
windows (and the prior) hold, and the misses made there are a debt repaid by later hits
before the band narrows; it is never narrower than the windows' own 90% band. The
feedback is delayed: a forecast counts when its workload starts, not when it is made.

The state is plain dataclasses of lists and numbers: the serving worker keeps it
between refreshes, the simulator between instants.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from scheduler.forecast.records import StartBand

OFFSET_SECONDS = 60.0
WINDOW = 1000  # recent errors kept per ClusterQueue and kind
MIN_OBSERVATIONS = 30
# Errors a new ClusterQueue is assumed to have made: quantiles of ln(actual/raw)
# symmetric around zero, 5%..95% spanning a factor of 10 each way.
# Evenly spaced over [-a, a] with a = ln(10)/0.9, the 5% and 95% quantiles of the
# 21 values are exactly -ln(10) and ln(10).
PRIOR_ERRORS: tuple[float, ...] = tuple(
    math.log(10.0) / 0.9 * (2.0 * i / 20 - 1.0) for i in range(21)
)
LOW_Q, MID_Q, HIGH_Q = 0.05, 0.5, 0.95
# Adaptive conformal inference (docs/forecasting.md#calibration): the share of actual
# waits the band should miss, and the step of a ClusterQueue's miscoverage level per
# started forecast.
TARGET_MISS = LOW_Q + (1.0 - HIGH_Q)
GAMMA = 0.005
# The lowest level: below 0 the band stays the widest the windows give, and the misses
# made there are a debt that hits repay (GAMMA * TARGET_MISS each) before the band
# narrows, as adaptive conformal inference's update prescribes. The debt is bounded by
# what WINDOW hits repay: by then every error in the windows is one made after the
# misses, and a debt older than the windows' errors would widen bands for errors that
# no longer describe the queue (docs/forecasting.md#calibration).
ALPHA_FLOOR = -WINDOW * GAMMA * TARGET_MISS
# Upper bounds (seconds) of the raw waits that share a magnitude window: a forward run
# that says ten minutes and one that says a day are wrong by different factors. A
# magnitude window is used once it holds MIN_OBSERVATIONS errors; until then, the
# kind's window (all magnitudes) is.
MAGNITUDES: tuple[float, ...] = (600.0, 3600.0, 4 * 3600.0, 86_400.0)
# Two depths of a ClusterQueue (workloads pending in it) are similar when (depth + 1)
# of one is within this factor of the other's (docs/forecasting.md#calibration).
DEPTH_FACTOR = 1.5


@dataclass(slots=True)
class ErrorWindow:
    errors: list[float] = field(default_factory=list)  # oldest first, at most WINDOW
    # ln(depth + 1) of the ClusterQueue when each error's forecast was made, in step
    levels: list[float] = field(default_factory=list)

    def add(self, error: float, depth: int = 0) -> None:
        self.errors.append(error)
        self.levels.append(_level(depth))
        if len(self.errors) > WINDOW:
            del self.errors[: len(self.errors) - WINDOW]
            del self.levels[: len(self.levels) - WINDOW]

    def near(self, depth: int) -> list[float]:
        """The errors of forecasts made at a depth similar to `depth`."""
        level, reach = _level(depth), math.log(DEPTH_FACTOR)
        return [
            e for e, lv in zip(self.errors, self.levels, strict=True) if abs(lv - level) <= reach
        ]


@dataclass(slots=True)
class Miscoverage:
    """A ClusterQueue's adaptive miscoverage level: the band spans the quantiles
    alpha / 2 and 1 - alpha / 2 of the errors."""

    alpha: float = TARGET_MISS

    def update(self, missed: bool) -> None:
        step = GAMMA * (TARGET_MISS - (1.0 if missed else 0.0))
        # The ceiling: the windows' own 90% band, never narrower; the floor: a bounded
        # debt of misses (ALPHA_FLOOR; docs/forecasting.md#calibration says why).
        self.alpha = min(TARGET_MISS, max(ALPHA_FLOOR, self.alpha + step))

    @property
    def low_q(self) -> float:
        return min(0.5, max(0.0, self.alpha / 2.0))

    @property
    def high_q(self) -> float:
        return 1.0 - self.low_q


@dataclass(slots=True)
class Calibration:
    """Per ClusterQueue and kind ("now" for a raw wait of zero, "later" otherwise), by
    magnitude of the raw wait, each error with the depth of the queue when its forecast
    was made."""

    windows: dict[str, ErrorWindow] = field(default_factory=dict)
    levels: dict[str, Miscoverage] = field(default_factory=dict)  # per ClusterQueue

    def record(
        self,
        cluster_queue: str,
        raw_seconds: float,
        actual_seconds: float,
        depth: int = 0,
        served: StartBand | None = None,
    ) -> None:
        """The workload of a forecast, made while `depth` workloads were pending in its
        ClusterQueue, started `actual_seconds` after it was made; `served` is the band
        that forecast gave, if known (it moves the queue's miscoverage level)."""
        error = math.log((actual_seconds + OFFSET_SECONDS) / (raw_seconds + OFFSET_SECONDS))
        for slot in _slots(cluster_queue, raw_seconds):
            self.windows.setdefault(slot, ErrorWindow()).add(error, depth)
        if served is not None:
            missed = not served.low <= actual_seconds <= served.high
            self.level(cluster_queue).update(missed)

    def level(self, cluster_queue: str) -> Miscoverage:
        found = self.levels.get(cluster_queue)
        if found is None:
            found = self.levels[cluster_queue] = Miscoverage()
        return found

    def observations(self, cluster_queue: str, raw_seconds: float) -> int:
        window = self.windows.get(_slot(cluster_queue, raw_seconds))
        return 0 if window is None else len(window.errors)

    def band(self, cluster_queue: str, raw_seconds: float, depth: int = 0) -> StartBand:
        return self.at_depth(cluster_queue, depth).band(raw_seconds)

    def at_depth(self, cluster_queue: str, depth: int) -> DepthBands:
        """The bands of forecasts made now, while `depth` workloads are pending in
        `cluster_queue`: one object for all of them, which sorts each window once."""
        level = self.levels.get(cluster_queue) or Miscoverage()
        return DepthBands(self, cluster_queue, depth, level.low_q, level.high_q)


@dataclass(slots=True)
class DepthBands:
    calibration: Calibration
    cluster_queue: str
    depth: int
    # The quantiles of the band's tails: the queue's miscoverage level when this
    # object was made (the level moves only when a forecast's workload starts).
    low_q: float = LOW_Q
    high_q: float = HIGH_Q
    _sorted: dict[tuple[str, bool, bool], list[float]] = field(default_factory=dict)

    def band(self, raw_seconds: float) -> StartBand:
        """The median of the errors at a similar depth; the band covers theirs and the
        band of every depth (docs/forecasting.md#calibration)."""
        slots = _slots(self.cluster_queue, raw_seconds)
        every: list[float] = []
        for slot in reversed(slots):  # the narrowest first
            every = self._errors(slot, near=False)
            if len(every) >= MIN_OBSERVATIONS:
                break
        else:
            every = self._errors(slots[0], near=False, padded=True)
        alike = self._errors(slots[-1], near=True)
        if len(alike) < MIN_OBSERVATIONS:
            alike = self._errors(slots[-1], near=True, padded=True)
        base = raw_seconds + OFFSET_SECONDS

        def scaled(errors: list[float], q: float) -> float:
            return max(0.0, base * math.exp(_quantile(errors, q)) - OFFSET_SECONDS)

        p50 = scaled(alike, MID_Q)
        low = min(scaled(every, self.low_q), scaled(alike, self.low_q), p50)
        high = max(scaled(every, self.high_q), scaled(alike, self.high_q), p50)
        return StartBand(p50=p50, low=low, high=high)

    def _errors(self, slot: str, *, near: bool, padded: bool = False) -> list[float]:
        """A window's errors (those at a similar depth, if `near`), sorted; with the
        prior added, if `padded`."""
        key = (slot, near, padded)
        found = self._sorted.get(key)
        if found is None:
            if padded:
                found = sorted(self._errors(slot, near=near) + list(PRIOR_ERRORS))
            else:
                window = self.calibration.windows.get(slot)
                if window is None:
                    found = []
                else:
                    found = sorted(window.near(self.depth) if near else window.errors)
            self._sorted[key] = found
        return found


def _slots(cluster_queue: str, raw_seconds: float) -> tuple[str, ...]:
    """The windows a forecast's error goes to: its kind's, and (for a raw wait above
    zero) its magnitude's."""
    kind = _slot(cluster_queue, raw_seconds)
    if raw_seconds <= 0:
        return (kind,)
    bucket = sum(1 for bound in MAGNITUDES if raw_seconds > bound)
    return (kind, f"{kind}/{bucket}")


def _level(depth: int) -> float:
    return math.log(depth + 1)


def _slot(cluster_queue: str, raw_seconds: float) -> str:
    return f"{cluster_queue}/{'now' if raw_seconds <= 0 else 'later'}"


def _quantile(ordered: list[float], q: float) -> float:
    """Linear interpolation between the closest ranks of an ordered sample."""
    position = q * (len(ordered) - 1)
    lower = math.floor(position)
    upper = min(lower + 1, len(ordered) - 1)
    weight = position - lower
    return ordered[lower] * (1.0 - weight) + ordered[upper] * weight
