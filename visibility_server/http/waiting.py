"""Why a pending workload waits and when it may be admitted, as JSON (docs/dashboard.md).

Shared by the [EXT] `pendingposition` lookup and the dashboard. Estimates are
evaluated at the request's instant rounded down to `ESTIMATE_STEP_SECONDS`, so that a
poller's ETag stays the same for that long when nothing else moved: the estimate of a
queue without admissions decays with time, not only with snapshots.
"""

from __future__ import annotations

from typing import Any, Final

from scheduler.runtime.estimates import MICROS, AdmissionVelocity, ServedForecast
from scheduler.runtime.workload_records import Instant, WhyPending
from visibility_server.http.timestamps import rfc3339_seconds

ESTIMATE_STEP_SECONDS: Final = 10
ESTIMATE_METHOD: Final = "DecayedAdmissionRate"


def estimate_instant(now_seconds: float) -> Instant:
    """The instant estimates are evaluated at: `now` rounded down to the step."""
    step = int(now_seconds) // ESTIMATE_STEP_SECONDS * ESTIMATE_STEP_SECONDS
    return step * MICROS


def estimated_wait(
    velocity: AdmissionVelocity | None, position: int, now: Instant
) -> dict[str, Any] | None:
    """`estimatedWait` of the workload at `position` of its ClusterQueue, or None when
    the ClusterQueue has too few recent admissions to estimate from."""
    estimate = velocity.estimate(position, now) if velocity is not None else None
    if estimate is None:
        return None
    return {
        "seconds": round(estimate.seconds),
        "lowSeconds": round(estimate.low_seconds),
        "highSeconds": round(estimate.high_seconds),
        "admissionsPerHour": round(estimate.admissions_per_hour, 2),
        "effectiveAdmissions": round(estimate.effective_admissions, 1),
        "method": ESTIMATE_METHOD,
    }


def estimated_start(forecast: ServedForecast) -> dict[str, Any]:
    """`estimatedStart`: the start band the forecast worker made, with the instant and
    the snapshot it was made from, so a reader can tell how old it is
    (docs/visibility-api.md#pending-position)."""
    return {
        "p50": rfc3339_seconds(forecast.p50),
        "low": rfc3339_seconds(forecast.low),
        "high": rfc3339_seconds(forecast.high),
        "method": forecast.method,
        "madeAt": rfc3339_seconds(forecast.made_at),
        "snapshot": forecast.generation,
    }


def why_pending(why: WhyPending) -> dict[str, Any]:
    """`whyPending`: the last `QuotaReserved=False` condition and what it names."""
    blockers = []
    for b in why.blockers:
        blocker: dict[str, Any] = {"kind": b.kind}
        for key, value in (
            ("flavor", b.flavor),
            ("resource", b.resource),
            ("amount", b.amount),
            ("check", b.check),
            ("state", b.state),
        ):
            if value:
                blocker[key] = value
        blocker["message"] = b.message
        blockers.append(blocker)
    return {
        "reason": why.reason,
        "message": why.message,
        "lastTransitionTime": rfc3339_seconds(why.since),
        "blockers": blockers,
    }
