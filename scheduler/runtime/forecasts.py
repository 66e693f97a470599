"""Forecasts off the event loop: the loop's side of the forecast worker
(docs/forecasting.md#serving).

Every `interval` seconds, or after a rest as long as the last refresh when that took
longer (and at once after a start), the service takes the published
snapshot, sends the worker the snapshot chunks it has not seen and one `Sync` naming the
chunks of every ClusterQueue, and applies the worker's results as they come, one small
batch per turn of the loop. The loop's share is bounded: a chunk travels in parts of
256 workloads, each pickled in one step (about 1.5 ms), the other steps are cut by a
`TimeBox`, and the pipe's blocking reads and writes run in two threads that only move
bytes. The snapshot sent may be the last holder of chunks a newer one rebuilt: it is
let go before its chunks, and those one per step, so freeing them is bounded too.

Results come back per snapshot chunk: one flat array of floats in the chunk's order, so
the loop allocates no object per workload and keeps no per-workload index (100k small
objects per refresh kept the collector busy, and a 100k-key index cost a 6 ms resize
now and then). A workload's forecast is found through the current snapshot: the chunk
that holds it, that chunk's array, the workload's index there. Each chunk's array is
stored with the refresh it came from, so every served forecast carries the snapshot
generation and the instant it was made from: what is served is never older than it
says. A workload whose chunk changed has no forecast until the next refresh covers the
new chunk. When the worker dies
(its pipe closes) or a refresh takes longer than `refresh_timeout`, that is logged, the
process is replaced after a pause (1 s doubling to 30 s) and the new one gets the whole
state again; served forecasts stay, with their own `madeAt`, until replaced.

When a workload starts, :meth:`ForecastService.record_start` scores the forecast that
was served for it (:mod:`scheduler.runtime.calibration`) and passes it to the worker's
method, which may calibrate on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import multiprocessing
import pickle
import queue
import threading
import weakref
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Final, TypeAlias

from scheduler.kubeapi.backoff import Backoff
from scheduler.runtime.calibration import LiveCalibration
from scheduler.runtime.estimates import MICROS, ServedForecast
from scheduler.runtime.forecast_method import (
    DEFAULT_METHOD,
    FALLBACK_METHOD,
    METHODS,
    Band,
    Observation,
)
from scheduler.runtime.forecast_worker import (
    FIELDS,
    Chunk,
    Inbound,
    Results,
    Running,
    Started,
    Sync,
    SyncQueue,
    worker_main,
)
from scheduler.runtime.pages import ViewChunk
from scheduler.runtime.snapshot import Snapshot
from scheduler.runtime.stepclock import TimeBox
from scheduler.runtime.workload_records import Instant

log = logging.getLogger(__name__)

RESTART: Final = Backoff(initial=1.0, factor=2.0, cap=30.0)
_STOP_SECONDS: Final = 5.0


@dataclass(frozen=True, slots=True)
class ForecastConfig:
    method: str = DEFAULT_METHOD
    interval: float = 10.0  # seconds between the starts of two full refreshes
    refresh_timeout: float = 120.0  # a refresh not done by then: the worker is replaced
    # A forward run stops where it got to after this many seconds of wall time, so a
    # refresh ends within about 30 s with what it found; the workloads it did not reach
    # get the fallback's band (docs/forecasting.md#when-the-run-is-cut).
    run_seconds: float = 20.0
    # ... and models at most this many pending workloads, the first of each ClusterQueue:
    # building the state of a million took longer than the whole budget, and 2 GiB
    # (docs/forecasting.md#how-deep-the-run-looks).
    run_workloads: int = 100_000
    step_budget: float = 0.003  # the longest stretch the service runs on the loop

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            known = ", ".join(sorted(METHODS))
            raise ValueError(f"unknown forecast method {self.method!r} (known: {known})")
        if self.interval <= 0:
            raise ValueError("the forecast interval must be positive")
        if not 0 < self.run_seconds < self.refresh_timeout:
            raise ValueError(
                "the forward run's budget must be positive and shorter than the refresh timeout"
            )
        if self.run_workloads < 1:
            raise ValueError("the forward run must model at least one workload")


@dataclass(slots=True)
class ForecastStats:
    """What serving forecasts costs and how it goes; read by tests, benchmarks, /metrics."""

    refreshes: int = 0  # refreshes whose last result arrived
    restarts: int = 0  # worker processes replaced after a death or a timeout
    chunks_sent: int = 0
    last_refresh_seconds: float = 0.0  # from the first message sent to the last applied
    last_worker_seconds: float = 0.0  # the method's own time in the worker
    last_worker_cpu_seconds: float = 0.0  # ... and the worker's CPU time for it
    last_made_at: Instant | None = None  # of the newest complete refresh
    last_served: int = 0  # bands in the newest complete refresh
    last_fallback: int = 0  # ... of which FALLBACK_METHOD's
    max_step_seconds: float = 0.0  # the longest stretch on the loop (wall)
    max_step_cpu_seconds: float = 0.0  # the most CPU one stretch used
    worker_pid: int | None = None


@dataclass(frozen=True, slots=True)
class _Refresh:
    """What the bands of one refresh share."""

    method: str
    made_at: Instant
    generation: int


_Served: TypeAlias = "tuple[_Refresh, array[float], bytes]"  # a chunk's bands, FIELDS floats
# per workload, and the Results' marks of the ones that are FALLBACK_METHOD's (b"": none)
_PICKLE_SECONDS_PER_KEY: Final = 1.5e-6  # about what pickling one (namespace, name) costs
# ... and one workload's facts or a quota holder (its pod sets are shared by many, but
# not always within one message); parts of _PART keep one pickling step near 1-2 ms.
_PICKLE_SECONDS_PER_FACT: Final = 6e-6
_PART: Final = 256
_FREE_SECONDS_PER_CHUNK: Final = 0.5e-3  # freeing a 1,024-entry chunk (measured 0.4 ms)


def refresh_delay(started: float, finished: float, interval: float) -> float:
    """Seconds to wait before the next refresh: until `interval` after the last one
    started, and at least as long as the last one took, so the worker is busy at most
    half the time however deep the queues get (docs/forecasting.md#the-worker)."""
    took = finished - started
    return max(started + interval - finished, took, 0.0)


async def _release(box: TimeBox, chunks: dict[ViewChunk, int]) -> None:
    """Drop the references to `chunks` one at a time, within `box`'s stretches.

    The sent snapshot may be the last holder of the chunks a newer snapshot rebuilt:
    letting it go at once freed them all in one stretch, about 0.4 ms of CPU per chunk
    of 1,024 entries, 12 ms for 29 chunks at 100k pending (docs/benchmarks.md, "The
    loop's longest forecast stretch"). One chunk at a time, each after room was made for it, keeps
    that within the step budget however many chunks the publisher rebuilt.
    """
    while chunks:
        await box.pause(ahead=_FREE_SECONDS_PER_CHUNK)
        chunks.popitem()


class WorkerLostError(Exception):
    """The worker's pipe closed, or a refresh took too long."""


@dataclass
class _Worker:
    """One worker process and the two threads that move bytes over its pipes."""

    process: BaseProcess
    to_worker: Connection
    from_worker: Connection
    inbox: asyncio.Queue[bytes | None]
    outbox: queue.SimpleQueue[bytes | None] = field(default_factory=queue.SimpleQueue)
    threads: list[threading.Thread] = field(default_factory=list)

    def send(self, message: Inbound) -> None:
        """Pickle on the caller's thread (bounded by the message), write in the writer's."""
        self.outbox.put(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))

    async def receive(self, timeout: float) -> Results:
        try:
            data = await asyncio.wait_for(self.inbox.get(), timeout)
        except TimeoutError:
            raise WorkerLostError(f"no result for {timeout:.0f}s") from None
        if data is None:
            raise WorkerLostError(f"exit code {self.process.exitcode}")
        result: Results = pickle.loads(data)
        return result

    def start_threads(self, loop: asyncio.AbstractEventLoop) -> None:
        def write() -> None:
            # The writer owns the input: closing it is the worker's EOF, and no other
            # thread may close it under a write.
            try:
                while (data := self.outbox.get()) is not None:
                    self.to_worker.send_bytes(data)
            except OSError:
                pass
            finally:
                self.to_worker.close()

        def read() -> None:
            while True:
                try:
                    data = self.from_worker.recv_bytes()
                except (EOFError, OSError):
                    break
                loop.call_soon_threadsafe(self.inbox.put_nowait, data)
            with contextlib.suppress(RuntimeError):  # the loop closed first
                loop.call_soon_threadsafe(self.inbox.put_nowait, None)

        self.threads = [
            threading.Thread(target=write, name="forecast-writer", daemon=True),
            threading.Thread(target=read, name="forecast-reader", daemon=True),
        ]
        for thread in self.threads:
            thread.start()

    def close(self) -> None:
        """Stop the writer (it closes the input: the worker exits), make sure the
        process has gone, then close the output. Blocking: run it in a thread."""
        self.outbox.put(None)
        writer = self.threads[0] if self.threads else None
        if writer is not None:
            writer.join(_STOP_SECONDS)  # a hung worker may leave it blocked in a write
        stopped = writer is None or not writer.is_alive()
        self.process.join(_STOP_SECONDS if stopped else 0)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(_STOP_SECONDS)
        for thread in self.threads:
            thread.join(_STOP_SECONDS)  # the dead process's pipes fail their reads and writes
        self.from_worker.close()


class ForecastService:
    """Feeds the forecast worker from published snapshots and serves its results."""

    def __init__(
        self,
        snapshot: Callable[[], Snapshot],
        clock: Callable[[], Instant],
        config: ForecastConfig | None = None,
        calibration: LiveCalibration | None = None,
    ) -> None:
        self._snapshot = snapshot
        self._clock = clock
        self.config = config if config is not None else ForecastConfig()
        self.calibration = calibration if calibration is not None else LiveCalibration()
        self.stats = ForecastStats()
        # The chunks the worker holds (those of the last snapshot sent), by our id for
        # them, and the bands of each, from the refresh that made them. Weakly: a chunk
        # that no published snapshot holds any more is gone here too, not kept until
        # the next refresh (a rebuilt snapshot at 100k pending is tens of MiB,
        # docs/benchmarks.md "Cluster-mode memory", fifth round); `_held` keeps the ids.
        self._ids_of: weakref.WeakKeyDictionary[ViewChunk, int] = weakref.WeakKeyDictionary()
        self._held: frozenset[int] = frozenset()
        self._bands: dict[int, _Served] = {}
        self._known: set[int] = set()  # the ids the current worker process holds
        # What the current worker process was sent of the rest (identity compares).
        self._sent_setup: object = None
        self._sent_running: object = None
        self._sent_finished = 0  # the seq of the last finish sent
        self._ids = itertools.count()
        self._worker: _Worker | None = None
        self._refreshed = asyncio.Event()

    # -- reading ---------------------------------------------------------------------
    def forecast(self, namespace: str, name: str) -> ServedForecast | None:
        """The forecast served for a pending workload, if any. O(1)."""
        snapshot = self._snapshot()
        cluster_queue = snapshot.workloads.get((namespace, name))
        view = snapshot.view(cluster_queue) if cluster_queue is not None else None
        chunk = view.chunk_of(namespace, name) if view is not None else None
        chunk_id = self._ids_of.get(chunk) if chunk is not None else None
        served = self._bands.get(chunk_id) if chunk_id is not None else None
        if served is None or chunk is None:
            return None
        refresh, values, marks = served
        index = chunk.index_of[(namespace, name)]
        i = FIELDS * index
        p50, low, high = values[i], values[i + 1], values[i + 2]
        if not (math.isfinite(p50) and math.isfinite(low) and math.isfinite(high)):
            return None  # NaN: the method said nothing; an infinite start is no instant
        at = refresh.made_at
        return ServedForecast(
            FALLBACK_METHOD if marks and marks[index] else refresh.method,
            at,
            refresh.generation,
            at + round(p50 * MICROS),
            at + round(low * MICROS),
            at + round(high * MICROS),
        )

    async def wait_refreshed(self) -> None:
        """Until the next refresh is complete (tests)."""
        self._refreshed.clear()
        await self._refreshed.wait()

    def record_start(self, key: str, cluster_queue: str, started_at: Instant) -> None:
        """`key` ("namespace/name") started in `cluster_queue`: score what was served."""
        namespace, _, name = key.partition("/")
        served = self.forecast(namespace, name)
        if served is None:
            return
        self.calibration.record(cluster_queue, served, started_at)
        if self._worker is not None:
            band = Band(
                (served.p50 - served.made_at) / MICROS,
                (served.low - served.made_at) / MICROS,
                (served.high - served.made_at) / MICROS,
            )
            observed = Observation(
                cluster_queue, (namespace, name), served.made_at, band, started_at
            )
            self._worker.send(Started(observed))

    # -- running ---------------------------------------------------------------------
    async def run(self) -> None:
        """Run and replace the worker until cancelled."""
        failures = 0
        while True:
            spawn = TimeBox(self.config.step_budget)
            worker = self._start_worker()
            try:
                # Starting the process (1 to 2.5 ms of CPU) is a stretch of its own, not
                # the start of the first refresh's.
                await spawn.yield_()
                self._record(spawn)
                await self._serve(worker)
            except Exception as died:
                # Anything else is a bug in feeding or reading the worker (a message
                # that does not pickle, ...): it must not end forecasting for good.
                if not isinstance(died, WorkerLostError):
                    log.exception("msg=%r", "forecast refresh failed")
                failures += 1
                self.stats.restarts += 1
                delay = RESTART.delay(failures - 1)
                log.error(
                    "event=forecast-worker-died pid=%s reason=%r restart_in=%.1fs",
                    worker.process.pid,
                    str(died),
                    delay,
                )
                await self._stop_worker(worker)
                await asyncio.sleep(delay)
                continue
            except BaseException:
                await asyncio.shield(self._stop_worker(worker))
                raise

    def _start_worker(self) -> _Worker:
        context = multiprocessing.get_context("spawn")
        worker_in, to_worker = context.Pipe(duplex=False)
        from_worker, worker_out = context.Pipe(duplex=False)
        process = context.Process(
            target=worker_main,
            args=(worker_in, worker_out, self.config.method),
            name="queuescope-forecast",
            daemon=True,
        )
        process.start()
        worker_in.close()
        worker_out.close()
        loop = asyncio.get_running_loop()
        worker = _Worker(process, to_worker, from_worker, asyncio.Queue())
        worker.start_threads(loop)
        # A new process knows nothing: every chunk is sent again, under the same ids, so
        # what was served stays until the new worker's results replace it.
        self._known = set()
        self._sent_setup = self._sent_running = None
        self._sent_finished = 0
        self._worker = worker
        self.stats.worker_pid = process.pid
        log.info("event=forecast-worker-started pid=%s method=%s", process.pid, self.config.method)
        return worker

    async def _stop_worker(self, worker: _Worker) -> None:
        if self._worker is worker:
            self._worker = None
        await asyncio.to_thread(worker.close)

    async def _serve(self, worker: _Worker) -> None:
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            # The snapshot sent is not kept in this frame: `_send` lets it go while the
            # worker works (the chunks it holds stay only as long as a newer snapshot
            # shares them). One box for the whole refresh, so every stretch between its
            # yields is bounded and measured, the one that sends the Sync too.
            box = TimeBox(self.config.step_budget)
            if await self._send(worker, box):
                await self._receive(worker, box, started)
            delay = refresh_delay(started, loop.time(), self.config.interval)
            if delay > 0:
                # Sleep, but notice a death at once.
                with contextlib.suppress(TimeoutError):
                    data = await asyncio.wait_for(worker.inbox.get(), delay)
                    if data is None:
                        raise WorkerLostError(f"exit code {worker.process.exitcode}")

    async def _send(self, worker: _Worker, box: TimeBox) -> bool:
        """The published snapshot's chunks the worker lacks, then the Sync, in stretches
        of `step_budget`; False, sending nothing, while it is not synced. The snapshot is
        taken once and let go before its chunks, which are let go one per step."""
        snapshot = self._snapshot()
        if not snapshot.synced:
            return False
        queues, held = await self._send_chunks(worker, box, snapshot)
        held_ids = frozenset(held.values())
        gone = [chunk_id for chunk_id in self._held if chunk_id not in held_ids]
        self._ids_of = weakref.WeakKeyDictionary(held)
        self._held = held_ids
        for chunk_id in gone:
            self._bands.pop(chunk_id, None)
            self._known.discard(chunk_id)
        await self._send_running(worker, box, snapshot)
        setup = snapshot.setup if snapshot.setup is not self._sent_setup else None
        self._sent_setup = snapshot.setup
        finished = tuple(f for f in snapshot.finished if f.seq > self._sent_finished)
        if finished:
            self._sent_finished = finished[-1].seq
        await box.pause(ahead=_PICKLE_SECONDS_PER_FACT * len(finished))
        made_at = self._clock()
        worker.send(
            Sync(
                snapshot.generation,
                made_at,
                queues,
                tuple(gone),
                snapshot.quota,
                setup,
                finished,
                self.config.run_seconds,
                self.config.run_workloads,
            )
        )
        del snapshot
        await _release(box, held)
        return True

    async def _send_chunks(
        self, worker: _Worker, box: TimeBox, snapshot: Snapshot
    ) -> tuple[dict[str, SyncQueue], dict[ViewChunk, int]]:
        """Send the snapshot's chunks the worker lacks: each queue's chunk ids, and every
        chunk with its id (held, strongly, until `_release`)."""
        queues: dict[str, SyncQueue] = {}
        held: dict[ViewChunk, int] = {}
        for name, view in snapshot.views.items():
            ids: list[int] = []
            for chunk in view.chunks:
                chunk_id = self._ids_of.get(chunk)
                if chunk_id is None:
                    chunk_id = next(self._ids)
                if chunk_id not in self._known:
                    await self._send_chunk(worker, box, chunk_id, chunk)
                held[chunk] = chunk_id
                ids.append(chunk_id)
                await box.pause()
            queues[name] = SyncQueue(tuple(ids), snapshot.velocities.get(name))
        return queues, held

    async def _send_chunk(
        self, worker: _Worker, box: TimeBox, chunk_id: int, chunk: ViewChunk
    ) -> None:
        """A chunk's keys and facts, in parts: pickling a part is one step, so room
        is made for it first."""
        keys = tuple(chunk.index_of)  # in the chunk's order
        entries = chunk.entries
        for start in range(0, max(1, len(keys)), _PART):
            part = keys[start : start + _PART]
            await box.pause(ahead=(_PICKLE_SECONDS_PER_KEY + _PICKLE_SECONDS_PER_FACT) * len(part))
            facts = tuple(e.facts for e in entries[start : start + _PART])
            worker.send(Chunk(chunk_id, part, facts, start))
        self._known.add(chunk_id)
        self.stats.chunks_sent += 1

    async def _send_running(self, worker: _Worker, box: TimeBox, snapshot: Snapshot) -> None:
        """The quota holders, in parts, if they changed since the last send."""
        running = snapshot.running
        if running is self._sent_running:
            return
        for start in range(0, max(1, len(running)), _PART):
            part = running[start : start + _PART]
            await box.pause(ahead=_PICKLE_SECONDS_PER_FACT * len(part))
            worker.send(Running(part, start))
        self._sent_running = running

    async def _receive(self, worker: _Worker, box: TimeBox, started: float) -> None:
        """Apply the results of the Sync just sent, one batch per turn of the loop."""
        loop = asyncio.get_running_loop()
        deadline = started + self.config.refresh_timeout
        refresh: _Refresh | None = None
        served = fallback = 0
        held = self._held
        while True:
            box.end()
            results = await worker.receive(max(0.0, deadline - loop.time()))
            box.restart()
            if refresh is None or refresh.generation != results.generation:
                refresh = _Refresh(results.method, results.made_at, results.generation)
            marked = dict(results.marked)
            for chunk_id, values in results.chunks:
                if chunk_id in held:  # else no snapshot holds it any more
                    marks = marked.get(chunk_id, b"")
                    self._bands[chunk_id] = (refresh, values, marks)
                    served += len(values) // FIELDS
                    fallback += marks.count(1)
            if results.last:
                break
        box.end()
        stats = self.stats
        stats.refreshes += 1
        stats.last_refresh_seconds = loop.time() - started
        stats.last_worker_seconds = results.seconds
        stats.last_worker_cpu_seconds = results.cpu_seconds
        stats.last_made_at = results.made_at
        stats.last_served = served
        stats.last_fallback = fallback
        self._record(box)
        self._refreshed.set()

    def _record(self, box: TimeBox) -> None:
        self.stats.max_step_seconds = max(self.stats.max_step_seconds, box.max)
        self.stats.max_step_cpu_seconds = max(self.stats.max_step_cpu_seconds, box.max_cpu)

    def worker_resident_bytes(self) -> int | None:
        """The worker's resident memory (Linux `/proc`), None when unknown."""
        pid = self.stats.worker_pid
        if pid is None:
            return None
        try:
            with open(f"/proc/{pid}/status", encoding="ascii") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            return None
        return None


__all__ = ["ForecastConfig", "ForecastService", "ForecastStats", "WorkerLostError"]
