"""The core's own record of a workload: what it asks for and the status the core writes.

The API object (pydantic, immutable) is the input; everything the scheduler decides
lives here, in plain mutable dataclasses that the status writer renders back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

import orjson

from scheduler.core.blockers import PendingWhy
from scheduler.core.clock import Instant
from scheduler.core.conditions import Conditions

# Condition types and reasons (docs/scheduling.md#conditions).
QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
EVICTED = "Evicted"
# The Evicted reason of waitForPodsReady's timeout (docs/scheduling.md#waiting-for-pods-ready).
PODS_READY_TIMEOUT_REASON = "PodsReadyTimeout"
PREEMPTED = "Preempted"
REQUEUED = "Requeued"
PODS_READY = "PodsReady"
FINISHED = "Finished"
# A pod group misses Pods (docs/cluster.md#pod-groups): not queued while True.
WAITING_FOR_REPLACEMENT_PODS = "WaitingForReplacementPods"
# The QuotaReserved=False reason of a workload its owner put on hold (a StatefulSet
# scaled to zero, docs/cluster.md#statefulsets): not queued until the hold is lifted.
ON_HOLD = "OnHold"
DEACTIVATION_TARGET = "DeactivationTarget"

JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"


@dataclass(slots=True)
class PodSetSpec:
    """One pod set of a workload with its per-pod requests in scheduler values."""

    name: str
    count: int
    min_count: int | None
    per_pod: dict[str, int]
    pod_spec: dict[str, Any]  # camelCase pod spec, for affinity and toleration matching
    tolerations: list[dict[str, Any]]
    limits_exceeded: list[str]


EMPTY_MAPPING: Mapping[Any, Any] = MappingProxyType({})


class OwnerRef(NamedTuple):
    """One owner reference as listings show it. A tuple, so the core's and the
    snapshots' copies are the same object: a pending workload stores it once."""

    api_version: str
    kind: str
    name: str
    uid: str


class StoredObject:
    """The API object a workload was built from, as output shows it, in little memory.

    Holds the object's camelCase JSON without its status (the core renders status) and
    with `spec.podSets` left as a placeholder, plus the pod sets' JSON, which is shared
    by every workload of the same shape (ingest interns it). `to_json()` gives back
    exactly the dict `model_dump(mode="json", by_alias=True, exclude_none=True)` gave,
    key order included. The owner references are kept ready for listings.

    Only the simulator's output shows the object. The runtime keeps the owner
    references alone, not in a StoredObject but as the tuple itself
    (`WorkloadState.raw`): half a kilobyte less per pending workload than the object,
    and 56 bytes less than a wrapper around the tuple (docs/benchmarks.md, "Memory of
    a decoded workload").
    """

    __slots__ = ("_body", "_pod_sets", "owners")

    def __init__(
        self,
        body: dict[str, Any] | None,
        pod_sets: bytes,
        owners: tuple[OwnerRef, ...],
    ):
        self._body: bytes | dict[str, Any] | None = None
        if body is not None:
            spec = body.get("spec")
            if isinstance(spec, dict) and "podSets" in spec:
                spec["podSets"] = None  # placeholder: keeps the key's position
            try:
                # A copy: orjson returns its whole (4 KiB) write buffer.
                self._body = bytes(memoryview(orjson.dumps(body)))
            except TypeError:  # an integer beyond 64 bits: keep the dict itself
                self._body = body
        self._pod_sets = pod_sets
        self.owners = owners

    @property
    def kept(self) -> bool:
        """Whether the object itself was kept (and `to_json()` can give it back)."""
        return self._body is not None

    def to_json(self) -> dict[str, Any]:
        body = self._body
        if body is None:
            raise LookupError("only the owner references of this object were kept")
        data: dict[str, Any] = orjson.loads(body) if isinstance(body, bytes) else _copy(body)
        spec = data.get("spec")
        if isinstance(spec, dict) and "podSets" in spec:
            spec["podSets"] = orjson.loads(self._pod_sets)
        return data


# What a workload keeps of its API object: the object (the simulator) or only its owner
# references (the runtime; the empty tuple is one object, so a workload without owners
# keeps nothing of its own).
Kept = StoredObject | tuple[OwnerRef, ...]


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


@dataclass(slots=True)
class PodSetAssignment:
    name: str
    flavors: dict[str, str]  # resource -> flavor
    resource_usage: dict[str, int]  # resource -> total for `count` pods
    count: int


@dataclass(slots=True)
class Admission:
    cluster_queue: str
    pod_sets: list[PodSetAssignment]


@dataclass(frozen=True, slots=True)
class CheckStatus:
    """One entry of `status.admissionChecks` (docs/scheduling.md#admission-checks). The
    check's controller owns `state`, `message`, `requeue_after_seconds` and the pod set
    updates; the core owns which checks are listed and the reset after a Retry."""

    name: str
    state: str  # Pending | Ready | Retry | Rejected
    last_transition: Instant
    message: str = ""
    requeue_after_seconds: int | None = None
    retry_count: int | None = None
    pod_set_updates: tuple[dict[str, Any], ...] = ()  # camelCase JSON, never mutated


@dataclass(slots=True)
class RequeueState:
    count: int | None = None
    requeue_at: Instant | None = None


@dataclass(slots=True)
class LastAssignment:
    """Where the flavor scan stopped last time (docs/scheduling.md#flavor-scan-resumption), per (pod
    set index, resource)."""

    tried_flavor_idx: dict[tuple[int, str], int]
    generation: int

    def has_untried_flavors(self) -> bool:
        return any(idx != -1 for idx in self.tried_flavor_idx.values())


@dataclass(slots=True)
class WorkloadState:
    namespace: str
    name: str
    uid: str
    creation: Instant
    labels: Mapping[str, str]  # read-only (ingest shares one empty mapping)
    queue_name: str
    priority: int
    priority_class_name: str
    priority_class_source: str
    active: bool
    pod_sets: tuple[PodSetSpec, ...]  # shared between workloads: never mutated
    maximum_execution_time_seconds: int | None = None
    accumulated_execution_seconds: int = 0
    # status
    conditions: Conditions = field(default_factory=Conditions)
    admission: Admission | None = None
    requeue_state: RequeueState | None = None
    reclaimable: Mapping[str, int] = field(default_factory=dict)  # read-only
    resource_requests: list[tuple[str, dict[str, int]]] | None = None
    finished: bool = False
    admission_checks: tuple[CheckStatus, ...] = ()  # sorted by name
    # bookkeeping, never rendered
    revision: int = 0
    last_assignment: LastAssignment | None = None
    # The key of the workload whose admission last preempted this one (the cluster
    # side's Preempted and PreemptedWorkload Events name it, docs/cluster.md#events).
    preempted_by: str | None = None
    # The blockers of the last QuotaReserved=False condition the core set (its message
    # is rendered from them); a condition read from elsewhere has none here.
    why: PendingWhy | None = None
    raw: Kept | None = None  # the object as last applied (spec/metadata output), see Kept
    # "namespace/name", made once: the scheduler's maps and queues all hold this one
    # string. namespace and name are a workload's identity and are never reassigned
    # (make a renamed copy with dataclasses.replace, which computes the key again).
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.key = f"{self.namespace}/{self.name}"

    def sibling(self, name: str, uid: str, creation: Instant) -> WorkloadState:
        """Another workload made from the same template (same spec, shared pod sets),
        never tried: its own identity and key, and a fresh condition set."""
        return dataclasses.replace(
            self, name=name, uid=uid, creation=creation, conditions=Conditions()
        )

    @property
    def holds_quota(self) -> bool:
        # A finished workload has given its quota back (docs/scheduling.md#finishing-and-deletion),
        # whatever its status says.
        return (
            self.admission is not None
            and self.conditions.is_true(QUOTA_RESERVED)
            and not self.finished
        )

    @property
    def on_hold(self) -> bool:
        reserved = self.conditions.get(QUOTA_RESERVED)
        return reserved is not None and reserved.status == "False" and reserved.reason == ON_HOLD

    def queue_signature(self) -> tuple[object, ...]:
        """What a queue reacts to (docs/scheduling.md#queue-structures): spec, reclaimable pods,
        Evicted and Requeued."""

        def cond(type_: str) -> tuple[str, str] | None:
            c = self.conditions.get(type_)
            return None if c is None else (c.status, c.reason)

        spec = (
            self.queue_name,
            self.priority,
            self.priority_class_name,
            self.priority_class_source,
            self.active,
            self.maximum_execution_time_seconds,
            tuple(
                (
                    ps.name,
                    ps.count,
                    ps.min_count,
                    tuple(sorted(ps.per_pod.items())),
                    repr(ps.pod_spec),
                )
                for ps in self.pod_sets
            ),
        )
        return (spec, tuple(sorted(self.reclaimable.items())), cond(EVICTED), cond(REQUEUED))

    def set_pending(self, reason: str, why: PendingWhy, now: Instant) -> bool:
        """Set `QuotaReserved=False` with the message rendered from `why`; returns
        whether anything observable changed."""
        self.why = why
        return self.conditions.set(QUOTA_RESERVED, "False", reason, why.message, now)

    def pending_why(self) -> PendingWhy | None:
        """The blockers of the current `QuotaReserved=False` condition, if the core set
        it (None when it is not False, or came with the object from elsewhere)."""
        reserved = self.conditions.get(QUOTA_RESERVED)
        why = self.why
        if reserved is None or reserved.status != "False" or why is None:
            return None
        return why if reserved.message == why.message else None

    @property
    def is_admitted(self) -> bool:
        return self.admission is not None and self.conditions.is_true(ADMITTED)

    @property
    def job_uid(self) -> str:
        return self.labels.get(JOB_UID_LABEL, "UNKNOWN") or "UNKNOWN"

    def current_count(self, pod_set: PodSetSpec) -> int:
        return pod_set.count - self.reclaimable.get(pod_set.name, 0)

    def queue_order_timestamp(self, eviction_ordering: bool) -> Instant:
        """docs/scheduling.md#queue-order-timestamp: evicted-by-timeout (Eviction strategy) or by
        admission check, else creation."""
        evicted = self.conditions.get(EVICTED)
        if evicted is not None and evicted.is_true:
            if evicted.reason == PODS_READY_TIMEOUT_REASON and eviction_ordering:
                return evicted.last_transition
            if evicted.reason == "AdmissionCheck":
                return evicted.last_transition
        return self.creation


def reset_checks(checks: tuple[CheckStatus, ...], now: Instant) -> tuple[CheckStatus, ...]:
    """Every check back to Pending after an eviction (docs/scheduling.md#admission-checks),
    saying what it was; a Retry counts one more retry."""
    out: list[CheckStatus] = []
    for c in checks:
        if c.state == "Pending":
            out.append(c)
            continue
        retries = (c.retry_count or 0) + 1 if c.state == "Retry" else None
        out.append(
            CheckStatus(
                name=c.name,
                state="Pending",
                last_transition=now,
                message=f"Reset to Pending after eviction. Previously: {c.state}",
                requeue_after_seconds=c.requeue_after_seconds,
                retry_count=retries,
            )
        )
    return tuple(out)


def pod_set_totals(pod_set: PodSetSpec, count: int) -> dict[str, int]:
    return {r: v * count for r, v in pod_set.per_pod.items()}


def scale_totals(totals: dict[str, int], old_count: int, new_count: int) -> dict[str, int]:
    """docs/scheduling.md#quantities: divide by the old count first, then multiply, exactly as
    upstream does."""
    if old_count in {0, new_count}:
        return dict(totals)
    return {r: v // old_count * new_count for r, v in totals.items()}
