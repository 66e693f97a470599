"""Write the leader's decisions to the API server (docs/cluster.md#high-availability, issue 5 item
2).

Workloads: the engine names the workloads whose status may have changed; a writer
renders the core's status for each, compares it with what the server holds, and
writes the difference when `write_rule.judge` says it is worth it (a decision always;
a pending condition only when it is news and the workload is near the head of its
queue), through the status subresource with the object's resourceVersion as a
precondition. Writes go in order: decisions first, then pending conditions by queue
position, nearest the head first. A conflict re-reads the object (which goes back to
the engine: a changed spec is re-decided) and the key is tried again; a write that is
already in the server is never repeated. A slow sweep re-checks every workload, so a
change the engine did not name is still written, late, and a workload that moved into
the head window gets its condition.

Queues: every `updateInterval` the ClusterQueue and LocalQueue statuses (usage,
conditions, and the KEP-168 `pendingWorkloadsStatus` heads) are rendered and written
where they differ from the server's.

Every write takes a token from the shared :class:`TokenBucket` first.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from scheduler.core.queue_status import QueueStatusTracker
from scheduler.core.status import cluster_queue_status, local_queue_status, workload_status
from scheduler.core.workload import WorkloadState
from scheduler.kubeapi.errors import Json, KubeError
from scheduler.runtime.kube.events import Regarding
from scheduler.runtime.kube.leader_io import LeaderIO
from scheduler.runtime.kube.normalize import same_status
from scheduler.runtime.kube.records import WorkloadRecord
from scheduler.runtime.kube.resources import CLUSTER_QUEUES, LOCAL_QUEUES, WORKLOADS, Resource
from scheduler.runtime.kube.workload_events import Preemption, workload_events
from scheduler.runtime.kube.write_rule import DECIDE, DECISION, NOTHING, Verdict, judge
from scheduler.runtime.stepclock import TimeBox

log = logging.getLogger(__name__)

PLAN_BUDGET = 0.003  # seconds of judging between two yields to the loop
PENDING_WINDOW = 100


@dataclass(slots=True)
class WriterStats:
    writes: int = 0
    conflicts: int = 0
    errors: int = 0
    skipped: int = 0  # already what the server holds, or nothing a reader would notice
    deferred: int = 0  # a pending condition beyond the head window: not written now


def _check_states(status: Json | None) -> list[tuple[object, object, object]]:
    """Name, state and retry count of each entry of `status.admissionChecks`."""
    checks = (status or {}).get("admissionChecks") or []
    return [(c.get("name"), c.get("state"), c.get("retryCount")) for c in checks]


def _split(key: str) -> tuple[str, str]:
    namespace, _, name = key.partition("/")
    return namespace, name


@dataclass(frozen=True, slots=True)
class WorkloadWriteSettings:
    """Concurrent writes, the sweep that re-checks every Workload, the pause before a
    failed write is retried, and how many queued Workloads per ClusterQueue get a
    pending condition (docs/cluster.md, "Workload status writes")."""

    workers: int = 16
    sweep_interval: float = 60.0
    retry_delay: float = 1.0
    pending_window: int = PENDING_WINDOW


class WorkloadStatusWriter:
    def __init__(
        self, io: LeaderIO, settings: WorkloadWriteSettings = WorkloadWriteSettings()
    ) -> None:
        self.io = io
        self.settings = settings
        self.stats = WriterStats()
        # (rank, arrival, key): decisions rank -1, pending conditions their position.
        self._heap: list[tuple[int, int, str]] = []
        self._arrivals = itertools.count()
        self._queued: set[str] = set()
        self._ready = asyncio.Event()
        self._inflight = 0
        self._drained = asyncio.Event()
        self._drained.set()
        self._planning = 0

    # -- what to write, in which order -------------------------------------------------
    def enqueue(self, keys: Iterable[str]) -> None:
        """Queue the keys whose difference is worth a write, ranked; others are counted
        as skipped or deferred."""
        for key in keys:
            if key in self._queued:
                continue
            rank = self._rank(key)
            if rank is None:
                continue
            self._queued.add(key)
            heapq.heappush(self._heap, (rank, next(self._arrivals), key))
            self._ready.set()
            self._drained.clear()

    def queued(self) -> list[str]:
        """The keys waiting to be written, in write order."""
        return [key for _, _, key in sorted(self._heap)]

    @property
    def backlog(self) -> int:
        """Writes queued or in flight, and touched workloads not yet looked at."""
        return len(self._heap) + self._inflight + self._planning

    async def drained(self) -> None:
        """Wait until nothing is queued or being written (tests, shutdown)."""
        await self._drained.wait()

    def _position(self, key: str) -> int | None:
        queues = self.io.engine.scheduler.queues
        cq = queues.locate(key)
        queue = queues.queue(cq) if cq is not None else None
        return queue.position(key) if queue is not None else None

    def _verdict(self, key: str) -> tuple[Verdict, int, WorkloadRecord | None, Json | None]:
        """(the verdict, its rank, the server's record, the status the core wants)."""
        wl = self.io.engine.scheduler.workload(key)
        server = self.io.store.workload(key)
        if wl is None or server is None:
            return NOTHING, DECISION, None, None
        desired = workload_status(wl)
        if server.active != wl.active:
            return DECIDE, DECISION, server, desired
        position = self._position(key)
        verdict = judge(desired, server.status, position, self.settings.pending_window)
        rank = (position or 0) if verdict.pending_only else DECISION
        return verdict, rank, server, desired

    def _count_unwritten(self, verdict: Verdict) -> None:
        self.stats.skipped += not verdict.deferred
        self.stats.deferred += verdict.deferred

    def _rank(self, key: str) -> int | None:
        verdict, rank, _, _ = self._verdict(key)
        if not verdict.write:
            self._count_unwritten(verdict)
            return None
        return rank

    async def _plan(self, keys: list[str]) -> None:
        """Judge and enqueue many keys in time-boxed stretches, yielding between them:
        judging a key renders its status, and a start can name 100k at once."""
        done = 0
        self._planning += len(keys)
        box = TimeBox(PLAN_BUDGET)
        try:
            for key in keys:  # at least one key per stretch: pause() comes after it
                self.enqueue((key,))
                done += 1
                self._planning -= 1
                await box.pause()
        finally:
            self._planning -= len(keys) - done

    # -- the tasks ------------------------------------------------------------------
    async def run(self) -> None:
        """Write until cancelled (the leader runs this; followers never do)."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self._feed(), name="status-feed")
            group.create_task(self._sweep(), name="status-sweep")
            for i in range(self.settings.workers):
                group.create_task(self._work(), name=f"status-writer-{i}")

    async def _feed(self) -> None:
        while True:
            keys = list(self.io.engine.take_touched())
            if keys:
                await self._plan(keys)
            else:
                await self.io.engine.touched_event.wait()

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(self.settings.sweep_interval)
            await self._plan(list(self.io.engine.scheduler.objects.workloads))

    async def _work(self) -> None:
        while True:
            while not self._heap:
                self._ready.clear()
                await self._ready.wait()
            _, _, key = heapq.heappop(self._heap)
            self._queued.discard(key)
            self._inflight += 1
            try:
                await self.write(key)
            except KubeError as err:
                self.stats.errors += 1
                log.warning("event=status-write-failed workload=%s error=%s", key, err)
                asyncio.get_running_loop().call_later(
                    self.settings.retry_delay, self.enqueue, (key,)
                )
            finally:
                self._inflight -= 1
                if not self._heap and self._inflight == 0:
                    self._drained.set()

    def _preemption(self, wl: WorkloadState) -> Preemption | None:
        """Who last preempted `wl`, for its Events, if the core still holds it."""
        if wl.preempted_by is None:
            return None
        preemptor = self.io.engine.scheduler.workload(wl.preempted_by)
        if preemptor is None:
            return None
        namespace, name = _split(wl.preempted_by)
        regarding = Regarding.of(WORKLOADS, namespace, name, preemptor.uid)
        return Preemption(regarding, preemptor.priority, wl.priority)

    async def write(self, key: str) -> bool:
        """Bring one workload's server copy in line with the core, if the difference is
        worth it (:func:`judge`); True if written."""
        verdict, _, server, desired = self._verdict(key)
        if (
            verdict.write
            and server is not None
            and _check_states(server.status) != _check_states(desired)
        ):
            # The server's check states may be a controller's write that the engine has
            # not taken in yet: writing now would put the core's older states over it
            # (docs/scheduling.md#admission-checks). Let the engine take them first.
            await self.io.engine.flush()
            verdict, _, server, desired = self._verdict(key)
        if not verdict.write or server is None or desired is None:
            self._count_unwritten(verdict)
            return False
        namespace, name = _split(key)
        wl = self.io.engine.scheduler.objects.workloads[key]
        wrote = False
        try:
            if server.active != wl.active:
                # Deactivation is a spec change (docs/scheduling.md#deactivation): a normal update,
                # not status.
                await self.io.limiter.acquire()
                patch = {
                    "metadata": {"resourceVersion": server.resource_version},
                    "spec": {"active": wl.active},
                }
                patched = await self.io.rest.merge_patch(WORKLOADS.item(name, namespace), patch)
                self.io.store.observe(WORKLOADS, patched)
                server = WorkloadRecord.of(patched)
                wrote = True
            if not same_status(desired, server.status):
                await self.io.limiter.acquire()
                # The status subresource takes only the status (and the precondition).
                result = await self.io.rest.replace(
                    WORKLOADS.item(name, namespace, "status"), server.status_body(desired)
                )
                self.io.store.observe(WORKLOADS, result)
                preemption = self._preemption(wl)
                self.io.record(*workload_events(server.status, result, preemption))
                wrote = True
        except KubeError as err:
            if err.status == 404:
                return False  # deleted meanwhile; the watch removes it from the core
            if err.status != 409:
                raise
            self.stats.conflicts += 1
            fresh = await self.io.rest.get(WORKLOADS.item(name, namespace))
            self.io.store.observe(WORKLOADS, fresh)
            self.enqueue((key,))
            return False
        if wrote:
            self.stats.writes += 1
        else:
            self.stats.skipped += 1
        return wrote


class QueueStatusWriter:
    """ClusterQueue and LocalQueue status, at most once per update interval."""

    def __init__(self, io: LeaderIO, *, interval: float | None = None) -> None:
        s = io.engine.scheduler
        self.io = io
        visibility = s.config.queue_visibility
        self.interval = (
            interval
            if interval is not None
            else float(visibility.update_interval_seconds if visibility is not None else 5)
        )
        self.tracker = QueueStatusTracker(visibility, s.now())
        self.stats = WriterStats()

    async def run(self) -> None:
        while True:
            await self.write_all()
            await asyncio.sleep(self.interval)

    async def write_all(self) -> int:
        s = self.io.engine.scheduler
        self.tracker.snapshot(s, s.now())
        written = 0
        # Per kind: the resource, its keys, its status, and its KEP-168 pending heads.
        kinds = (
            (
                CLUSTER_QUEUES,
                s.objects.cluster_queues,
                cluster_queue_status,
                self.tracker.cluster_queue_json,
            ),
            (
                LOCAL_QUEUES,
                s.objects.local_queues,
                local_queue_status,
                self.tracker.local_queue_json,
            ),
        )
        for resource, keys, render, pending_heads in kinds:
            for key in sorted(keys):
                status = render(s, key)
                visible = pending_heads(key)
                if visible is not None:
                    status["pendingWorkloadsStatus"] = visible
                written += await self._write(resource, key, status)
        return written

    async def _write(self, resource: Resource, key: str, desired: Json) -> int:
        server = self.io.store.get(resource, key)
        if server is None or same_status(desired, server.get("status")):
            return 0
        namespace, name = _split(key) if resource.namespaced else (None, key)
        await self.io.limiter.acquire()
        try:
            result = await self.io.rest.replace(
                resource.item(name, namespace, "status"), {**server, "status": desired}
            )
        except KubeError as err:
            self.stats.conflicts += err.status == 409
            self.stats.errors += err.status != 409
            if err.status not in (404, 409):
                log.warning(
                    "event=queue-status-write-failed %s=%s error=%s", resource.kind, key, err
                )
            return 0  # the watch brings the newer object; the next round retries
        self.io.store.observe(resource, result)
        self.stats.writes += 1
        return 1
