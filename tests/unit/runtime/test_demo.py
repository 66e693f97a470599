"""The demo load: a seeded plan, bounded pending work, and complete lifecycles."""

from __future__ import annotations

import asyncio
import contextlib
from itertools import islice

from scheduler.runtime.demo import DemoLoad, DemoPace
from scheduler.runtime.engine import Engine
from tests.unit.runtime.support import (
    WAIT,
    cluster,
    cluster_queue,
    eventually,
    flavor,
    local_queue,
    namespace,
    real_scheduler,
)

QUEUES = [("team-a", "main"), ("team-b", "main"), ("team-b", "gpu")]
CLASSES = {"urgent": 1000, "batch": 100}


def engine_with_queues(cpu: str) -> Engine:
    s = real_scheduler()
    engine = Engine(s, publish_interval=0.02)
    cluster(
        s,
        namespace("team-a"),
        namespace("team-b"),
        flavor(),
        cluster_queue("cq", cpu),
        *(local_queue(ns, name, "cq") for ns, name in QUEUES),
    )
    return engine


def test_the_plan_is_deterministic_for_a_seed() -> None:
    engine = Engine(real_scheduler())
    one = list(
        islice(DemoLoad(engine, QUEUES, priority_classes=CLASSES, pace=DemoPace(seed=7)).plan(), 50)
    )
    two = list(
        islice(DemoLoad(engine, QUEUES, priority_classes=CLASSES, pace=DemoPace(seed=7)).plan(), 50)
    )
    other = list(
        islice(DemoLoad(engine, QUEUES, priority_classes=CLASSES, pace=DemoPace(seed=8)).plan(), 50)
    )
    assert one == two
    assert one != other
    assert {p.priority_class for p in one} <= {"", "urgent", "batch"}
    assert {(p.namespace, p.local_queue) for p in one} <= set(QUEUES)
    assert all(p.priority == CLASSES.get(p.priority_class, 0) for p in one)
    bounded = DemoLoad(engine, QUEUES, pace=DemoPace(seed=7, max_workloads=12))
    assert len(list(bounded.plan())) == 12
    assert list(DemoLoad(engine, [], pace=DemoPace(seed=7)).plan()) == []


def test_workloads_fit_the_cluster_queue_resources() -> None:
    engine = engine_with_queues("4")
    load = DemoLoad(engine, QUEUES, priority_classes=CLASSES, pace=DemoPace(seed=3))
    for planned in islice(load.plan(), 10):
        wl = load.workload(planned)
        requests = wl.spec.pod_sets[0].template.spec.containers[0].resources.requests
        assert set(requests) == {"cpu"}  # the queue covers cpu only
        assert wl.spec.priority == (planned.priority if planned.priority_class else None)
        assert wl.metadata.uid and wl.metadata.creation_timestamp is not None


async def test_pending_work_is_bounded() -> None:
    engine = engine_with_queues("0")  # nothing is ever admitted
    engine.start()
    load = DemoLoad(
        engine,
        QUEUES,
        pace=DemoPace(seed=1, mean_interarrival_seconds=0.001, max_pending=5, tick_seconds=0.01),
    )
    task = asyncio.create_task(load.run())
    try:
        await eventually(lambda: load.created == 5)
        await asyncio.sleep(0.2)  # many ticks and planned arrivals later...
        assert load.created == 5
        assert load.pending == 5
        demo = [k for k in engine.scheduler.objects.workloads if "/demo-" in k]
        assert len(demo) == 5
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await asyncio.wait_for(engine.stop(), WAIT)


async def test_workloads_run_finish_and_are_deleted() -> None:
    engine = engine_with_queues("100")
    engine.start()
    load = DemoLoad(
        engine,
        QUEUES,
        priority_classes=CLASSES,
        pace=DemoPace(
            seed=2,
            mean_interarrival_seconds=0.005,
            max_workloads=6,
            run_seconds=(0.02, 0.05),
            ready_after_seconds=(0.0, 0.01),
            retention_seconds=0.02,
            tick_seconds=0.01,
        ),
    )
    task = asyncio.create_task(load.run())
    try:
        await eventually(lambda: load.created == 6 and load.tracked == 0)
        await engine.flush()  # the last deletions were submitted, now they are applied
        assert load.finished == 6
        assert not [k for k in engine.scheduler.objects.workloads if "/demo-" in k]
        assert engine.stats.admitted >= 6
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await asyncio.wait_for(engine.stop(), WAIT)
