"""Runtime predictors: how long a workload will hold its quota once admitted
(docs/forecasting.md#runtime-predictors).

A predictor knows only what is known at the instant it is asked: the workload's
request (`maximumExecutionTimeSeconds`, an upper bound), how long an admitted one has
run already, and the runtimes it was shown for workloads that finished. It never
sees a workload's true runtime before that workload finishes.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Protocol

from scheduler.core.workload import WorkloadState
from scheduler.forecast.records import FORECAST, WALLTIME

# Without a request and without history, a workload is assumed to run this long.
DEFAULT_RUNTIME_SECONDS = 3600.0
# The label that names a workload's user; without it the namespace stands for the user.
USER_LABEL = "user"


@dataclass(frozen=True, slots=True)
class JobFacts:
    """What a predictor may read about a workload."""

    user: str  # the USER_LABEL label, else the namespace
    local_queue: str  # "namespace/name"
    limit_seconds: float | None  # maximumExecutionTimeSeconds


def facts_of(wl: WorkloadState) -> JobFacts:
    limit = wl.maximum_execution_time_seconds
    return JobFacts(
        user=wl.labels.get(USER_LABEL) or wl.namespace,
        local_queue=f"{wl.namespace}/{wl.queue_name}",
        limit_seconds=None
        if limit is None
        else float(max(0, limit - wl.accumulated_execution_seconds)),
    )


class RuntimePredictor(Protocol):
    method: str

    def predict(self, facts: JobFacts, elapsed: float) -> float:
        """Total runtime in seconds of a workload that has run `elapsed` seconds so far
        (0 for a pending one); always more than `elapsed`."""
        ...

    def observe(self, facts: JobFacts, runtime: float) -> None:
        """A workload finished after running `runtime` seconds."""
        ...


def _beyond(predicted: float, elapsed: float, limit: float | None) -> float:
    """A workload that has outrun its prediction: it is expected to run half as long
    again as it has so far (never past its limit, always a little more than now)."""
    if predicted > elapsed:
        return predicted
    longer = elapsed * 1.5 + 60.0
    if limit is not None and limit > elapsed:
        longer = min(longer, limit)
    return max(longer, elapsed + 1.0)


@dataclass(slots=True)
class WalltimePredictor:
    """The Slurm-style estimate: every workload runs for its requested
    maximumExecutionTimeSeconds; without one, DEFAULT_RUNTIME_SECONDS."""

    default_seconds: float = DEFAULT_RUNTIME_SECONDS
    method: str = WALLTIME

    def predict(self, facts: JobFacts, elapsed: float) -> float:
        base = facts.limit_seconds if facts.limit_seconds is not None else self.default_seconds
        return _beyond(base, elapsed, facts.limit_seconds)

    def observe(self, facts: JobFacts, runtime: float) -> None:
        del facts, runtime  # the request alone decides


@dataclass(slots=True)
class HistoryPredictor:
    """Learned from finished workloads (Tsafrir, Etsion and Feitelson 2007): the
    average of the user's last two runtimes, capped by the request; a user with no
    history gets the median of the LocalQueue's recent runtimes, then of everyone's,
    then the request (or DEFAULT_RUNTIME_SECONDS)."""

    per_user: int = 2
    per_queue: int = 50
    method: str = FORECAST
    _users: dict[str, deque[float]] = field(default_factory=dict)
    _queues: dict[str, deque[float]] = field(default_factory=dict)
    _everyone: deque[float] = field(default_factory=lambda: deque(maxlen=200))

    def predict(self, facts: JobFacts, elapsed: float) -> float:
        base = self._base(facts)
        if facts.limit_seconds is not None:
            base = min(base, facts.limit_seconds)
        return _beyond(max(base, 1.0), elapsed, facts.limit_seconds)

    def _base(self, facts: JobFacts) -> float:
        mine = self._users.get(facts.user)
        if mine:
            return sum(mine) / len(mine)
        queue = self._queues.get(facts.local_queue)
        for recent in (queue, self._everyone):
            if recent:
                return _median(recent)
        if facts.limit_seconds is not None:
            return facts.limit_seconds
        return DEFAULT_RUNTIME_SECONDS

    def observe(self, facts: JobFacts, runtime: float) -> None:
        self._users.setdefault(facts.user, deque(maxlen=self.per_user)).append(runtime)
        self._queues.setdefault(facts.local_queue, deque(maxlen=self.per_queue)).append(runtime)
        self._everyone.append(runtime)


def _median(values: deque[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0
