"""Kueue's `objectRetentionPolicies` in cluster mode (docs/cluster.md#object-retention).

`afterFinished`: a Workload whose `Finished` condition has been True that long is
deleted, whoever owns it. `afterDeactivatedByKueue`: a Workload that Kueue's rules
deactivated (`spec.active: false`, evicted for a `DeactivatedDueTo…` reason, not a user's
plain `Deactivated`) has its batch/v1 Job deleted that long after the eviction, with
background propagation: the Job's Pods and its Workload go with it. Both count from the
condition's `lastTransitionTime`, as the server holds it.

Each delete carries preconditions (the uid, and for a Workload the resourceVersion it was
judged at): an object that changed or was replaced meanwhile is not deleted, and its next
watch event judges it again. Only the leader runs this; its deletes take from the
leader's token bucket like every other write.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from scheduler.api.base import parse_timestamp
from scheduler.api.config import ObjectRetentionPolicies
from scheduler.kubeapi.errors import Json, KubeError
from scheduler.runtime.kube.events import Event, Regarding
from scheduler.runtime.kube.leader_io import LeaderIO
from scheduler.runtime.kube.records import Cached, WorkloadRecord
from scheduler.runtime.kube.resources import JOBS, PODS, WORKLOADS, Resource

log = logging.getLogger(__name__)

FINISHED: Final = "Finished"
EVICTED: Final = "Evicted"
# Kueue's reasons for an eviction its own rules decided ("DeactivatedDueToRequeuingLimit
# Exceeded", ...); a user's `spec.active: false` is plain "Deactivated".
DEACTIVATED_BY_KUEUE_PREFIX: Final = "DeactivatedDueTo"
# Kueue's finalizer on the Workloads it admitted; one left by Kueue before the switch
# would keep a deleted Workload Terminating for ever, since nothing here removes it.
KUEUE_FINALIZER: Final = "kueue.x-k8s.io/resource-in-use"
# Workloads judged at a time when leadership starts (about a millisecond each slice).
START_SLICE: Final = 1000


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """How long after finishing, and after Kueue's deactivation, things are deleted
    (None: never)."""

    after_finished: timedelta | None = None
    after_deactivated_by_kueue: timedelta | None = None

    @classmethod
    def of(cls, policies: ObjectRetentionPolicies | None) -> RetentionPolicy | None:
        """The policy the Configuration gives; None when it deletes nothing."""
        workloads = policies.workloads if policies is not None else None
        if workloads is None:
            return None
        policy = cls(
            _micros(workloads.after_finished), _micros(workloads.after_deactivated_by_kueue)
        )
        return policy if policy != cls() else None


def _micros(value: int | None) -> timedelta | None:
    return None if value is None else timedelta(microseconds=value)


@dataclass(frozen=True, slots=True)
class Deletion:
    """One object to delete, from when, and why (for the log)."""

    resource: Resource
    namespace: str
    name: str
    uid: str
    resource_version: str | None  # a precondition beside the uid, when known
    due: datetime
    why: str

    @property
    def path(self) -> str:
        return self.resource.item(self.name, self.namespace)

    def event(self) -> Event:
        """What the delete says on the object, in Kueue's words."""
        regarding = Regarding.of(self.resource, self.namespace, self.name, self.uid)
        if self.resource is WORKLOADS:
            return Event(regarding, "Deleted", "Deleted finished workload due to elapsed retention")
        return Event(regarding, "Deleted", "Deleted job: deactivation retention period expired")

    def options(self) -> Json:
        """The DeleteOptions: background propagation and the preconditions."""
        preconditions: Json = {"uid": self.uid}
        if self.resource_version is not None:
            preconditions["resourceVersion"] = self.resource_version
        return {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": "Background",
            "preconditions": preconditions,
        }


def deletion_of(record: WorkloadRecord, policy: RetentionPolicy) -> Deletion | None:
    """What `policy` deletes because of this Workload, and when; None for nothing."""
    finished = record.condition(FINISHED)
    if finished is not None:
        # A finished Workload is never judged for its deactivation (as upstream, where
        # the Job integration stops at a finished Job).
        since = _since(finished)
        if policy.after_finished is None or since is None:
            return None
        return Deletion(
            WORKLOADS,
            record.namespace,
            record.name,
            record.uid,
            record.resource_version,
            since + policy.after_finished,
            "finished",
        )
    if policy.after_deactivated_by_kueue is None or record.active:
        return None
    evicted = record.condition(EVICTED)
    if evicted is None or not str(evicted.get("reason", "")).startswith(
        DEACTIVATED_BY_KUEUE_PREFIX
    ):
        return None
    since = _since(evicted)
    # The object of an integration queuescope has: a batch/v1 Job or a plain Pod.
    owned = [(r, o) for r in (JOBS, PODS) if (o := record.owner(r)) is not None]
    if since is None or not owned:
        return None
    resource, owner = owned[0]
    return Deletion(
        resource,
        record.namespace,
        owner.name,
        owner.uid,
        None,
        since + policy.after_deactivated_by_kueue,
        "deactivated by Kueue",
    )


def _since(condition: Json) -> datetime | None:
    """The condition's lastTransitionTime; None when it has no valid one (the CRD
    requires it: such an object is left alone rather than deleted at once)."""
    try:
        return parse_timestamp(condition.get("lastTransitionTime"))
    except ValueError:
        return None


@dataclass(slots=True)
class RetentionStats:
    """Deletes by outcome, each named as its `result` label in
    queuescope_retention_deletes_total."""

    workload: int = 0  # finished Workloads deleted
    job: int = 0  # Jobs deactivated by Kueue deleted
    pod: int = 0  # plain Pods deactivated by Kueue deleted
    conflict: int = 0  # changed or replaced since judged: judged again at its next event
    error: int = 0  # tried again after `retry_delay`


def _wall_now() -> datetime:
    return datetime.now(UTC)


class RetentionController:
    """Deletes what the policy says when it comes due. Keeps one deadline per Workload
    that has one, in a heap; a Workload's new state replaces its deadline, and an entry
    whose deadline was replaced is skipped when it comes up."""

    def __init__(
        self,
        io: LeaderIO,
        policy: RetentionPolicy,
        *,
        wall: Callable[[], datetime] = _wall_now,
        retry_delay: float = 1.0,
    ) -> None:
        self.io = io
        self.policy = policy
        self.wall = wall
        self.retry_delay = retry_delay
        self.stats = RetentionStats()
        self._heap: list[tuple[datetime, str]] = []
        self._due: dict[str, datetime] = {}  # workload key -> its current deadline
        self._wake = asyncio.Event()
        self._running = False
        io.store.subscribe(self.on_change)

    @property
    def scheduled(self) -> int:
        """How many Workloads have a deletion to come."""
        return len(self._due)

    def on_change(self, resource: Resource, new: Cached | None, old: Cached | None) -> None:
        # A deleted Workload's entry is skipped when it comes due: its record is gone.
        if self._running and isinstance(new, WorkloadRecord):
            self._consider(new)

    async def run(self) -> None:
        """Judge every Workload the store holds, then delete as deadlines come, until
        cancelled (leadership lost)."""
        await self.start()
        try:
            while True:
                await self._sleep(await self.step())
        finally:
            self.stop()

    async def start(self) -> None:
        """Judge every Workload the store holds, and from now on each new state. The
        first look goes in slices, giving the loop back between them; each Workload is
        read again when its turn comes, since events meanwhile may have changed it."""
        self._running = True
        keys = [record.key for record in self.io.store.workloads()]
        for offset in range(0, len(keys), START_SLICE):
            if offset:
                await asyncio.sleep(0)
            for key in keys[offset : offset + START_SLICE]:
                record = self.io.store.workload(key)
                if record is not None:
                    self._consider(record)

    def stop(self) -> None:
        self._running = False
        self._heap.clear()
        self._due.clear()

    async def step(self) -> float | None:
        """Delete what is due now; the seconds until the next deadline (None: none)."""
        now = self.wall()
        while self._heap and self._heap[0][0] <= now:
            due, key = heapq.heappop(self._heap)
            if self._due.get(key) != due:
                continue  # replaced by a later state's deadline, or dropped
            del self._due[key]
            record = self.io.store.workload(key)
            deletion = deletion_of(record, self.policy) if record is not None else None
            if deletion is None:
                continue
            if deletion.due > now:
                self._schedule(key, deletion.due)
                continue
            if not await self._delete(deletion):
                self._schedule(key, self.wall() + timedelta(seconds=self.retry_delay))
        if not self._heap:
            return None
        return max(0.0, (self._heap[0][0] - self.wall()).total_seconds())

    async def _sleep(self, seconds: float | None) -> None:
        """Until `seconds` have passed or an earlier deadline was scheduled."""
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._wake.wait()

    def _consider(self, record: WorkloadRecord) -> None:
        deletion = deletion_of(record, self.policy)
        if deletion is None:
            self._due.pop(record.key, None)
        else:
            self._schedule(record.key, deletion.due)

    def _schedule(self, key: str, due: datetime) -> None:
        if self._due.get(key) == due:
            return
        self._due[key] = due
        heapq.heappush(self._heap, (due, key))
        if self._heap[0] == (due, key):
            self._wake.set()

    async def _delete(self, deletion: Deletion) -> bool:
        """Delete it; False when it should be tried again."""
        await self.io.limiter.acquire()
        target = f"{deletion.resource.kind} {deletion.namespace}/{deletion.name}"
        try:
            answer = await self.io.rest.delete(deletion.path, deletion.options())
            if deletion.resource is WORKLOADS:
                await self._release_kueue_finalizer(deletion, answer)
        except KubeError as err:
            if err.status == 404:
                return True  # gone already
            if err.status == 409:
                self.stats.conflict += 1
                return True
            self.stats.error += 1
            log.warning("event=retention-delete-failed object=%r error=%s", target, err)
            return False
        if deletion.resource is JOBS:
            self.stats.job += 1
        elif deletion.resource is PODS:
            self.stats.pod += 1
        else:
            self.stats.workload += 1
        log.info("event=retention-deleted object=%r why=%r", target, deletion.why)
        self.io.record(deletion.event())
        return True

    async def _release_kueue_finalizer(self, deletion: Deletion, answer: Json) -> None:
        """Kueue removes its finalizer from a finished Workload it deletes; so does this,
        once the delete has left the Workload Terminating because of it. Precondition:
        the resourceVersion the delete left (a conflict: the next delete tries again)."""
        meta = answer.get("metadata") if answer.get("kind") == WORKLOADS.kind else None
        if not isinstance(meta, dict) or not meta.get("deletionTimestamp"):
            return
        finalizers = meta.get("finalizers") or []
        if KUEUE_FINALIZER not in finalizers:
            return
        await self.io.limiter.acquire()
        kept = [f for f in finalizers if f != KUEUE_FINALIZER]
        patch = {"metadata": {"finalizers": kept, "resourceVersion": meta.get("resourceVersion")}}
        await self.io.rest.merge_patch(deletion.path, patch)
