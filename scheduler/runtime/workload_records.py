"""The per-workload records a published snapshot carries.

A :class:`PendingEntry` is one pending workload as the visibility API shows it, built
once per workload revision and shared by every snapshot until the workload changes;
:class:`WorkloadFacts`, :class:`RunningWorkload` and :class:`FinishedWorkload` are what
the forecast worker runs the core forward with (docs/forecasting.md#what-the-worker-is-fed);
:class:`NotPending` is the position lookup's answer for a workload that exists but is
not pending (docs/visibility-api.md#pending-position).
All are immutable after they are built.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import StrEnum

from scheduler.core.blockers import Blocker
from scheduler.core.workload import Admission, OwnerRef, PodSetSpec

Instant = int  # microseconds since the epoch, as in the core
LocalQueueKey = tuple[str, str]  # (namespace, name)
WorkloadKey = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True, slots=True)
class WhyPending:
    """The last `QuotaReserved=False` condition of a pending workload, with its blockers."""

    reason: str  # the condition's reason: Pending, Inadmissible, Waiting, ...
    message: str
    since: Instant  # the condition's lastTransitionTime
    blockers: tuple[Blocker, ...] = ()


class NotPendingReason(StrEnum):
    """The `reason` of a `pendingposition` answer with `pending: false`."""

    QUOTA_RESERVED = "QuotaReserved"
    FINISHED = "Finished"
    INACTIVE = "Inactive"
    LOCAL_QUEUE_NOT_FOUND = "LocalQueueNotFound"
    LOCAL_QUEUE_STOPPED = "LocalQueueStopped"
    CLUSTER_QUEUE_NOT_FOUND = "ClusterQueueNotFound"


@dataclass(frozen=True, slots=True)
class NotPending:
    """A Workload that exists and is not queued: why, and its queues where known
    (the runtime classifies it, the position lookup renders it as it is)."""

    reason: NotPendingReason
    creation: Instant | None = None  # when known
    cluster_queue: str = ""  # "" when unknown
    local_queue: str = ""  # "" when unknown
    # QuotaReserved and not admitted yet: the admission checks it waits for.
    why: WhyPending | None = None


@dataclass(frozen=True, slots=True)
class WorkloadFacts:
    """What the forecast worker needs of a workload to run the core forward with it
    (docs/forecasting.md#what-the-worker-is-fed). `pod_sets` is the core's own tuple,
    which the core never mutates (it replaces it), so sharing it copies nothing."""

    uid: str
    local_queue: str
    priority: int
    order_timestamp: Instant  # the queue's ordering instant (creation, or an eviction)
    pod_sets: tuple[PodSetSpec, ...]
    maximum_execution_time_seconds: int | None
    accumulated_execution_seconds: int
    user: str  # the label the runtime predictors key on ("" without it)
    requeue_count: int | None = None
    requeue_at: Instant | None = None  # the end of a requeue backoff


@dataclass(frozen=True, slots=True)
class RunningWorkload:
    """A workload holding quota, as the forecast worker needs it: what it holds and
    since when (the time it has already run)."""

    namespace: str
    name: str
    admission: Admission  # the core's own record, replaced (never mutated) on change
    admitted_at: Instant  # the QuotaReserved transition
    pods_ready: bool
    facts: WorkloadFacts


@dataclass(frozen=True, slots=True)
class FinishedWorkload:
    """A workload that finished after holding quota `runtime_seconds` (what the
    runtime predictors learn from); `seq` numbers finishes in the order seen."""

    seq: int
    namespace: str
    name: str
    runtime_seconds: float
    facts: WorkloadFacts


@dataclass(frozen=True, slots=True)
class PendingEntry:
    """One pending workload as visibility shows it; built once per workload revision.

    Its last `QuotaReserved=False` condition is kept in three fields of its own beside
    the message, not as a :class:`WhyPending` (a 64-byte object per pending workload,
    docs/benchmarks.md "Cluster-mode memory"): `why` makes one when read.
    """

    namespace: str
    name: str
    creation: Instant
    owners: tuple[OwnerRef, ...]
    priority: int
    local_queue: str
    why_pending: str = ""  # the last QuotaReserved=False message, for the position lookup
    fingerprint: bytes = field(default=b"", compare=False)
    # The same condition's reason, lastTransitionTime (None before the first attempt)
    # and parsed blockers. Like `why_pending`, not part of the fingerprint (it does not
    # move the order), so lookups that show it hash it into their ETag themselves.
    why_reason: str = ""
    why_since: Instant | None = None
    why_blockers: tuple[Blocker, ...] = ()
    # What the forecast worker runs the core with; None where nobody captured it (tests).
    facts: WorkloadFacts | None = None
    # (namespace, name), made once: every map of a snapshot keyed by workload (chunk
    # indexes, cells, the workload -> ClusterQueue map) shares this one tuple.
    key: WorkloadKey = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", (self.namespace, self.name))

    @property
    def why(self) -> WhyPending | None:
        """The last `QuotaReserved=False` condition with its blockers; None before the
        first attempt."""
        if self.why_since is None:
            return None
        return WhyPending(self.why_reason, self.why_pending, self.why_since, self.why_blockers)

    @staticmethod
    def make(  # noqa: PLR0913 - the entry's own fields; it derives the fingerprint
        namespace: str,
        name: str,
        creation: Instant,
        owners: tuple[OwnerRef, ...],
        priority: int,
        local_queue: str,
        why_pending: str = "",
        why: WhyPending | None = None,
        facts: WorkloadFacts | None = None,
    ) -> PendingEntry:
        """The entry, its fingerprint derived; with `why`, the message is its message."""
        h = hashlib.blake2b(digest_size=8)
        for part in (namespace, name, str(creation), str(priority), local_queue):
            h.update(part.encode())
            h.update(b"\0")
        for o in owners:
            for part in (o.api_version, o.kind, o.name, o.uid):
                h.update(part.encode())
                h.update(b"\1")
        return PendingEntry(
            namespace,
            name,
            creation,
            owners,
            priority,
            local_queue,
            why.message if why is not None else why_pending,
            h.digest(),
            why.reason if why is not None else "",
            why.since if why is not None else None,
            why.blockers if why is not None else (),
            facts,
        )

    @property
    def local_queue_key(self) -> LocalQueueKey:
        return (self.namespace, self.local_queue)
