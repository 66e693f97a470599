"""The live calibration of served forecasts (docs/operations.md#forecasts).

When a workload starts (the cycle reserves quota for it), the runtime takes the
forecast that was being served for it at that moment and records, per ClusterQueue
and method: one more forecast checked, whether the start fell inside the 90% band, and
how far the p50 was from it. `/metrics` exports these as counters and a histogram.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Final

from scheduler.runtime.estimates import MICROS, ServedForecast
from scheduler.runtime.workload_records import Instant

# Upper bounds (seconds) of the p50 error histogram: a second to a day.
ERROR_BUCKETS: Final = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
                        7200.0, 21600.0, 86400.0)  # fmt: skip


@dataclass(slots=True)
class QueueCalibration:
    """What one ClusterQueue's served forecasts of one method scored."""

    checked: int = 0  # forecasts whose workload has started
    in_band: int = 0  # of those, started between low and high
    early: int = 0  # started before low
    error_sum: float = 0.0  # sum of |start - p50| in seconds
    # per ERROR_BUCKETS bound, the errors at or below it and above the one before;
    # the last slot counts the errors above every bound
    error_counts: list[int] = field(default_factory=lambda: [0] * (len(ERROR_BUCKETS) + 1))

    @property
    def coverage(self) -> float:
        return self.in_band / self.checked if self.checked else 0.0


class LiveCalibration:
    """Scores per (ClusterQueue, method); fed on the loop, read by /metrics."""

    def __init__(self) -> None:
        self._scores: dict[tuple[str, str], QueueCalibration] = {}

    def record(self, cluster_queue: str, forecast: ServedForecast, started_at: Instant) -> None:
        score = self._scores.get((cluster_queue, forecast.method))
        if score is None:
            score = self._scores[(cluster_queue, forecast.method)] = QueueCalibration()
        score.checked += 1
        if forecast.low <= started_at <= forecast.high:
            score.in_band += 1
        elif started_at < forecast.low:
            score.early += 1
        error = abs(started_at - forecast.p50) / MICROS
        score.error_sum += error
        score.error_counts[bisect.bisect_left(ERROR_BUCKETS, error)] += 1

    def scores(self) -> list[tuple[str, str, QueueCalibration]]:
        """(ClusterQueue, method, score), sorted; the scores are live: read, not keep."""
        return [(cq, method, score) for (cq, method), score in sorted(self._scores.items())]
