"""Two-phase admission (docs/scheduling.md#admission-checks, KEP-993's generic contract).

A workload whose ClusterQueue names AdmissionChecks is admitted in two steps: the cycle
reserves quota (`QuotaReserved=True`) and lists every check that applies to the
flavors it got as `Pending`; the checks' controllers (outside queuescope) move each
state, and the core reacts here:

* every listed check `Ready` -> `Admitted=True`;
* a check `Retry` -> evicted (quota given back), every state reset to `Pending`,
  requeued once the latest `lastTransitionTime + requeueAfterSeconds` has passed;
* a check `Rejected` -> deactivated (`spec.active=false`), evicted if it held quota.

The controller owns a check's state; the core owns which checks are listed and the
reset to `Pending` after an eviction (`merge_controller_states` decides which side a
state read back from the API server comes from).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from scheduler.core.blockers import PendingWhy, waiting_for_checks
from scheduler.core.clock import MICROS_PER_SECOND, Instant
from scheduler.core.model import ClusterQueueInfo
from scheduler.core.pods_ready import deactivate_by_kueue
from scheduler.core.scheduler import Scheduler
from scheduler.core.workload import (
    ADMITTED,
    EVICTED,
    REQUEUED,
    Admission,
    CheckStatus,
    RequeueState,
    WorkloadState,
    reset_checks,
)

PENDING: Final = "Pending"
READY: Final = "Ready"
RETRY: Final = "Retry"
REJECTED: Final = "Rejected"
STATES: Final = (PENDING, READY, RETRY, REJECTED)

EVICTED_BY_CHECK: Final = "AdmissionCheck"  # the Evicted reason and the deactivation cause
UNSATISFIED: Final = "UnsatisfiedChecks"
UNSATISFIED_MESSAGE: Final = "The workload has not all checks ready"


def applying_checks(cq: ClusterQueueInfo, admission: Admission) -> list[str]:
    """The checks of `cq` that apply to a workload admitted with `admission`, sorted: a
    check applies when one of its flavors (all of the queue's when it names none) was
    assigned to some pod set."""
    assigned = {f for ps in admission.pod_sets for f in ps.flavors.values()}
    every = set(cq.flavor_names())
    return sorted(name for name, flavors in cq.check_flavors if assigned & (set(flavors) or every))


def list_checks(wl: WorkloadState, names: Sequence[str], now: Instant) -> None:
    """Make `status.admissionChecks` hold exactly `names`: a state already there is
    kept (a controller may have set it before the reservation), a new one is Pending."""
    known = {c.name: c for c in wl.admission_checks}
    wl.admission_checks = tuple(
        known.get(name) or CheckStatus(name=name, state=PENDING, last_transition=now)
        for name in sorted(names)
    )


def all_ready(wl: WorkloadState) -> bool:
    return all(c.state == READY for c in wl.admission_checks)


def reserve(s: Scheduler, wl: WorkloadState, cq: ClusterQueueInfo) -> bool:
    """Called by the cycle as it reserves quota for `wl` in `cq`: lists the checks that
    apply; returns whether the workload is admitted at once (no check, or all Ready)."""
    assert wl.admission is not None
    list_checks(wl, applying_checks(cq, wl.admission), s.now())
    return all_ready(wl)


def merge_controller_states(
    ours: tuple[CheckStatus, ...], theirs: Iterable[CheckStatus]
) -> tuple[CheckStatus, ...]:
    """The core's list with the states a controller wrote (read back from the server)
    taken in. The core decides which checks are listed; a listed check takes the
    server's entry unless that entry predates the core's last reset (a lower
    `retryCount`: the server has not seen the reset yet, and its old Retry must not
    evict the workload twice)."""
    found = {c.name: c for c in theirs}
    merged: list[CheckStatus] = []
    for mine in ours:
        other = found.get(mine.name)
        if other is None or (other.retry_count or 0) < (mine.retry_count or 0):
            merged.append(mine)
        else:
            merged.append(other)
    return tuple(merged)


def set_check_state(  # noqa: PLR0913 - one entry of status.admissionChecks, named at every call
    s: Scheduler,
    key: str,
    name: str,
    state: str,
    message: str = "",
    requeue_after_seconds: int | None = None,
    pod_set_updates: Sequence[dict[str, Any]] = (),
) -> bool:
    """What a check's controller does: set the state of check `name` on workload `key`
    (listing it if the core has not yet). Returns whether the workload exists."""
    wl = s._workloads.get(key)
    if wl is None:
        return False
    now = s.now()
    checks = {c.name: c for c in wl.admission_checks}
    old = checks.get(name)
    transition = now if old is None or old.state != state else old.last_transition
    checks[name] = CheckStatus(
        name=name,
        state=state,
        last_transition=transition,
        message=message,
        requeue_after_seconds=requeue_after_seconds,
        retry_count=old.retry_count if old is not None else None,
        pod_set_updates=tuple(pod_set_updates),
    )
    wl.admission_checks = tuple(checks[n] for n in sorted(checks))
    reconcile_checks(s, wl)
    return True


def checks_message(checks: Sequence[CheckStatus], state: str) -> str:
    """Kueue's wording: `AdmissionCheck in Retry state: "a" (message); "b"`."""
    parts = [
        f'"{c.name}" ({c.message})' if c.message else f'"{c.name}"'
        for c in sorted(checks, key=lambda c: c.name)
    ]
    noun = "AdmissionChecks" if len(checks) > 1 else "AdmissionCheck"
    return f"{noun} in {state} state: {'; '.join(parts)}"


def reconcile_checks(s: Scheduler, wl: WorkloadState) -> None:
    """React to the workload's check states (after a controller changed one)."""
    if not wl.admission_checks or not wl.active or wl.finished:
        return
    rejected = [c for c in wl.admission_checks if c.state == REJECTED]
    if rejected:
        deactivate_by_kueue(s, wl, EVICTED_BY_CHECK, detail=checks_message(rejected, REJECTED))
        return
    evicted = wl.conditions.is_true(EVICTED)
    retry = [c for c in wl.admission_checks if c.state == RETRY]
    if retry:
        if not evicted:
            _retry(s, wl, retry)
        return
    if not wl.holds_quota or evicted:
        return
    _sync_admitted(wl, s.now())


def _sync_admitted(wl: WorkloadState, now: Instant) -> None:
    """`Admitted` of a workload holding quota, from its listed checks: True once every
    one is Ready (at once with none), False again if one leaves Ready."""
    ready = all_ready(wl)
    admitted = wl.conditions.is_true(ADMITTED)
    if ready and not admitted:
        wl.conditions.set(ADMITTED, "True", "Admitted", "The workload is admitted", now)
        wl.revision += 1
    elif admitted and not ready:
        # A check went back to Pending: no longer admitted, the time so far counts.
        since = wl.conditions.get(ADMITTED)
        if since is not None:
            wl.accumulated_execution_seconds += (now - since.last_transition) // MICROS_PER_SECOND
        wl.conditions.set(ADMITTED, "False", UNSATISFIED, UNSATISFIED_MESSAGE, now)
        wl.revision += 1


def sync_listed_checks(s: Scheduler, cluster_queue: str) -> list[str]:
    """After ClusterQueue `cluster_queue` changed: each workload holding quota in it lists
    exactly the checks that now apply (a new one `Pending`, a dropped one removed), and
    its `Admitted` follows (docs/scheduling.md#admission-checks); a workload waiting only
    on a check the queue no longer names is admitted. Returns the keys changed."""
    cq = s._cluster_queues.get(cluster_queue)
    if cq is None:
        return []
    now = s.now()
    changed: list[str] = []
    for key in s._holders.keys(cluster_queue):
        wl = s._workloads.get(key)
        if wl is None or wl.admission is None or wl.finished or not wl.active:
            continue
        names = applying_checks(cq, wl.admission)
        if [c.name for c in wl.admission_checks] == names:
            continue
        list_checks(wl, names, now)
        wl.revision += 1
        if not wl.conditions.is_true(EVICTED):
            _sync_admitted(wl, now)
        changed.append(key)
    return changed


def _retry(s: Scheduler, wl: WorkloadState, retry: list[CheckStatus]) -> None:
    now = s.now()
    message = f"Evicted due to {checks_message(retry, RETRY)}"
    why = waiting_for_checks(message, [(c.name, c.state) for c in retry])
    delays = [
        c.last_transition + c.requeue_after_seconds * MICROS_PER_SECOND
        for c in retry
        if c.requeue_after_seconds is not None
    ]
    until = max(delays, default=None)
    if until is not None and until > now:
        rs = wl.requeue_state or RequeueState()
        if rs.requeue_at is None or rs.requeue_at < until:
            rs.requeue_at = until
        wl.requeue_state = rs
    if wl.holds_quota:
        s.evict(wl, EVICTED_BY_CHECK, message, why=why)
        return
    # Not holding quota (a controller said Retry before the reservation): the same
    # eviction, with nothing to give back.
    wl.conditions.set(EVICTED, "True", EVICTED_BY_CHECK, message, now)
    wl.admission_checks = reset_checks(wl.admission_checks, now)
    wl.conditions.set(REQUEUED, "False", EVICTED_BY_CHECK, message, now)
    s.finish_backoff_if_due(wl)
    wl.set_pending("Pending", why, now)
    wl.revision += 1
    if s._feed is not None:
        s._feed.evicted(wl.key)
    s.sync_workload(wl)


def waiting_why(wl: WorkloadState) -> PendingWhy | None:
    """Why a workload holding quota is not admitted yet: the checks not Ready, with
    their states (None when it is admitted or holds no quota)."""
    if not wl.holds_quota or wl.is_admitted:
        return None
    waiting = [(c.name, c.state) for c in wl.admission_checks if c.state != READY]
    if not waiting:
        return None
    names = ", ".join(f"{name} ({state})" for name, state in waiting)
    return waiting_for_checks(f"Waiting for admission checks: {names}", waiting)
