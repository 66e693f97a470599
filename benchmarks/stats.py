"""Summaries of timing samples: nearest-rank percentiles, medians, ratios.

Nearest rank (the smallest sample with at least p% of the samples at or below it) is
used everywhere, so a p99 is always a latency that was actually observed.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def percentile(samples: Sequence[float], p: float) -> float:
    """The nearest-rank p-th percentile (0 < p <= 100) of `samples`."""
    if not samples:
        raise ValueError("percentile of no samples")
    if not 0 < p <= 100:
        raise ValueError(f"percentile must be in (0, 100], got {p}")
    ordered = sorted(samples)
    rank = math.ceil(p / 100 * len(ordered))
    return ordered[max(rank, 1) - 1]


def summary(samples: Sequence[float]) -> dict[str, float]:
    """count, p50, p90, p99, max and mean of `samples` (empty: count 0 only)."""
    if not samples:
        return {"count": 0}
    return {
        "count": len(samples),
        "p50": percentile(samples, 50),
        "p90": percentile(samples, 90),
        "p99": percentile(samples, 99),
        "max": max(samples),
        "mean": statistics.fmean(samples),
    }


def ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator, infinite when the denominator is zero."""
    return math.inf if denominator == 0 else numerator / denominator


def median(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("median of no values")
    return float(statistics.median(values))
