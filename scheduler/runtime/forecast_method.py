"""What a forecast method sees and returns, and the methods: `forecast` and `walltime`
(the core run forward, `forecast_forward.py`) and `rate` (docs/forecasting.md#serving).

A method runs in the forecast worker (`forecast_worker.py`), a separate process, on a
:class:`ForecastInput`: the pending order of every ClusterQueue as the published
snapshot it was made from shows it, with each ClusterQueue's admission rate and the
quota tree. It returns, for the pending workloads it can say something about, a
:class:`Band` of start times in seconds after `made_at`. The worker gives the workloads
it leaves out the `rate` estimate where there is one (`FALLBACK_METHOD`). After a
workload has started, the worker hands the method what was forecast for it and when it
really started (:meth:`ForecastMethod.observe`), so a method can calibrate itself on its
own errors.

A method is named by a string (`--forecast-method`) and made in the worker by
:func:`make_method`, so the worker can be spawned without pickling one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Protocol

from scheduler.forecast.fork import Setup
from scheduler.runtime.estimates import AdmissionVelocity
from scheduler.runtime.quota_snapshot import EMPTY_QUOTA, QuotaSnapshot
from scheduler.runtime.workload_records import (
    FinishedWorkload,
    Instant,
    RunningWorkload,
    WorkloadFacts,
    WorkloadKey,
)

RATE: Final = "rate"
FORECAST: Final = "forecast"
DEFAULT_METHOD: Final = FORECAST  # docs/forecasting.md#which-method-by-default
# What the worker serves for a workload the method said nothing about: a forward run cut
# by its budget, or one before the first configuration (docs/forecasting.md#fallback).
FALLBACK_METHOD: Final = RATE


@dataclass(frozen=True, slots=True)
class Band:
    """A start-time distribution: its median and 90% band, in seconds after `made_at`."""

    p50: float
    low: float  # the 5% quantile
    high: float  # the 95% quantile


@dataclass(frozen=True, slots=True)
class QueueOrder:
    """One ClusterQueue's pending workloads in its order, and its admission rate."""

    order: Sequence[WorkloadKey]
    velocity: AdmissionVelocity | None = None
    # What the core needs of each, in the same order (None where it was not captured).
    facts: Sequence[WorkloadFacts | None] = ()


@dataclass(frozen=True, slots=True)
class ForecastInput:
    """The state a forecast is made from: one published snapshot."""

    generation: int  # the snapshot's generation
    made_at: Instant  # µs since the epoch, the scheduler's clock when it was taken
    queues: Mapping[str, QueueOrder] = field(default_factory=lambda: MappingProxyType({}))
    quota: QuotaSnapshot = EMPTY_QUOTA
    # For the methods that run the core forward: the configuration (None until the
    # first snapshot that carries one), the quota holders, and the finishes the worker
    # has not been shown before (oldest first).
    setup: Setup | None = None
    running: Sequence[RunningWorkload] = ()
    finished: Sequence[FinishedWorkload] = ()
    # Wall seconds a forward run may take before it stops where it got to (None: no
    # limit; docs/forecasting.md#when-the-run-is-cut).
    budget_seconds: float | None = None
    # How many pending workloads a forward run models at most, the first of each
    # ClusterQueue (None: all; docs/forecasting.md#how-deep-the-run-looks).
    budget_workloads: int | None = None


@dataclass(frozen=True, slots=True)
class Observation:
    """A workload started: what was forecast for it, and when it really started."""

    cluster_queue: str
    key: WorkloadKey
    made_at: Instant
    band: Band
    started_at: Instant


class ForecastMethod(Protocol):
    """A forecast method, made once per worker process and kept while it lives."""

    @property
    def name(self) -> str: ...

    def forecast(self, state: ForecastInput) -> Iterator[tuple[WorkloadKey, Band]]:
        """Bands of the pending workloads of `state`, in any order, lazily: the worker
        sends them in batches as they come."""
        ...

    def observe(self, observation: Observation) -> None:
        """A forecast met the truth (calibration); methods that do not learn ignore it."""
        ...


def rate_bands(
    state: ForecastInput, wanted: Callable[[WorkloadKey], bool] | None = None
) -> Iterator[tuple[WorkloadKey, Band]]:
    """Today's estimate (docs/dashboard.md#estimated-wait): position over the decayed
    admission rate of the ClusterQueue, with a log-normal 90% band whose median is the
    band's geometric middle; for the `wanted` workloads only, if given. A ClusterQueue
    with too few recent admissions gets none."""
    for _, queue in sorted(state.queues.items()):
        velocity = queue.velocity
        if velocity is None:
            continue
        for position, key in enumerate(queue.order):
            if wanted is not None and not wanted(key):
                continue
            estimate = velocity.estimate(position, state.made_at)
            if estimate is None:
                break  # the evidence does not depend on the position
            low, high = estimate.low_seconds, estimate.high_seconds
            yield key, Band(math.sqrt(low * high), low, high)


class RateMethod:
    """The rate estimate for every pending workload (:func:`rate_bands`)."""

    name = RATE

    def forecast(self, state: ForecastInput) -> Iterator[tuple[WorkloadKey, Band]]:
        return rate_bands(state)

    def observe(self, observation: Observation) -> None:
        """The rate is re-measured from admissions on the loop; nothing to learn here."""


def _forward(name: str) -> Callable[[], ForecastMethod]:
    def make() -> ForecastMethod:
        # Imported here: the forward methods import this module's types.
        from scheduler.runtime.forecast_forward import ForwardMethod  # noqa: PLC0415 - a cycle

        return ForwardMethod(name)

    return make


METHODS: dict[str, Callable[[], ForecastMethod]] = {
    FORECAST: _forward(FORECAST),
    "walltime": _forward("walltime"),
    RATE: RateMethod,
}


def make_method(name: str) -> ForecastMethod:
    factory = METHODS.get(name)
    if factory is None:
        known = ", ".join(sorted(METHODS))
        raise ValueError(f"unknown forecast method {name!r} (known: {known})")
    return factory()
