"""Why a workload is still pending: its last `QuotaReserved=False` condition, with the
blockers the core recorded when it set it (:mod:`scheduler.core.blockers`).

The core renders the condition's message from its blockers, so they are read, not
parsed. A condition the core did not set itself (read with the object from the API
server: a follower replica, or a leader before its first cycle after a restart) has
no record: it shows as one `Other` blocker carrying the whole message, until the core
tries the workload again.
"""

from __future__ import annotations

from scheduler.core.admission_checks import UNSATISFIED, waiting_why
from scheduler.core.blockers import Blocker, BlockerKind
from scheduler.core.workload import QUOTA_RESERVED, WorkloadState
from scheduler.runtime.workload_records import WhyPending


def why_pending(wl: WorkloadState) -> WhyPending | None:
    """The workload's last `QuotaReserved=False` condition, or None if it has none."""
    reserved = wl.conditions.get(QUOTA_RESERVED)
    if reserved is None or reserved.status != "False":
        return None
    recorded = wl.pending_why()
    blockers: tuple[Blocker, ...] = ()
    if recorded is not None:
        blockers = recorded.blockers
    elif reserved.message:
        blockers = (Blocker(BlockerKind.OTHER, reserved.message),)
    return WhyPending(
        reason=reserved.reason,
        message=reserved.message,
        since=reserved.last_transition,
        blockers=blockers,
    )


def why_waiting_for_checks(wl: WorkloadState) -> WhyPending | None:
    """A workload holding quota but not admitted yet: the admission checks it waits for,
    one `AdmissionCheck` blocker per check not Ready, with its state
    (docs/scheduling.md#admission-checks); None when it waits for nothing."""
    waiting = waiting_why(wl)
    reserved = wl.conditions.get(QUOTA_RESERVED)
    if waiting is None or reserved is None:
        return None
    return WhyPending(
        reason=UNSATISFIED,
        message=waiting.message,
        since=reserved.last_transition,
        blockers=waiting.blockers,
    )
