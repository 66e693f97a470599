"""Wait estimates: admission velocity per ClusterQueue, the waits it gives, and the
start forecasts the worker serves.

The engine reports every admission with the instant it happened (the scheduler's
clock, so tests drive it with a manual clock); publishing freezes each ClusterQueue's
state into an immutable :class:`AdmissionVelocity` that the snapshot carries and the
server evaluates at request time (`docs/dashboard.md` describes the method).

The decayed rate itself is pure and lives in `scheduler/forecast/rate.py`, shared with
the simulator's rate forecasts. The rate is an exponentially decayed count over an
exponentially decayed window with the same time constant: an admission `t` seconds
ago weighs `exp(-t/tau)`, and so does a second of observation `t` seconds ago. Their
ratio is the recent admission rate; a queue observed for less than `tau` is not
penalised for the time before it existed, and the window never counts less than
`min_window_seconds`, so the burst of admissions at start-up does not read as a
sustained rate.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from scheduler.forecast.rate import DecayedRate, decayed, rate_wait
from scheduler.runtime.workload_records import Instant

MICROS = 1_000_000


@dataclass(frozen=True, slots=True)
class WaitEstimate:
    """When a pending workload may be admitted, with a 90% interval (docs/dashboard.md)."""

    seconds: float  # the point estimate: (position + 1) / rate
    low_seconds: float
    high_seconds: float
    admissions_per_hour: float
    effective_admissions: float  # how much evidence the rate rests on


@dataclass(frozen=True, slots=True)
class AdmissionVelocity:
    """A ClusterQueue's exponentially decayed admission rate, frozen at `at`.

    `weight` is the decayed number of admissions and `window_seconds` the decayed
    length of observation, both with time constant `tau_seconds`; the rate at a
    later instant decays both without new admissions, so a queue that stopped
    admitting slows down in the estimate as time passes, without a new snapshot.
    """

    at: Instant
    weight: float
    window_seconds: float
    tau_seconds: float
    min_window_seconds: float = 0.0

    def state(self, now: Instant) -> tuple[float, float]:
        """(decayed admissions, decayed window in seconds) at `now`."""
        seconds = max(0.0, (now - self.at) / MICROS)
        weight, window = decayed(self.weight, self.window_seconds, seconds, self.tau_seconds)
        return weight, max(window, self.min_window_seconds)

    def rate(self, now: Instant) -> float:
        """Admissions per second at `now`."""
        weight, window = self.state(now)
        return weight / window if window > 0 else 0.0

    def estimate(self, position: int, now: Instant) -> WaitEstimate | None:
        """The wait of the workload at 0-based `position`; None while the decayed count
        of admissions is below one (nothing admitted yet, or not recently). The model
        is the rate method's (docs/forecasting.md#the-rate-method)."""
        weight, window = self.state(now)
        found = rate_wait(weight, window, position)
        if found is None:
            return None
        return WaitEstimate(
            seconds=found.mean_seconds,
            low_seconds=found.low_seconds,
            high_seconds=found.high_seconds,
            admissions_per_hour=found.rate * 3600.0,
            effective_admissions=weight,
        )


@dataclass(frozen=True, slots=True)
class ServedForecast:
    """A pending workload's start forecast as the forecast worker published it
    (docs/forecasting.md#serving): absolute instants, the method, and the instant and
    snapshot generation it was made from."""

    method: str
    made_at: Instant
    generation: int
    p50: Instant
    low: Instant
    high: Instant


DEFAULT_TAU_SECONDS = 300.0
DEFAULT_MIN_WINDOW_SECONDS = 60.0


class AdmissionRates:
    """Decayed admission rates of ClusterQueues, fed by the engine."""

    def __init__(
        self,
        *,
        tau_seconds: float = DEFAULT_TAU_SECONDS,
        min_window_seconds: float = DEFAULT_MIN_WINDOW_SECONDS,
    ) -> None:
        if tau_seconds <= 0:
            raise ValueError("tau_seconds must be positive")
        self.tau_seconds = tau_seconds
        self.min_window_seconds = max(0.0, min_window_seconds)
        self._rates: dict[str, DecayedRate] = {}

    def track(self, cluster_queue: str, now: Instant) -> None:
        """Start observing `cluster_queue` at `now` (its window opens then)."""
        self._rates.setdefault(cluster_queue, DecayedRate(now))

    def observe(self, cluster_queue: str, at: Instant, count: int = 1) -> None:
        """`count` workloads were admitted to `cluster_queue` at `at`."""
        rate = self._rates.setdefault(cluster_queue, DecayedRate(at))
        rate.advance(at, self.tau_seconds)
        rate.weight += count

    def velocity(self, cluster_queue: str) -> AdmissionVelocity | None:
        """The frozen state of one ClusterQueue; None if it was never tracked."""
        rate = self._rates.get(cluster_queue)
        if rate is None:
            return None
        return AdmissionVelocity(
            at=rate.at,
            weight=rate.weight,
            window_seconds=rate.window_seconds,
            tau_seconds=self.tau_seconds,
            min_window_seconds=self.min_window_seconds,
        )

    def velocities(
        self, cluster_queues: Iterable[str], now: Instant
    ) -> dict[str, AdmissionVelocity]:
        """Frozen states of the given ClusterQueues (tracked from `now` if new); the
        others are forgotten. O(#ClusterQueues); unchanged states compare equal, so a
        publish without admissions sees no change here."""
        names = set(cluster_queues)
        for gone in [name for name in self._rates if name not in names]:
            del self._rates[gone]
        out: dict[str, AdmissionVelocity] = {}
        for name in sorted(names):
            self.track(name, now)
            velocity = self.velocity(name)
            assert velocity is not None
            out[name] = velocity
        return out
