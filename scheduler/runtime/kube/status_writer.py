"""Write the leader's decisions to the API server (cluster.md §7, issue 5 item 2).

Workloads: the engine names the workloads whose status may have changed; a writer
renders the core's status for each, compares it with what the server holds, and
writes only a difference, through the status subresource with the object's
resourceVersion as a precondition. A conflict re-reads the object (which goes back
to the engine: a changed spec is re-decided) and the key is tried again; a write
that is already in the server is never repeated. A slow sweep re-checks every
workload, so a change the engine did not name is still written, late.

Queues: every `updateInterval` the ClusterQueue and LocalQueue statuses (usage,
conditions, and the KEP-168 `pendingWorkloadsStatus` heads) are rendered and written
where they differ from the server's.

Every write takes a token from the shared :class:`TokenBucket` first.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from scheduler.core.queue_status import QueueStatusTracker
from scheduler.core.status import cluster_queue_status, local_queue_status, workload_status
from scheduler.runtime.engine import Engine
from scheduler.runtime.kube.normalize import same_status
from scheduler.runtime.kube.ratelimit import TokenBucket
from scheduler.runtime.kube.resources import CLUSTER_QUEUES, LOCAL_QUEUES, WORKLOADS, Resource
from scheduler.runtime.kube.rest import Json, KubeError, KubeRest
from scheduler.runtime.kube.store import KubeStore
from scheduler.runtime.stepclock import TimeBox

log = logging.getLogger(__name__)

# The sweep compares rendered statuses in stretches of at most 3 ms, in batches of 32.
SWEEP_BUDGET = 0.003
SWEEP_BATCH = 32


@dataclass(slots=True)
class WriterStats:
    writes: int = 0
    conflicts: int = 0
    errors: int = 0
    skipped: int = 0  # already what the server holds


def _split(key: str) -> tuple[str, str]:
    namespace, _, name = key.partition("/")
    return namespace, name


class WorkloadStatusWriter:
    def __init__(
        self,
        rest: KubeRest,
        engine: Engine,
        store: KubeStore,
        limiter: TokenBucket,
        *,
        workers: int = 16,
        sweep_interval: float = 60.0,
        retry_delay: float = 1.0,
    ) -> None:
        self.rest = rest
        self.engine = engine
        self.store = store
        self.limiter = limiter
        self.workers = workers
        self.sweep_interval = sweep_interval
        self.retry_delay = retry_delay
        self.stats = WriterStats()
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self._inflight = 0
        self._drained = asyncio.Event()
        self._drained.set()

    def enqueue(self, keys: Iterable[str]) -> None:
        for key in keys:
            if key not in self._queued:
                self._queued.add(key)
                self._queue.put_nowait(key)
                self._drained.clear()

    async def drained(self) -> None:
        """Wait until nothing is queued or being written (tests, shutdown)."""
        await self._drained.wait()

    async def run(self) -> None:
        """Write until cancelled (the leader runs this; followers never do)."""
        self.enqueue(self.engine.take_touched())
        async with asyncio.TaskGroup() as group:
            group.create_task(self._feed(), name="status-feed")
            group.create_task(self._sweep(), name="status-sweep")
            for i in range(self.workers):
                group.create_task(self._work(), name=f"status-writer-{i}")

    async def _feed(self) -> None:
        while True:
            await self.engine.touched_event.wait()
            self.enqueue(self.engine.take_touched())

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(self.sweep_interval)
            keys = list(self.engine.scheduler.workloads)
            box = TimeBox(SWEEP_BUDGET)
            for start in range(0, len(keys), SWEEP_BATCH):
                self.enqueue(k for k in keys[start : start + SWEEP_BATCH] if self._differs(k))
                await box.pause()

    async def _work(self) -> None:
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            self._inflight += 1
            try:
                await self.write(key)
            except KubeError as err:
                self.stats.errors += 1
                log.warning("event=status-write-failed workload=%s error=%s", key, err)
                asyncio.get_running_loop().call_later(self.retry_delay, self.enqueue, (key,))
            finally:
                self._inflight -= 1
                if self._queue.empty() and self._inflight == 0:
                    self._drained.set()

    def _desired(self, key: str) -> tuple[Json, Json] | None:
        """(the server's object, the status the core wants), or None if either side
        does not know the workload."""
        wl = self.engine.scheduler.workloads.get(key)
        server = self.store.get(WORKLOADS, key)
        if wl is None or server is None:
            return None
        return server, workload_status(wl)

    def _differs(self, key: str) -> bool:
        found = self._desired(key)
        if found is None:
            return False
        server, desired = found
        wl = self.engine.scheduler.workloads[key]
        spec = server.get("spec") or {}
        return not same_status(desired, server.get("status")) or spec.get("active", True) != (
            wl.active
        )

    async def write(self, key: str) -> bool:
        """Bring one workload's server copy in line with the core; True if written."""
        found = self._desired(key)
        if found is None:
            return False
        server, desired = found
        namespace, name = _split(key)
        wl = self.engine.scheduler.workloads[key]
        wrote = False
        try:
            if (server.get("spec") or {}).get("active", True) != wl.active:
                # Deactivation is a spec change (§11.2): a normal update, not status.
                await self.limiter.acquire()
                patch = {
                    "metadata": {"resourceVersion": server["metadata"]["resourceVersion"]},
                    "spec": {"active": wl.active},
                }
                server = await self.rest.merge_patch(WORKLOADS.item(name, namespace), patch)
                self.store.observe(WORKLOADS, server)
                wrote = True
            if not same_status(desired, server.get("status")):
                await self.limiter.acquire()
                body = {**server, "status": desired}
                result = await self.rest.replace(WORKLOADS.item(name, namespace, "status"), body)
                self.store.observe(WORKLOADS, result)
                wrote = True
        except KubeError as err:
            if err.status == 404:
                return False  # deleted meanwhile; the watch removes it from the core
            if err.status != 409:
                raise
            self.stats.conflicts += 1
            fresh = await self.rest.get(WORKLOADS.item(name, namespace))
            self.store.observe(WORKLOADS, fresh)
            self.enqueue((key,))
            return False
        if wrote:
            self.stats.writes += 1
        else:
            self.stats.skipped += 1
        return wrote


class QueueStatusWriter:
    """ClusterQueue and LocalQueue status, at most once per update interval."""

    def __init__(
        self,
        rest: KubeRest,
        engine: Engine,
        store: KubeStore,
        limiter: TokenBucket,
        *,
        interval: float | None = None,
    ) -> None:
        s = engine.scheduler
        self.rest = rest
        self.engine = engine
        self.store = store
        self.limiter = limiter
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
        s = self.engine.scheduler
        self.tracker.snapshot(s, s.now())
        written = 0
        for name in sorted(s.cluster_queues):
            status = cluster_queue_status(s, name)
            visible = self.tracker.cluster_queue_json(name)
            if visible is not None:
                status["pendingWorkloadsStatus"] = visible
            written += await self._write(CLUSTER_QUEUES, name, status)
        for key in sorted(s.local_queues):
            status = local_queue_status(s, key)
            visible = self.tracker.local_queue_json(key)
            if visible is not None:
                status["pendingWorkloadsStatus"] = visible
            written += await self._write(LOCAL_QUEUES, key, status)
        return written

    async def _write(self, resource: Resource, key: str, desired: Json) -> int:
        server = self.store.get(resource, key)
        if server is None or same_status(desired, server.get("status")):
            return 0
        namespace, name = _split(key) if resource.namespaced else (None, key)
        await self.limiter.acquire()
        try:
            result = await self.rest.replace(
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
        self.store.observe(resource, result)
        self.stats.writes += 1
        return 1
