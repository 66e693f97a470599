"""`serve --demo`: a seeded workload generator so that queues and dashboards move.

It plays both users and the Job integration: workloads arrive in the loaded
LocalQueues with random sizes and priorities (from the loaded WorkloadPriorityClasses),
and each admitted one becomes ready shortly after admission and finishes after a
random run time; finished workloads are deleted after a retention period.

Bounded: at most ``max_pending`` of its workloads wait at any time (arrivals pause
otherwise), at most ``max_workloads`` are ever created if set, and finished ones are
deleted, so memory stays flat however long it runs. Deterministic: the sequence of
planned workloads (names, queues, sizes, priorities, run times, arrival gaps) depends
only on the seed and the inputs; when they are admitted depends on the scheduler.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.api import Workload, decode_object
from scheduler.api.workload import WORKLOAD_PRIORITY_CLASS_SOURCE
from scheduler.core.clock import Instant
from scheduler.core.metadata import fill_metadata
from scheduler.core.workload import ADMITTED
from scheduler.runtime.commands import ApplyObject, DeleteObject, Finish, PodsReady
from scheduler.runtime.engine import Engine

log = logging.getLogger(__name__)

_PODS = (1, 1, 1, 2, 4)
_CPU_MILLIS = (250, 500, 1000, 2000, 4000)
_MEMORY_MI = (256, 1024, 2048, 4096, 8192)


@dataclass(frozen=True, slots=True)
class PlannedWorkload:
    index: int
    namespace: str
    name: str
    local_queue: str
    gap_seconds: float  # after the previous arrival
    pods: int
    cpu_millis: int  # per pod
    memory_mi: int  # per pod
    priority_class: str  # "" for none
    priority: int
    ready_after_seconds: float  # after admission
    run_seconds: float  # after admission

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(slots=True)
class _Tracked:
    plan: PlannedWorkload
    seen: bool = False
    admitted_at: Instant | None = None  # Admitted condition time of the current run
    ready_at: float = 0.0  # loop time
    finish_at: float = 0.0
    ready_sent: bool = False
    finish_sent: bool = False
    finished_at: float | None = None


@dataclass(frozen=True, slots=True)
class DemoPace:
    """How the demo load behaves: its seed, arrival rate, bounds and timings."""

    seed: int = 0
    mean_interarrival_seconds: float = 1.0
    max_pending: int = 30
    max_workloads: int | None = None
    run_seconds: tuple[float, float] = (10.0, 60.0)
    ready_after_seconds: tuple[float, float] = (0.5, 3.0)
    retention_seconds: float = 30.0
    tick_seconds: float = 0.25
    prefix: str = "demo"


class DemoLoad:
    def __init__(
        self,
        engine: Engine,
        local_queues: Sequence[tuple[str, str]],
        *,
        priority_classes: Mapping[str, int] | None = None,
        pace: DemoPace | None = None,
    ) -> None:
        self.engine = engine
        self.local_queues = sorted(set(local_queues))
        self.priority_classes = dict(sorted((priority_classes or {}).items()))
        self.pace = pace if pace is not None else DemoPace()
        self.created = 0
        self.finished = 0
        self._tracked: dict[str, _Tracked] = {}

    # -- the plan ------------------------------------------------------------------
    def plan(self) -> Iterator[PlannedWorkload]:
        """The workloads this load submits, in order; the same for the same seed."""
        if not self.local_queues:
            return
        rng = random.Random(self.pace.seed)
        classes = [("", 0), *self.priority_classes.items()]
        index = 0
        while self.pace.max_workloads is None or index < self.pace.max_workloads:
            namespace, local_queue = rng.choice(self.local_queues)
            class_name, priority = rng.choice(classes)
            yield PlannedWorkload(
                index=index,
                namespace=namespace,
                name=f"{self.pace.prefix}-{index:06d}",
                local_queue=local_queue,
                gap_seconds=rng.expovariate(1.0 / max(1e-6, self.pace.mean_interarrival_seconds)),
                pods=rng.choice(_PODS),
                cpu_millis=rng.choice(_CPU_MILLIS),
                memory_mi=rng.choice(_MEMORY_MI),
                priority_class=class_name,
                priority=priority,
                ready_after_seconds=rng.uniform(*self.pace.ready_after_seconds),
                run_seconds=rng.uniform(*self.pace.run_seconds),
            )
            index += 1

    def workload(self, planned: PlannedWorkload) -> Workload:
        """The Workload object of a planned workload, sized for its ClusterQueue."""
        spec: dict[str, Any] = {
            "queueName": planned.local_queue,
            "podSets": [
                {
                    "name": "main",
                    "count": planned.pods,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "registry.example.com/demo:1",
                                    "resources": {"requests": self._requests(planned)},
                                }
                            ],
                        }
                    },
                }
            ],
        }
        if planned.priority_class:
            spec["priorityClassName"] = planned.priority_class
            spec["priority"] = planned.priority
            spec["priorityClassSource"] = WORKLOAD_PRIORITY_CLASS_SOURCE
        obj = decode_object(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta1",
                "kind": "Workload",
                "metadata": {
                    "name": planned.name,
                    "namespace": planned.namespace,
                    "labels": {"queuescope.io/demo": "true"},
                },
                "spec": spec,
            }
        )
        assert isinstance(obj, Workload)
        prepared = fill_metadata(obj, self.engine.scheduler.now())
        assert isinstance(prepared, Workload)
        return prepared

    def _requests(self, planned: PlannedWorkload) -> dict[str, str]:
        """cpu and memory when the ClusterQueue covers them, else one unit of its first
        covered resource, so every demo workload can be admitted somewhere."""
        s = self.engine.scheduler
        lq = s.objects.local_queues.get(f"{planned.namespace}/{planned.local_queue}")
        cq = s.objects.cluster_queues.get(lq.cluster_queue) if lq is not None else None
        covered = [r for g in cq.groups for r in g.covered] if cq is not None else []
        requests: dict[str, str] = {}
        if "cpu" in covered or not covered:
            requests["cpu"] = f"{planned.cpu_millis}m"
        if "memory" in covered or not covered:
            requests["memory"] = f"{planned.memory_mi}Mi"
        if not requests:
            requests[covered[0]] = "1"
        return requests

    # -- running ---------------------------------------------------------------------
    @property
    def pending(self) -> int:
        """Its workloads submitted and not admitted nor finished."""
        return sum(1 for t in self._tracked.values() if self._is_pending(t))

    @property
    def tracked(self) -> int:
        return len(self._tracked)

    def _is_pending(self, t: _Tracked) -> bool:
        wl = self.engine.scheduler.workload(t.plan.key)
        if wl is None:
            return not t.seen  # submitted, not yet applied
        return not wl.finished and not wl.is_admitted

    async def run(self) -> None:
        """Generate and drive workloads until cancelled."""
        loop = asyncio.get_running_loop()
        plan = self.plan()
        upcoming = next(plan, None)
        next_at = loop.time() + (upcoming.gap_seconds if upcoming is not None else 0.0)
        log.info(
            "event=demo-started seed=%d localQueues=%d priorityClasses=%d",
            self.pace.seed,
            len(self.local_queues),
            len(self.priority_classes),
        )
        while True:
            now = loop.time()
            while upcoming is not None and now >= next_at and self.pending < self.pace.max_pending:
                self._submit(upcoming)
                upcoming = next(plan, None)
                if upcoming is not None:
                    # The plan's gaps hold while the load keeps up; after a pause for
                    # max_pending, arrivals resume from now.
                    next_at = max(next_at, now - self.pace.tick_seconds) + upcoming.gap_seconds
            self._drive(now)
            await asyncio.sleep(self.pace.tick_seconds)

    def _submit(self, planned: PlannedWorkload) -> None:
        self.engine.submit(ApplyObject(self.workload(planned)))
        self._tracked[planned.key] = _Tracked(planned)
        self.created += 1

    def _drive(self, now: float) -> None:
        s = self.engine.scheduler
        for key, t in list(self._tracked.items()):
            wl = s.workload(key)
            if wl is None:
                if t.seen:
                    del self._tracked[key]  # deleted by someone else, or by us
                continue
            t.seen = True
            if wl.finished:
                if t.finished_at is None:
                    t.finished_at = now
                    self.finished += 1
                elif now >= t.finished_at + self.pace.retention_seconds:
                    self.engine.submit(DeleteObject("Workload", wl.namespace, wl.name))
                    del self._tracked[key]
                continue
            admitted = wl.conditions.get(ADMITTED)
            if not wl.is_admitted or admitted is None:
                t.admitted_at = None  # pending, or evicted: a new run starts on admission
                continue
            if t.admitted_at != admitted.last_transition:
                t.admitted_at = admitted.last_transition
                t.ready_at = now + t.plan.ready_after_seconds
                t.finish_at = now + t.plan.run_seconds
                t.ready_sent = t.finish_sent = False
            if not t.ready_sent and now >= t.ready_at:
                self.engine.submit(PodsReady(key))
                t.ready_sent = True
            if not t.finish_sent and now >= t.finish_at:
                self.engine.submit(Finish(key))
                t.finish_sent = True
