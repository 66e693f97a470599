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
from scheduler.core.blockers import Blocker, BlockerKind, PendingWhy
from scheduler.core.workload import QUOTA_RESERVED, WorkloadState
from scheduler.runtime.workload_records import WhyPending


class _SharedBlockers:
    """The blockers of the record read last, as one tuple. A cycle records one
    `PendingWhy` for all the workloads it finds blocked the same way (the nomination
    cache), and the publisher reads them one after the other: so they share one tuple
    instead of a new one per workload (docs/benchmarks.md, "Cluster-mode memory")."""

    def __init__(self) -> None:
        self._record: PendingWhy | None = None
        self._blockers: tuple[Blocker, ...] = ()

    def of(self, record: PendingWhy) -> tuple[Blocker, ...]:
        if record is not self._record:
            self._record, self._blockers = record, record.blockers
        return self._blockers


_shared_blockers = _SharedBlockers()


def why_pending(wl: WorkloadState) -> WhyPending | None:
    """The workload's last `QuotaReserved=False` condition, or None if it has none."""
    reserved = wl.conditions.get(QUOTA_RESERVED)
    if reserved is None or reserved.status != "False":
        return None
    recorded = wl.pending_why()
    blockers: tuple[Blocker, ...] = ()
    if recorded is not None:
        blockers = _shared_blockers.of(recorded)
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
