"""ClusterRuntime on the in-memory API server with a real engine: who runs what and
when. Leader tasks start only after the initial sync, stop at once when the Lease is
lost, start again when it is regained; shutdown releases the Lease."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

import pytest

from scheduler.kubeapi.errors import Json
from scheduler.runtime.engine import Engine
from scheduler.runtime.kube import cluster as cluster_module
from scheduler.runtime.kube.cluster import ClusterRuntime, LeadershipLost, WriteSettings
from scheduler.runtime.kube.leader import LeaderElector, LeaseRef, LeaseTiming
from scheduler.runtime.kube.resources import JOBS, LEASES, RESOURCE_FLAVORS, WATCHED, WORKLOADS
from tests.unit.runtime.kube.fakes import FakeKube, condition, seed_cluster, until
from tests.unit.runtime.support import eventually, job, real_scheduler

# The queue status writer out of the way: these tests are about who runs what.
HOURLY_QUEUE_STATUS = WriteSettings(queue_status_interval=3600)

NS, LEASE = "queuescope-system", "queuescope-controller-leader"


class ManualElector(LeaderElector):
    """An elector whose leadership the test decides."""

    def __init__(self, fake: FakeKube) -> None:
        super().__init__(fake.rest, lease=LeaseRef(NS, LEASE), identity="me")
        self.released = False

    async def run(self) -> None:
        await asyncio.Event().wait()

    def set(self, leading: bool) -> None:
        self._set_leading(leading)

    async def release(self) -> None:
        self.released = True
        await super().release()


class Gate:
    """Holds every list of one path until opened (an initial sync that takes time)."""

    def __init__(self, fake: FakeKube, held_path: str) -> None:
        self.opened = asyncio.Event()
        self.held = False
        original: Callable[..., Awaitable[Json]] = fake.get

        async def gated(path: str, query: Mapping[str, str] | None = None) -> Json:
            if path == held_path:
                self.held = True
                await self.opened.wait()
            return await original(path, query)

        fake.get = gated  # type: ignore[method-assign]


def leader_tasks_alive(runtime: ClusterRuntime) -> bool:
    return bool(runtime._leader_tasks) and not any(t.done() for t in runtime._leader_tasks)


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    eng = Engine(real_scheduler(), publish_interval=0.02)
    eng.start()
    yield eng
    await asyncio.wait_for(eng.stop(), 10)


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_leader_tasks_start_only_after_the_initial_sync(engine: Engine) -> None:
    fake = FakeKube()
    seed_cluster(fake)
    gate = Gate(fake, WORKLOADS.collection())
    elector = ManualElector(fake)
    runtime = ClusterRuntime(fake.rest, engine, elector=elector, writes=HOURLY_QUEUE_STATUS)
    assert not engine.scheduling
    elector.set(True)  # the Lease is ours before the cache is warm
    task = asyncio.create_task(runtime.run())
    try:
        await until(lambda: gate.held)
        for _ in range(100):  # plenty of turns for anything that would start early
            await asyncio.sleep(0)
        assert not runtime.leading
        assert not engine.scheduling
        assert not runtime.store.leading
        gate.opened.set()
        await until(lambda: runtime.leading)
        assert engine.scheduling
        assert runtime.store.leading
        assert leader_tasks_alive(runtime)
        assert runtime.store.synced.is_set()
    finally:
        await stop(task)
    assert not runtime.leading  # cancelling the runtime stops the leader tasks


async def test_losing_the_lease_cancels_the_leader_tasks_and_regaining_restarts_them(
    engine: Engine,
) -> None:
    fake = FakeKube()
    seed_cluster(fake)
    elector = ManualElector(fake)
    runtime = ClusterRuntime(fake.rest, engine, elector=elector, writes=HOURLY_QUEUE_STATUS)
    task = asyncio.create_task(runtime.run())
    try:
        await until(lambda: runtime.store.synced.is_set() and fake.waiting == len(WATCHED))
        assert not runtime.leading  # a follower: warm cache, no writers
        elector.set(True)
        await until(lambda: runtime.leading)
        first = list(runtime._leader_tasks)
        elector.set(False)
        await until(lambda: not runtime.store.leading)  # the last step of stepping down
        assert not runtime.leading
        assert all(t.cancelled() for t in first)
        assert not engine.scheduling
        elector.set(True)
        await until(lambda: runtime.leading)
        assert leader_tasks_alive(runtime)
        assert not set(runtime._leader_tasks) & set(first)
    finally:
        await stop(task)


async def test_writers_that_do_not_stop_in_time_end_the_process(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cluster_module, "STOP_WRITES_SECONDS", 0.01)
    fake = FakeKube()
    elector = ManualElector(fake)
    runtime = ClusterRuntime(fake.rest, engine, elector=elector, writes=HOURLY_QUEUE_STATUS)
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue  # a write that ignores cancellation

    runtime.jobs.run = stubborn  # type: ignore[method-assign]
    elector.set(True)
    try:
        with pytest.raises(ExceptionGroup) as caught:
            async with asyncio.timeout(10):
                task = asyncio.create_task(runtime.run())
                await until(lambda: runtime.leading)
                elector.set(False)
                await task
        assert caught.group_contains(LeadershipLost)
    finally:
        release.set()
        await asyncio.sleep(0)


async def test_shutdown_stops_leading_then_releases_the_lease(engine: Engine) -> None:
    fake = FakeKube()
    # Retrying at once: a campaign still running after the release would re-take it.
    elector = LeaderElector(
        fake.rest, lease=LeaseRef(NS, LEASE), identity="me", timing=LeaseTiming(retry_period=0)
    )
    runtime = ClusterRuntime(fake.rest, engine, elector=elector, writes=HOURLY_QUEUE_STATUS)
    task = asyncio.create_task(runtime.run())
    try:
        await until(lambda: runtime.leading)
        await runtime.shutdown()
        assert not runtime.leading
        assert not engine.scheduling
        stored = fake.stored(LEASES, f"{NS}/{LEASE}")
        assert stored is not None and stored["spec"]["holderIdentity"] == ""
        # The process serves on for its shutdown grace: it never leads again.
        for _ in range(200):
            await asyncio.sleep(0)
        stored = fake.stored(LEASES, f"{NS}/{LEASE}")
        assert stored is not None and stored["spec"]["holderIdentity"] == ""
        assert not runtime.leading and not elector.leading
    finally:
        await stop(task)


async def test_a_job_runs_end_to_end_without_leader_election(engine: Engine) -> None:
    """Store, engine, Job integration and writers together: a Job is suspended, gets
    a Workload, is admitted and unsuspended with the flavor's labels, reports ready,
    finishes, and its quota goes to the next Job."""
    fake = FakeKube()
    seed_cluster(fake, cpu="1", workloads=0)
    fake.server_update(RESOURCE_FLAVORS, "default", {"spec": {"nodeLabels": {"pool": "a"}}})
    for name in ("first", "second"):
        fake.seed(JOBS, job("team", name, "main"))
    runtime = ClusterRuntime(fake.rest, engine, writes=HOURLY_QUEUE_STATUS)
    task = asyncio.create_task(runtime.run())

    def stored_job(name: str) -> Json:
        found = fake.stored(JOBS, f"team/{name}")
        assert found is not None
        return found

    def running(name: str) -> bool:
        return stored_job(name)["spec"].get("suspend") is False

    def workload_of(name: str) -> Json:
        [wl] = [
            w
            for (plural, _, _), w in fake.objects.items()
            if plural == "workloads" and w["metadata"]["ownerReferences"][0]["name"] == name
        ]
        return wl

    try:
        await eventually(lambda: running("first") or running("second"))
        first, second = ("first", "second") if running("first") else ("second", "first")
        assert stored_job(first)["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "a"}
        assert stored_job(second)["spec"]["suspend"] is True
        wl = workload_of(first)
        assert wl["status"]["admission"]["clusterQueue"] == "cq"
        fake.server_update(JOBS, f"team/{first}", {"status": {"ready": 1}})
        await eventually(
            lambda: any(
                c["type"] == "PodsReady" and c["status"] == "True"
                for c in workload_of(first)["status"].get("conditions", [])
            )
        )
        fake.server_update(
            JOBS, f"team/{first}", {"status": {"conditions": [condition("Complete", "Done")]}}
        )
        await eventually(lambda: running(second))
        finished = {c["type"]: c for c in workload_of(first)["status"]["conditions"]}
        assert finished["Finished"]["status"] == "True"
        assert finished["Finished"]["reason"] == "Succeeded"
        assert runtime.leading and engine.scheduling
    finally:
        await stop(task)


async def test_the_heap_is_released_once_after_the_first_leaderships_first_cycle(
    engine: Engine,
) -> None:
    fake = FakeKube()
    seed_cluster(fake, workloads=3)
    elector = ManualElector(fake)
    seen_at_release: list[tuple[int, bool]] = []  # (workloads admitted, engine idle)

    async def release_heap() -> bool:
        admitted = sum(1 for w in engine.scheduler.objects.workloads.values() if w.admission)
        seen_at_release.append((admitted, engine.idle))
        return True

    runtime = ClusterRuntime(
        fake.rest, engine, elector=elector, writes=HOURLY_QUEUE_STATUS, release_heap=release_heap
    )
    runtime.heap_settle_poll = 0.0  # turns of the loop, no wall-clock wait
    task = asyncio.create_task(runtime.run())
    try:
        await until(runtime.store.synced.is_set)
        for _ in range(100):
            await asyncio.sleep(0)
        assert seen_at_release == []  # a follower does not
        elector.set(True)
        await until(lambda: bool(seen_at_release))
        # After the first cycle (it admitted what fits) and with the engine idle.
        assert seen_at_release[0][0] >= 1 and seen_at_release[0][1]
        elector.set(False)
        await until(lambda: not runtime.store.leading)
        elector.set(True)
        await until(lambda: runtime.leading)
        for _ in range(100):
            await asyncio.sleep(0)
        assert len(seen_at_release) == 1  # once per process
    finally:
        await stop(task)
