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
# Upper bounds (seconds) of the raw waits that share a magnitude window: a forward run
# that says ten minutes and one that says a day are wrong by different factors. A
# magnitude window is used once it holds MIN_OBSERVATIONS errors; until then, the
# kind's window (all magnitudes) is.
MAGNITUDES: tuple[float, ...] = (600.0, 3600.0, 4 * 3600.0, 86_400.0)


@dataclass(slots=True)
class ErrorWindow:
    errors: list[float] = field(default_factory=list)  # oldest first, at most WINDOW

    def add(self, error: float) -> None:
        self.errors.append(error)
        if len(self.errors) > WINDOW:
            del self.errors[: len(self.errors) - WINDOW]


@dataclass(slots=True)
class Calibration:
    """Per ClusterQueue and kind ("now" for a raw wait of zero, "later" otherwise)."""

    windows: dict[str, ErrorWindow] = field(default_factory=dict)

    def record(self, cluster_queue: str, raw_seconds: float, actual_seconds: float) -> None:
        """The workload of a forecast started `actual_seconds` after it was made."""
        error = math.log((actual_seconds + OFFSET_SECONDS) / (raw_seconds + OFFSET_SECONDS))
        for slot in _slots(cluster_queue, raw_seconds):
            self.windows.setdefault(slot, ErrorWindow()).add(error)

    def observations(self, cluster_queue: str, raw_seconds: float) -> int:
        window = self.windows.get(_slot(cluster_queue, raw_seconds))
        return 0 if window is None else len(window.errors)

    def band(self, cluster_queue: str, raw_seconds: float) -> StartBand:
        errors: list[float] = []
        for slot in reversed(_slots(cluster_queue, raw_seconds)):  # the narrowest first
            window = self.windows.get(slot)
            if window is not None and len(window.errors) >= MIN_OBSERVATIONS:
                errors = list(window.errors)
                break
        else:
            window = self.windows.get(_slot(cluster_queue, raw_seconds))
            errors = (list(window.errors) if window is not None else []) + list(PRIOR_ERRORS)
        errors.sort()
        base = raw_seconds + OFFSET_SECONDS

        def scaled(q: float) -> float:
            return max(0.0, base * math.exp(_quantile(errors, q)) - OFFSET_SECONDS)

        low, p50, high = scaled(LOW_Q), scaled(MID_Q), scaled(HIGH_Q)
        return StartBand(p50=p50, low=min(low, p50), high=max(high, p50))


def _slots(cluster_queue: str, raw_seconds: float) -> tuple[str, ...]:
    """The windows a forecast's error goes to: its kind's, and (for a raw wait above
    zero) its magnitude's."""
    kind = _slot(cluster_queue, raw_seconds)
    if raw_seconds <= 0:
        return (kind,)
    bucket = sum(1 for bound in MAGNITUDES if raw_seconds > bound)
    return (kind, f"{kind}/{bucket}")


def _slot(cluster_queue: str, raw_seconds: float) -> str:
    return f"{cluster_queue}/{'now' if raw_seconds <= 0 else 'later'}"


def _quantile(ordered: list[float], q: float) -> float:
    """Linear interpolation between the closest ranks of an ordered sample."""
    position = q * (len(ordered) - 1)
    lower = math.floor(position)
    upper = min(lower + 1, len(ordered) - 1)
    weight = position - lower
    return ordered[lower] * (1.0 - weight) + ordered[upper] * weight
