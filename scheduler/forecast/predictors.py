"""Runtime predictors: how long a workload will hold its quota once admitted
(docs/forecasting.md#runtime-predictors).

A predictor knows only what is known at the instant it is asked: the workload's
request (`maximumExecutionTimeSeconds`, an upper bound), how long an admitted one has
run already, and the runtimes it was shown for workloads that finished. It never
sees a workload's true runtime before that workload finishes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from scheduler.core.workload import WorkloadState
from scheduler.forecast.records import FORECAST, WALLTIME

# Without a request and without history, a workload is assumed to run this long.
DEFAULT_RUNTIME_SECONDS = 3600.0
# How many finished workloads of its LocalQueue (or of everyone) that ran longer than a
# running one has run make its conditional prediction (HistoryPredictor._survivors);
# with fewer, the user's estimate.
MIN_SURVIVORS = 5
# The runs of a template remembered for the conditional prediction of a running
# workload of that template: one of them that ran longer is enough, since the runs of
# one job script are alike (docs/forecasting.md#runtime-predictors says how 10 and 1
# were chosen).
TEMPLATE_RUNS = 10
# The label that names a workload's user; without it the namespace stands for the user.
USER_LABEL = "user"
# Templates (user, request, shape) remembered by HistoryPredictor; the least recently
# used is forgotten beyond this (a long-running worker meets ever new ones).
MAX_TEMPLATES = 50_000

# A workload's shape: per pod set, its pod count and per-pod requests.
Shape = tuple[tuple[int, tuple[tuple[str, int], ...]], ...]


@dataclass(frozen=True, slots=True)
class JobFacts:
    """What a predictor may read about a workload."""

    user: str  # the USER_LABEL label, else the namespace
    local_queue: str  # "namespace/name"
    limit_seconds: float | None  # maximumExecutionTimeSeconds left to run
    request_seconds: float | None = None  # maximumExecutionTimeSeconds as requested
    shape: Shape = ()  # what it asks for, pod set by pod set


def facts_of(wl: WorkloadState) -> JobFacts:
    limit = wl.maximum_execution_time_seconds
    return JobFacts(
        user=wl.labels.get(USER_LABEL) or wl.namespace,
        local_queue=f"{wl.namespace}/{wl.queue_name}",
        limit_seconds=None
        if limit is None
        else float(max(0, limit - wl.accumulated_execution_seconds)),
        request_seconds=None if limit is None else float(limit),
        shape=tuple((ps.count, tuple(sorted(ps.per_pod.items()))) for ps in wl.pod_sets),
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
    """Learned from finished workloads (after Tsafrir, Etsion and Feitelson 2007): how
    much of its request a user's last two workloads used, applied to this workload's
    request (a user who asks for ten hours and uses one asks for two and uses about
    twelve minutes); without a request, the average of the user's last two runtimes.
    The last two of the same *template* come first: the user's workloads with the
    same request and the same shape (pods and per-pod requests), which are most often
    runs of the same job (the templates of Gibbons 1997 and of Smith, Foster and
    Taylor 1998); the user's last two of any template when it has none.
    A running workload is predicted from the runs that lasted longer than it has run
    so far: the last TEMPLATE_RUNS of its template first, then its LocalQueue's.
    A user with no history gets the median of its LocalQueue's recent ratios (or
    runtimes), then of everyone's, then the request (or DEFAULT_RUNTIME_SECONDS).
    Capped by what is left of the request."""

    per_user: int = 2
    per_queue: int = 50
    method: str = FORECAST
    _users: dict[str, _Recent] = field(default_factory=dict)
    # The last TEMPLATE_RUNS of each template; a pending workload reads the last
    # `per_user` of them.
    _templates: dict[tuple[str, float | None, Shape], _Recent] = field(default_factory=dict)
    _queues: dict[str, _Recent] = field(default_factory=dict)
    _everyone: _Recent = field(default_factory=lambda: _Recent(200))

    def predict(self, facts: JobFacts, elapsed: float) -> float:
        base = self._base(facts)
        if elapsed > 0:
            survivors = self._survivors(facts, elapsed)
            if survivors is not None:
                base = survivors
        if facts.limit_seconds is not None:
            base = min(base, facts.limit_seconds)
        return _beyond(max(base, 1.0), elapsed, facts.limit_seconds)

    def _base(self, facts: JobFacts) -> float:
        request = facts.request_seconds
        for mine in (self._templates.get(_template(facts)), self._users.get(facts.user)):
            if mine is None:
                continue
            if request is not None and mine.ratios:
                return request * _mean_of_last(mine.ratios, self.per_user)
            if mine.runtimes:
                return _mean_of_last(mine.runtimes, self.per_user)
        for recent in (self._queues.get(facts.local_queue), self._everyone):
            if recent is None:
                continue
            if request is not None and recent.ratios:
                return request * _median(recent.ratios)
            if recent.runtimes:
                return _median(recent.runtimes)
        if facts.limit_seconds is not None:
            return facts.limit_seconds
        return DEFAULT_RUNTIME_SECONDS

    def _survivors(self, facts: JobFacts, elapsed: float) -> float | None:
        """The median total runtime of the last runs of its template that ran longer
        than `elapsed` (at least one), else of the finished workloads of its LocalQueue
        (then of everyone's) that did (at least MIN_SURVIVORS): a workload that has run
        that long is one of those. Runtimes are taken as shares of this request when it
        has one. None without enough of them."""
        request = facts.request_seconds
        for recent, enough in (
            (self._templates.get(_template(facts)), 1),
            (self._queues.get(facts.local_queue), MIN_SURVIVORS),
            (self._everyone, MIN_SURVIVORS),
        ):
            if recent is None:
                continue
            totals = (
                [request * r for r in recent.ratios]
                if request is not None and recent.ratios
                else list(recent.runtimes)
            )
            longer = [x for x in totals if x > elapsed]
            if len(longer) >= enough:
                return _median(longer)
        return None

    def observe(self, facts: JobFacts, runtime: float) -> None:
        request = facts.request_seconds
        ratio = min(1.0, runtime / request) if request else None
        template = _template(facts)
        mine = self._templates.pop(template, None) or _Recent(TEMPLATE_RUNS)
        self._templates[template] = mine  # the most recently used last
        if len(self._templates) > MAX_TEMPLATES:
            del self._templates[next(iter(self._templates))]
        for recent in (
            mine,
            self._users.setdefault(facts.user, _Recent(self.per_user)),
            self._queues.setdefault(facts.local_queue, _Recent(self.per_queue)),
            self._everyone,
        ):
            recent.add(runtime, ratio)


def _template(facts: JobFacts) -> tuple[str, float | None, Shape]:
    return (facts.user, facts.request_seconds, facts.shape)


@dataclass(slots=True)
class _Recent:
    """The last `size` runtimes, and the last `size` runtime/request ratios."""

    size: int
    runtimes: deque[float] = field(init=False)
    ratios: deque[float] = field(init=False)

    def __post_init__(self) -> None:
        self.runtimes = deque(maxlen=self.size)
        self.ratios = deque(maxlen=self.size)

    def add(self, runtime: float, ratio: float | None) -> None:
        self.runtimes.append(runtime)
        if ratio is not None:
            self.ratios.append(ratio)


def _mean_of_last(values: deque[float], count: int) -> float:
    last = list(values)[-count:]
    return sum(last) / len(last)


def _median(values: Iterable[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0
