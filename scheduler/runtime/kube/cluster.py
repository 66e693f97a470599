"""The cluster-mode runtime: the store, the leader's controllers, and who runs what.

Every replica runs the store (a warm cache feeding its engine, which publishes the
snapshots the visibility server reads). Only the leader schedules and writes: when
it gains the Lease (and its cache is synced) it turns the engine's cycles on and
starts the Job integration, the status writers, the Events and the object retention;
when it loses the Lease it cancels them at once and goes back to taking the server's
status. Without leader election the one replica leads from its first sync on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from scheduler.api.integrations import (
    JOB_FRAMEWORK,
    JOBSET_FRAMEWORK,
    NO_INTEGRATIONS,
    POD_FRAMEWORK,
    STATEFULSET_FRAMEWORK,
    Integrations,
)
from scheduler.kubeapi.client import KubeRest
from scheduler.runtime.engine import Engine
from scheduler.runtime.kube.events import EventRecorder
from scheduler.runtime.kube.heap import release_free_heap
from scheduler.runtime.kube.integration import Integration
from scheduler.runtime.kube.jobs import JobController
from scheduler.runtime.kube.jobsets import JobSetController
from scheduler.runtime.kube.leader import LeaderElector
from scheduler.runtime.kube.leader_io import LeaderIO
from scheduler.runtime.kube.pods import PodController
from scheduler.runtime.kube.ratelimit import TokenBucket
from scheduler.runtime.kube.resources import JOBSETS, PODS, STATEFULSETS, WATCHED
from scheduler.runtime.kube.retention import RetentionController, RetentionPolicy
from scheduler.runtime.kube.statefulsets import StatefulSetController
from scheduler.runtime.kube.status_writer import (
    PENDING_WINDOW,
    QueueStatusWriter,
    WorkloadStatusWriter,
    WorkloadWriteSettings,
)
from scheduler.runtime.kube.store import KubeStore

log = logging.getLogger(__name__)

STOP_WRITES_SECONDS = 5.0
HEAP_SETTLE_POLL = 1.0  # seconds between two looks at the status writes still to do


class LeadershipLost(Exception):  # noqa: N818
    """In-flight writes did not stop in time after the Lease was lost: the process
    must exit rather than risk writing as a non-leader."""


@dataclass(frozen=True, slots=True)
class WriteSettings:
    """How the leader writes (docs/operations.md, the flag table): its token bucket, the
    ClusterQueue and LocalQueue status cadence (None: the writer's own), the Workload
    status sweep, and how many queued Workloads per ClusterQueue get a pending
    condition; what it deletes (a Configuration's objectRetentionPolicies); and whether
    it runs other integrations besides the Job one."""

    qps: float = 50.0
    burst: int = 100
    queue_status_interval: float | None = None
    sweep_interval: float = 60.0
    pending_window: int = PENDING_WINDOW
    retention: RetentionPolicy | None = None
    # The integrations besides Jobs' (a Configuration's integrations.frameworks;
    # docs/cluster.md#plain-pods, docs/cluster.md#deployments, docs/cluster.md#jobsets).
    integrations: Integrations = NO_INTEGRATIONS


class ClusterRuntime:
    def __init__(
        self,
        rest: KubeRest,
        engine: Engine,
        *,
        elector: LeaderElector | None = None,
        writes: WriteSettings = WriteSettings(),
        release_heap: Callable[[], Awaitable[bool]] = release_free_heap,
    ) -> None:
        self.rest = rest
        self._release_heap = release_heap
        self._heap_task: asyncio.Task[None] | None = None  # once, at the first leadership
        self.heap_settle_poll = HEAP_SETTLE_POLL
        self.engine = engine
        self.elector = elector
        engine.set_scheduling(False)
        enabled = writes.integrations
        watched = (*WATCHED, PODS) if enabled.pods else WATCHED
        if enabled.statefulsets:
            watched = (*watched, STATEFULSETS)
        if enabled.jobsets:
            watched = (*watched, JOBSETS)
        self.store = KubeStore(rest, engine, resources=watched)
        self.limiter = TokenBucket(writes.qps, writes.burst)
        # Events name the replica that wrote them (docs/cluster.md#events).
        instance = elector.identity if elector is not None else socket.gethostname()
        self.events = EventRecorder(rest, instance)
        io = LeaderIO(rest, engine, self.store, self.limiter, self.events)
        self.jobs = JobController(io, integrations=enabled)
        self.pods = PodController(io, enabled) if enabled.pods else None
        self.statefulsets = StatefulSetController(io) if enabled.statefulsets else None
        self.jobsets = JobSetController(io) if enabled.jobsets else None
        self.workload_writer = WorkloadStatusWriter(
            io,
            WorkloadWriteSettings(
                sweep_interval=writes.sweep_interval, pending_window=writes.pending_window
            ),
        )
        self.queue_writer = QueueStatusWriter(io, interval=writes.queue_status_interval)
        # Only with a Configuration's objectRetentionPolicies (docs/cluster.md#object-retention).
        retention = writes.retention
        self.retention = RetentionController(io, retention) if retention is not None else None
        self._leader_tasks: list[asyncio.Task[Any]] = []
        self._campaign: asyncio.Task[None] | None = None
        self._closing = False

    def integrations(self) -> dict[str, Integration]:
        """The integrations running, by their Configuration names."""
        running: dict[str, Integration] = {JOB_FRAMEWORK: self.jobs}
        if self.pods is not None:
            running[POD_FRAMEWORK] = self.pods
        if self.statefulsets is not None:
            running[STATEFULSET_FRAMEWORK] = self.statefulsets
        if self.jobsets is not None:
            running[JOBSET_FRAMEWORK] = self.jobsets
        return running

    @property
    def leading(self) -> bool:
        return bool(self._leader_tasks)

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self.store.run(), name="kube-store")
            if self.elector is not None:
                self._campaign = group.create_task(self.elector.run(), name="leader-election")
            group.create_task(self._follow_leadership(), name="leadership")

    async def _follow_leadership(self) -> None:
        await self.store.synced.wait()
        elector = self.elector
        try:
            if elector is None:
                self._start_leading()
                await asyncio.Event().wait()
                return
            while True:
                elector.changed.clear()
                if elector.leading and not self.leading:
                    self._start_leading()
                elif not elector.leading and self.leading:
                    await self._stop_leading()
                await elector.changed.wait()
        finally:
            await self._stop_leading()

    def _start_leading(self) -> None:
        if self._closing:
            return
        log.info("event=leading-start")
        self.store.set_leading(True)
        self.engine.set_scheduling(True)
        self._leader_tasks = [
            asyncio.create_task(integration.run(), name=f"integration {framework}")
            for framework, integration in self.integrations().items()
        ]
        self._leader_tasks += [
            asyncio.create_task(self.workload_writer.run(), name="workload-status"),
            asyncio.create_task(self.queue_writer.run(), name="queue-status"),
            asyncio.create_task(self.events.run(), name="events"),
        ]
        if self.retention is not None:
            self._leader_tasks.append(
                asyncio.create_task(self.retention.run(), name="object-retention")
            )
        if self._heap_task is None:
            self._heap_task = asyncio.create_task(
                self._release_heap_once_settled(), name="heap-release"
            )

    async def _release_heap_once_settled(self) -> None:
        """Once, after the first leadership's first cycles and status writes: give the
        heap's free pages back. The first cycle over every pending Workload, its status
        comparisons and the first full snapshot leave as much freed memory behind as the
        initial list did (docs/benchmarks.md, "Cluster-mode memory beside upstream
        Kueue", fourth round); the trim after the sync came before them."""
        await self.engine.flush()
        while True:
            await self.engine.wait_idle()
            if not self.workload_writer.backlog and not self.engine.touched_event.is_set():
                break
            await asyncio.sleep(self.heap_settle_poll)
        await self._release_heap()

    async def _stop_leading(self, *, follow: bool = True) -> None:
        """Cancel the leader's tasks; with `follow` (the process goes on as a follower)
        take the server's status again where the core's differs."""
        if self._heap_task is not None:
            self._heap_task.cancel()  # a no-op once it is done
        if not self._leader_tasks:
            return
        log.info("event=leading-stop")
        self.engine.set_scheduling(False)
        tasks, self._leader_tasks = self._leader_tasks, []
        for task in tasks:
            task.cancel()
        done, pending = await asyncio.wait(tasks, timeout=STOP_WRITES_SECONDS)
        for task in done:
            with contextlib.suppress(asyncio.CancelledError):
                exc = task.exception()
                if exc is not None:
                    log.error("event=leader-task-failed task=%s error=%r", task.get_name(), exc)
        self.store.set_leading(False)
        if pending:
            raise LeadershipLost(f"{len(pending)} writer task(s) did not stop within 5 s")
        if follow:
            taken = await self.store.take_server_status()
            log.info("event=following workloads-retaken=%d", taken)

    async def shutdown(self) -> None:
        """Stop campaigning, stop writing (in-flight writes are cancelled: each is one
        whole request the server applies or not, and the next leader re-derives from
        what the server holds), then hand the Lease over. Never leads again."""
        self._closing = True
        if self.elector is not None:
            self.elector.resigned = True
        if self._campaign is not None:
            self._campaign.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._campaign
        try:
            # No re-reading of the server's status: the process is about to exit, and
            # the next leader derives everything from what the server holds.
            await self._stop_leading(follow=False)
        finally:
            if self.elector is not None:
                await self.elector.release()
