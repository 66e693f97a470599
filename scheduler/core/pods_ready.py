"""Timed rules: waitForPodsReady timeouts and requeue backoff
(docs/scheduling.md#waiting-for-pods-ready), maximum execution time and Kueue-initiated deactivation
(docs/scheduling.md#deactivation).

Every rule is a deadline computed from the workload's conditions, so nothing needs
a timer object: the driver asks for the next deadline, moves its clock there, and
fires what is due, in (time, workload key) order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from scheduler.core.clock import MICROS_PER_SECOND, Instant
from scheduler.core.scheduler import Scheduler
from scheduler.core.workload import (
    ADMITTED,
    DEACTIVATION_TARGET,
    EVICTED,
    PODS_READY,
    PODS_READY_TIMEOUT_REASON,
    REQUEUED,
    RequeueState,
    WorkloadState,
    reset_checks,
)

BACKOFF = "backoff"
PODS_READY_TIMEOUT = "podsReadyTimeout"
MAX_EXECUTION = "maximumExecutionTime"

_DEACTIVATION_MESSAGES = {
    "RequeuingLimitExceeded": "exceeding the maximum number of re-queuing retries",
    "MaximumExecutionTimeExceeded": "exceeding the maximum execution time",
}


@dataclass(frozen=True, slots=True, order=True)
class Deadline:
    at: Instant
    key: str
    rule: str


def deadlines(s: Scheduler, wl: WorkloadState) -> list[Deadline]:
    out: list[Deadline] = []
    rs = wl.requeue_state
    if (
        rs is not None
        and rs.requeue_at is not None
        and wl.active
        and not wl.finished
        and not wl.holds_quota
    ):
        out.append(Deadline(rs.requeue_at, wl.key, BACKOFF))
    if not wl.active or wl.finished or not wl.is_admitted:
        return out
    if wl.conditions.is_true(EVICTED):
        return out
    admitted = wl.conditions.get(ADMITTED)
    assert admitted is not None
    cfg = s.config.wait_for_pods_ready
    if cfg.enable:
        ready = wl.conditions.get(PODS_READY)
        if ready is None or (ready.status != "True" and ready.reason == "WaitForStart"):
            out.append(
                Deadline(admitted.last_transition + cfg.timeout_micros, wl.key, PODS_READY_TIMEOUT)
            )
        elif (
            ready.status == "False"
            and ready.reason == "WaitForRecovery"
            and cfg.recovery_timeout_micros is not None
        ):
            out.append(
                Deadline(
                    ready.last_transition + cfg.recovery_timeout_micros, wl.key, PODS_READY_TIMEOUT
                )
            )
    if wl.maximum_execution_time_seconds is not None:
        budget = wl.maximum_execution_time_seconds - wl.accumulated_execution_seconds
        out.append(
            Deadline(admitted.last_transition + budget * MICROS_PER_SECOND, wl.key, MAX_EXECUTION)
        )
    return out


def _watched(s: Scheduler, keys: Iterable[str] | None) -> Iterator[WorkloadState]:
    """All workloads, or only `keys`: a runtime that tracks which workloads can have a
    deadline avoids walking 100k pending ones on every tick."""
    if keys is None:
        yield from s._workloads.values()
        return
    for key in keys:
        wl = s._workloads.get(key)
        if wl is not None:
            yield wl


def next_deadline(s: Scheduler, keys: Iterable[str] | None = None) -> Instant | None:
    """The earliest deadline strictly after now."""
    now = s.now()
    future = [d.at for wl in _watched(s, keys) for d in deadlines(s, wl) if d.at > now]
    return min(future) if future else None


def fire_due(s: Scheduler, keys: Iterable[str] | None = None) -> int:
    """Fire every deadline at or before now, earliest first; returns how many fired."""
    now = s.now()
    due = sorted(d for wl in _watched(s, keys) for d in deadlines(s, wl) if d.at <= now)
    fired = 0
    for d in due:
        wl = s._workloads.get(d.key)
        if wl is None:
            continue
        # An earlier deadline of this pass may have changed the workload; re-check.
        if d not in deadlines(s, wl):
            continue
        if d.rule == BACKOFF:
            _finish_backoff(s, wl)
        elif d.rule == PODS_READY_TIMEOUT:
            _pods_ready_timeout(s, wl)
        else:
            deactivate_by_kueue(s, wl, "MaximumExecutionTimeExceeded")
        fired += 1
    return fired


def _finish_backoff(s: Scheduler, wl: WorkloadState) -> None:
    now = s.now()
    wl.conditions.set(REQUEUED, "True", "BackoffFinished", "The workload backoff was finished", now)
    if wl.requeue_state is not None:
        wl.requeue_state.requeue_at = None
    wl.revision += 1
    s.sync_workload(wl)


def backoff_delay_seconds(s: Scheduler, attempt: int) -> int:
    """docs/scheduling.md#backoff-formula: min(base × 2^(n−1), max), no jitter (D5)."""
    cfg = s.config.wait_for_pods_ready
    delay: int = cfg.backoff_base_seconds * (1 << (attempt - 1))
    return min(delay, cfg.backoff_max_seconds)


def _pods_ready_timeout(s: Scheduler, wl: WorkloadState) -> None:
    cfg = s.config.wait_for_pods_ready
    count = wl.requeue_state.count if wl.requeue_state and wl.requeue_state.count else 0
    if cfg.backoff_limit_count is not None and count + 1 > cfg.backoff_limit_count:
        deactivate_by_kueue(s, wl, "RequeuingLimitExceeded")
        return
    attempt = count + 1
    delay = backoff_delay_seconds(s, attempt) * MICROS_PER_SECOND
    wl.requeue_state = RequeueState(count=attempt, requeue_at=s.now() + delay)
    s.evict(wl, PODS_READY_TIMEOUT_REASON, f"Exceeded the PodsReady timeout {wl.key}")


def deactivate_by_kueue(
    s: Scheduler, wl: WorkloadState, reason: str, detail: str | None = None
) -> None:
    """docs/scheduling.md#deactivation: DeactivationTarget, then spec.active=false and an eviction
    that says why (`detail`, else the reason's own wording)."""
    now = s.now()
    detail = detail or _DEACTIVATION_MESSAGES[reason]
    wl.conditions.set(DEACTIVATION_TARGET, "True", reason, detail, now)
    wl.active = False
    wl.revision += 1
    message = f"The workload is deactivated due to {detail}"
    if wl.holds_quota:
        s.evict(wl, f"DeactivatedDueTo{reason}", message)
    else:
        wl.conditions.set(EVICTED, "True", f"DeactivatedDueTo{reason}", message, now)
        wl.admission_checks = reset_checks(wl.admission_checks, now)
        s._queues.delete(wl.key)
    wl.conditions.remove(DEACTIVATION_TARGET)
    wl.requeue_state = None


def admission_blocked(s: Scheduler) -> bool:
    """docs/scheduling.md#blocking-admission: some quota holder, anywhere, lacks PodsReady=True."""
    cfg = s.config.wait_for_pods_ready
    if not (cfg.enable and cfg.block_admission):
        return False
    return any(
        wl.holds_quota and not wl.conditions.is_true(PODS_READY)
        for key in s._holders.all_keys()
        if (wl := s._workloads.get(key)) is not None
    )
