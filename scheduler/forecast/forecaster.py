"""The forecaster: one method, its learned state, and the calibrated bands
(docs/forecasting.md).

Two callers, one API:

- the simulator's `--record-forecasts` asks at each arrival instant for the
  workloads that arrived then (`forecast(s, targets)`), and reports what happened
  (`observe_admitted`, `observe_finished`, `observe_start`);
- the serving worker asks for every pending workload at once (`forecast(s)`) on a
  Scheduler it rebuilt from a snapshot, and reports the same observations from the
  snapshots that follow.

Everything it learns arrives through the `observe_*` calls, so a caller that feeds it
only the past gets forecasts that depend only on the past.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from scheduler.core.clock import MICROS_PER_SECOND, Instant, ManualClock
from scheduler.core.scheduler import Scheduler
from scheduler.core.visibility import pending_workloads
from scheduler.core.workload import WorkloadState
from scheduler.forecast.calibration import Calibration
from scheduler.forecast.forward import DEFAULT_HORIZON_SECONDS, forward_run, pending_keys
from scheduler.forecast.predictors import (
    HistoryPredictor,
    RuntimePredictor,
    WalltimePredictor,
    facts_of,
)
from scheduler.forecast.rate import DecayedRate, rate_wait
from scheduler.forecast.records import FORECAST, METHODS, RATE, WALLTIME, WaitForecast

DEFAULT_TAU_SECONDS = 300.0  # the runtime's admission rate time constant


@dataclass(slots=True)
class Forecaster:
    method: str = FORECAST
    horizon_seconds: float = DEFAULT_HORIZON_SECONDS
    tau_seconds: float = DEFAULT_TAU_SECONDS
    calibration: Calibration = field(default_factory=Calibration)
    predictor: RuntimePredictor = field(init=False)
    rates: dict[str, DecayedRate] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"unknown forecast method {self.method!r}; one of {METHODS}")
        self.predictor = WalltimePredictor() if self.method == WALLTIME else HistoryPredictor()

    # ------------------------------------------------------------ observations
    def observe_admitted(self, cluster_queue: str, at: Instant) -> None:
        """A workload was admitted to `cluster_queue` (the rate method's input)."""
        rate = self.rates.setdefault(cluster_queue, DecayedRate(at))
        rate.advance(at, self.tau_seconds)
        rate.weight += 1.0

    def observe_finished(self, wl: WorkloadState, runtime_seconds: float) -> None:
        """A workload finished after holding its quota `runtime_seconds`."""
        self.predictor.observe(facts_of(wl), runtime_seconds)

    def observe_start(self, forecast: WaitForecast, actual_seconds: float) -> None:
        """The workload of `forecast` reserved quota `actual_seconds` after it was made."""
        self.calibration.record(
            forecast.cluster_queue,
            _raw(forecast, self),
            actual_seconds,
            forecast.queue_depth,
            served=forecast.band,
        )

    # -------------------------------------------------------------- forecasts
    def forecast(
        self,
        s: Scheduler,
        targets: Collection[str] | None = None,
        *,
        consume: ManualClock | None = None,
        out_of_time: Callable[[], bool] | None = None,
    ) -> dict[str, WaitForecast]:
        """Forecasts for `targets` (default: every pending workload) that are pending
        in a ClusterQueue; `s` is not changed, unless `consume` is given: then `s` is a
        throwaway state on that clock and is run forward itself (no copy). A forward
        run cut by `out_of_time` leaves out the targets it had not seen start
        (docs/forecasting.md#when-the-run-is-cut)."""
        wanted = pending_keys(s) if targets is None else sorted(targets)
        queued = {k: cq for k in wanted if (cq := s.queues.locate(k)) is not None}
        if not queued:
            return {}
        now = s.now()
        # The calibration of each queue at its depth now, read before `consume` runs
        # the state forward.
        bands = {
            cq: self.calibration.at_depth(cq, queue_depth(s, cq)) for cq in set(queued.values())
        }
        if self.method == RATE:
            raw = self._rate_waits(s, queued, now)
        else:
            run = forward_run(
                s,
                self.predictor,
                list(queued),
                horizon_seconds=self.horizon_seconds,
                clock=consume,
                out_of_time=out_of_time,
            )
            raw = run.waits
            if run.cut:
                queued = {k: cq for k, cq in queued.items() if k in raw}
        out: dict[str, WaitForecast] = {}
        for key, cq in queued.items():
            seconds = raw.get(key)
            basis = self.horizon_seconds if seconds is None else seconds
            out[key] = WaitForecast(
                key=key,
                cluster_queue=cq,
                band=bands[cq].band(basis),
                method=self.method,
                made_at=now,
                raw_seconds=seconds,
                queue_depth=bands[cq].depth,
            )
        return out

    def _rate_waits(self, s: Scheduler, queued: dict[str, str], now: Instant) -> dict[str, float]:
        waits: dict[str, float] = {}
        for cq in sorted(set(queued.values())):
            rate = self.rates.get(cq)
            if rate is None:
                continue
            rate.advance(now, self.tau_seconds)
            window = max(rate.window_seconds, 60.0)
            for item in pending_workloads(s, cq):
                key = f"{item.namespace}/{item.name}"
                if key not in queued:
                    continue
                found = rate_wait(rate.weight, window, item.position_in_cluster_queue)
                if found is not None:
                    waits[key] = found.mean_seconds
        return waits


def queue_depth(s: Scheduler, cluster_queue: str) -> int:
    """Workloads pending in `cluster_queue` (queued, parked or being tried)."""
    queue = s.queues.queue(cluster_queue)
    return 0 if queue is None else len(queue)


def _raw(forecast: WaitForecast, forecaster: Forecaster) -> float:
    return forecaster.horizon_seconds if forecast.raw_seconds is None else forecast.raw_seconds


def seconds_between(earlier: Instant, later: Instant) -> float:
    return (later - earlier) / MICROS_PER_SECOND
