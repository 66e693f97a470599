"""The rate method: a pending workload waits for as many admissions as there are
workloads ahead of it, at its ClusterQueue's recent admission rate
(docs/forecasting.md#the-rate-method; docs/dashboard.md shows it as `estimatedWait`).

Pure: the runtime's admission rates (`scheduler/runtime/estimates.py`), the published
snapshot's estimate and the simulator's `--forecast-method rate` share these.

The rate is an exponentially decayed count over an exponentially decayed window with
the same time constant: an admission `t` seconds ago weighs `exp(-t/tau)`, and so does
a second of observation `t` seconds ago. Their ratio is the recent admission rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scheduler.core.clock import MICROS_PER_SECOND, Instant

# A 90% interval: 5% of the mass below `low`, 5% above `high`.
Z90 = 1.6448536269514722
# Below one effective admission the rate is a guess: no estimate is better than one.
# From one on, the wait's variation is at most sqrt(2) and the interval holds the mean.
MIN_EVIDENCE = 1.0


@dataclass(slots=True)
class DecayedRate:
    """The decayed admissions (`weight`) and window (`window_seconds`) at `at`."""

    at: Instant
    weight: float = 0.0
    window_seconds: float = 0.0

    def advance(self, now: Instant, tau: float) -> None:
        if now <= self.at:
            return
        seconds = (now - self.at) / MICROS_PER_SECOND
        self.weight, self.window_seconds = decayed(self.weight, self.window_seconds, seconds, tau)
        self.at = now


def decayed(
    weight: float, window_seconds: float, seconds: float, tau: float
) -> tuple[float, float]:
    """`weight` and `window_seconds` after `seconds` more of observation without an
    admission: both decay by `exp(-seconds/tau)`, and the window gains the decayed
    length of the new observation."""
    decay = math.exp(-seconds / tau)
    return weight * decay, window_seconds * decay + tau * (1.0 - decay)


@dataclass(frozen=True, slots=True)
class RateWait:
    mean_seconds: float  # (position + 1) / rate
    low_seconds: float
    high_seconds: float
    rate: float  # admissions per second


def rate_wait(weight: float, window_seconds: float, position: int) -> RateWait | None:
    """The wait of the workload at 0-based `position`, given `weight` decayed
    admissions over `window_seconds`; None while the evidence is below MIN_EVIDENCE.

    Model: the workload needs `position + 1` more admissions; admissions arrive as
    a Poisson process at the decayed rate. The wait's coefficient of variation
    combines that process (1/k for k admissions) and the rate's own uncertainty
    (1/n for n effective admissions observed); the interval is the 5% and 95%
    quantiles of a log-normal with that mean and variation.
    """
    if weight < MIN_EVIDENCE or window_seconds <= 0.0:
        return None
    rate = weight / window_seconds
    k = position + 1
    mean = k / rate
    cv2 = 1.0 / k + 1.0 / weight
    sigma = math.sqrt(math.log1p(cv2))
    mu = math.log(mean) - sigma * sigma / 2.0
    return RateWait(
        mean_seconds=mean,
        low_seconds=math.exp(mu - Z90 * sigma),
        high_seconds=math.exp(mu + Z90 * sigma),
        rate=rate,
    )
