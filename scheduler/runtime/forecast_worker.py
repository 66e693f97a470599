"""The forecast worker: a separate process that keeps a replica of the published pending
order and runs the forecast method on it (docs/forecasting.md#serving).

The event loop only forwards small messages (:mod:`scheduler.runtime.forecasts`):

- :class:`Chunk`: the workload keys of one snapshot chunk the worker has not seen yet,
  with what the core needs of each (:class:`WorkloadFacts`), under an id of the loop's
  choosing (snapshot chunks are immutable and shared between snapshots, so after k
  changes only O(k) chunks travel); a long chunk travels in parts (`start` > 0 extends);
- :class:`Running`: the quota holders, in parts, when they changed;
- :class:`Sync`: one snapshot as chunk ids per ClusterQueue, with the admission rates
  and the quota tree, the configuration when it changed, the finishes not sent yet,
  the ids of chunks no snapshot holds any more, and the instant: the worker forecasts
  it at once;
- :class:`Started`: a forecast met the truth, for the method's calibration.

The worker answers each `Sync` with :class:`Results` messages of at most `BATCH` chunks,
the last one flagged. Workloads the method said nothing about get the fallback's band
(`FALLBACK_METHOD`, docs/forecasting.md#fallback), marked as such per chunk. A chunk's
bands travel as one flat array of floats in the chunk's own order (p50, low, high per
workload; NaN where no method said anything), so the loop receives no per-workload
object at all: it unpickles a few arrays per turn and finds a workload's band through
the chunk it already holds. Every message is a pickled plain dataclass on a one-way
pipe; the worker exits when its input closes.
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import sys
import time
from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Final

from scheduler.forecast.fork import Setup
from scheduler.runtime.estimates import AdmissionVelocity
from scheduler.runtime.forecast_method import (
    FALLBACK_METHOD,
    Band,
    ForecastInput,
    ForecastMethod,
    Observation,
    QueueOrder,
    make_method,
    rate_bands,
)
from scheduler.runtime.quota_snapshot import QuotaSnapshot
from scheduler.runtime.workload_records import (
    FinishedWorkload,
    Instant,
    RunningWorkload,
    WorkloadFacts,
    WorkloadKey,
)

log = logging.getLogger(__name__)

BATCH: Final = 8  # chunks per Results message (up to 16k bands, a memcpy each to unpickle)
FIELDS: Final = 3  # p50, low, high per workload
WORKER_NICENESS: Final = 10  # added to the server's own nice value


@dataclass(frozen=True, slots=True)
class Chunk:
    chunk_id: int
    keys: tuple[WorkloadKey, ...]
    facts: tuple[WorkloadFacts | None, ...] = ()  # per key, when the snapshot has them
    start: int = 0  # 0: the chunk's first part; else these keys extend it


@dataclass(frozen=True, slots=True)
class Running:
    """The quota holders; `start` 0 begins a new list, a later part extends it."""

    workloads: tuple[RunningWorkload, ...]
    start: int = 0


@dataclass(frozen=True, slots=True)
class SyncQueue:
    chunk_ids: tuple[int, ...]
    velocity: AdmissionVelocity | None


@dataclass(frozen=True, slots=True)
class Sync:
    generation: int
    made_at: Instant
    queues: Mapping[str, SyncQueue]
    forgotten: tuple[int, ...] = ()
    quota: QuotaSnapshot = field(default_factory=QuotaSnapshot)
    setup: Setup | None = None  # None: as in the previous Sync
    finished: tuple[FinishedWorkload, ...] = ()  # not sent before, oldest first
    budget_seconds: float | None = None  # for a forward run (ForecastInput's)
    budget_workloads: int | None = None  # ... likewise


@dataclass(frozen=True, slots=True)
class Started:
    observation: Observation


@dataclass(frozen=True, slots=True)
class Results:
    generation: int
    made_at: Instant
    method: str
    # per chunk id: its workloads' bands in its order, FIELDS floats each (NaN: none)
    chunks: tuple[tuple[int, array[float]], ...]
    last: bool = False
    seconds: float = 0.0  # on the last batch: the forecast's time in the worker
    cpu_seconds: float = 0.0  # ... and the worker's CPU time for it
    # per chunk id whose bands are partly FALLBACK_METHOD's: a byte per workload in the
    # chunk's order, 1 where the band is the fallback's (absent: none is)
    marked: tuple[tuple[int, bytes], ...] = ()


Inbound = Chunk | Running | Sync | Started


class Replica:
    """The worker's copy of the pending order, fed with the loop's messages (pure: the
    unit tests drive it without a process)."""

    def __init__(self, method: ForecastMethod) -> None:
        self.method = method
        self.chunks: dict[int, tuple[WorkloadKey, ...]] = {}
        self.facts: dict[int, tuple[WorkloadFacts | None, ...]] = {}
        self.running: list[RunningWorkload] = []
        self.setup: Setup | None = None

    def handle(self, message: Inbound) -> Iterator[Results]:
        """Apply one message; the Results it asks for (a Sync's, as they are made)."""
        if isinstance(message, Chunk):
            facts = message.facts
            if not facts:  # no facts (a snapshot without them): None per key
                facts = (None,) * len(message.keys)
            if message.start == 0:
                self.chunks[message.chunk_id] = message.keys
                self.facts[message.chunk_id] = facts
            else:
                self.chunks[message.chunk_id] += message.keys
                self.facts[message.chunk_id] += facts
        elif isinstance(message, Running):
            if message.start == 0:
                self.running = []
            self.running.extend(message.workloads)
        elif isinstance(message, Started):
            self.method.observe(message.observation)
        else:
            yield from self.forecast(message)

    def state_of(self, sync: Sync) -> ForecastInput:
        for chunk_id in sync.forgotten:
            self.chunks.pop(chunk_id, None)
            self.facts.pop(chunk_id, None)
        if sync.setup is not None:
            self.setup = sync.setup
        queues: dict[str, QueueOrder] = {}
        for name, queue in sync.queues.items():
            order: list[WorkloadKey] = []
            facts: list[WorkloadFacts | None] = []
            for chunk_id in queue.chunk_ids:
                order.extend(self.chunks[chunk_id])
                facts.extend(self.facts[chunk_id])
            # () when no workload of the queue came with facts
            known = facts if any(f is not None for f in facts) else ()
            queues[name] = QueueOrder(order, queue.velocity, known)
        return ForecastInput(
            sync.generation,
            sync.made_at,
            queues,
            sync.quota,
            self.setup,
            tuple(self.running),
            sync.finished,
            sync.budget_seconds,
            sync.budget_workloads,
        )

    def forecast(self, sync: Sync) -> Iterator[Results]:
        started, started_cpu = time.perf_counter(), time.process_time()
        state = self.state_of(sync)
        # Where each workload's band goes: its chunk's array, at its index there.
        arrays: dict[int, array[float]] = {}
        slots: dict[WorkloadKey, tuple[int, int]] = {}
        for queue in sync.queues.values():
            for chunk_id in queue.chunk_ids:
                keys = self.chunks[chunk_id]
                arrays[chunk_id] = array("d", [math.nan]) * (FIELDS * len(keys))
                for i, key in enumerate(keys):
                    slots[key] = (chunk_id, i)
        for key, band in self.method.forecast(state):
            slot = slots.get(key)
            if slot is not None:
                _write(arrays[slot[0]], slot[1], band)
        marked = self._fall_back(state, arrays, slots)
        seconds = time.perf_counter() - started
        cpu_seconds = time.process_time() - started_cpu
        name = self.method.name
        items = list(arrays.items())
        for start in range(0, max(1, len(items)), BATCH):
            batch = tuple(items[start : start + BATCH])
            last = start + BATCH >= len(items)
            yield Results(
                sync.generation,
                sync.made_at,
                name,
                batch,
                last,
                seconds if last else 0.0,
                cpu_seconds if last else 0.0,
                tuple(
                    (chunk_id, bytes(marked[chunk_id]))
                    for chunk_id, _ in batch
                    if chunk_id in marked
                ),
            )

    def _fall_back(
        self,
        state: ForecastInput,
        arrays: dict[int, array[float]],
        slots: dict[WorkloadKey, tuple[int, int]],
    ) -> dict[int, bytearray]:
        """Fill what the method left out with FALLBACK_METHOD's bands; per chunk that
        got any, a byte per workload, 1 where the band is the fallback's."""
        marked: dict[int, bytearray] = {}
        if self.method.name == FALLBACK_METHOD:
            return marked

        def unanswered(key: WorkloadKey) -> bool:
            chunk_id, i = slots[key]
            return math.isnan(arrays[chunk_id][FIELDS * i])

        for key, band in rate_bands(state, unanswered):
            chunk_id, i = slots[key]
            _write(arrays[chunk_id], i, band)
            marks = marked.get(chunk_id)
            if marks is None:
                marks = marked[chunk_id] = bytearray(len(arrays[chunk_id]) // FIELDS)
            marks[i] = 1
        return marked


def _write(values: array[float], i: int, band: Band) -> None:
    at = FIELDS * i
    values[at], values[at + 1], values[at + 2] = band.p50, band.low, band.high


def yield_to_the_server() -> bool:
    """Make this process background work: 10 nice levels down and, on Linux, the
    `SCHED_IDLE` policy, under which any other task that wakes on the core runs at once
    instead of after the rest of this one's time slice (docs/forecasting.md#the-worker).
    True if `SCHED_IDLE` was set."""
    os.nice(WORKER_NICENESS)
    if sys.platform != "linux":
        return False
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except OSError as err:  # a seccomp profile may refuse it; the nice value stays
        log.warning("forecast worker: SCHED_IDLE refused (%s); running niced only", err)
        return False
    return True


def worker_main(inbox: Connection, outbox: Connection, method_name: str) -> None:
    """The worker process: apply messages in order until the input closes."""
    # Forecasts are background work: where the worker shares a core with the server, the
    # server's requests and cycles go first (docs/forecasting.md#the-worker).
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s %(message)s")
    yield_to_the_server()
    replica = Replica(make_method(method_name))
    while True:
        try:
            data = inbox.recv_bytes()
        except (EOFError, OSError):
            return
        message = pickle.loads(data)
        for results in replica.handle(message):
            try:
                outbox.send_bytes(pickle.dumps(results, protocol=pickle.HIGHEST_PROTOCOL))
            except (BrokenPipeError, OSError):
                return
