"""The asyncio driver of the scheduler core on the real clock.

One task owns the core. Each turn of its loop it

1. applies the queued commands (object changes and job signals), in slices of a few
   milliseconds so a large initial load does not stall the loop;
2. fires the timed rules that are due (waitForPodsReady timeouts, requeue backoff,
   maximum execution time) and finalises the evictions they issue;
3. runs scheduling cycles while they make progress, yielding to the loop between
   cycles; a cycle costs O(#ClusterQueues × log n), whatever the queue lengths;
4. sleeps until the next command, the next deadline, or an idle tick.

A second task, the :class:`SnapshotPublisher`, turns the changes into immutable
snapshots for the visibility server, at most one per publish interval.

"Progress" mirrors the simulator (docs/scheduling.md#cycle-steps): a cycle that admitted or
preempted is followed by another at once; an unproductive cycle is followed by
another only while it changed something a next cycle would see (queue sizes, or the
flavor scan position of the heads), and each such state is tried once. After that
the core is idle until an event arrives: it is deterministic, so retrying an
unchanged state on a timer would only repeat the same decision.

The engine drains the core's change feed (:mod:`scheduler.core.changes`) after every
step: the workloads admitted, evicted or examined as heads are touched for the status
writer, the heads also decide whether another cycle can make progress, and the
ClusterQueues whose order may have changed are kept for the publisher's next capture.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from scheduler.api import ClusterQueue, Workload
from scheduler.core.changes import Changes
from scheduler.core.clock import MICROS_PER_SECOND, Instant
from scheduler.core.cycle import run_cycle
from scheduler.core.ingest import apply_object, delete_object
from scheduler.core.pods_ready import Deadline, admission_blocked, deadlines, fire_due
from scheduler.core.scheduler import Scheduler
from scheduler.lang.readonly import ReadOnly
from scheduler.runtime.commands import (
    ApplyObject,
    Barrier,
    Command,
    DeleteObject,
    Finish,
    MarkSynced,
    PodsReady,
    SetActive,
    SetOnHold,
    SetReclaimable,
    SetWaitingForReplacements,
)
from scheduler.runtime.cycle_fingerprint import cycle_fingerprint
from scheduler.runtime.estimates import AdmissionRates
from scheduler.runtime.heap_freezing import FreezePolicy, GcPacer
from scheduler.runtime.publisher import (
    DEFAULT_SLICE,
    PublisherLinks,
    PublishPacing,
    SnapshotPublisher,
)
from scheduler.runtime.repeat_detector import RepeatDetector
from scheduler.runtime.snapshot import Snapshot
from scheduler.runtime.stepclock import Stamp, TimeBox, since, stamp
from scheduler.runtime.touched_keys import QueueMarks

log = logging.getLogger(__name__)

FULL_DEADLINE_SCAN_SECONDS = 10.0
DEADLINE_KEYS_PER_CHECK = 2048  # deadline recomputations between two looks at the clock
# The engine's publisher freezes the heap after this many new snapshot entries and map
# writes (scheduler.runtime.heap_freezing). A full collection walks everything allocated since the
# last freeze: at 1,000 arrivals/s, freezing every 10,000 entries still let one pass
# reach 104 ms in loop-lag's 30 s (188 ms passes without freezing); every 2,000 keeps
# what a pass can find to about two seconds of arrivals.
ENGINE_FREEZE_AFTER = 2_000


def _admission_stays_blocked() -> bool:
    """The engine's `block_waiter` (docs/scheduling.md#blocking-admission).

    In the simulator the cycle suspends and the driver advances virtual time until
    the blocking workloads are ready. On the real clock the cycle cannot wait: the
    pods-ready signal it waits for arrives as a command on this very loop, which a
    synchronous cycle would block. So the waiter reports that nothing can unblock
    admission now: the cycle marks the entry `QuotaReserved=False`/`Waiting` and ends,
    the entry is requeued, and the engine runs a new cycle after the next event (a
    pods-ready signal, a finish, a timeout). The check runs again for that entry, so
    admissions stay serialised cluster-wide, as docs/scheduling.md#blocking-admission requires.
    """
    return False


@dataclass(slots=True)
class EngineStats:
    commands: int = 0
    command_errors: int = 0
    cycles: int = 0
    admitted: int = 0
    preempted: int = 0
    deadlines_fired: int = 0
    max_step_seconds: float = 0.0  # longest synchronous stretch of the engine task
    max_step_cpu_seconds: float = 0.0  # the most CPU one stretch used (stepclock)
    # The longest stretch of each kind: "commands" (a slice of queued commands),
    # "deadlines" (timed rules and unblocking), "cycle" (one scheduling cycle),
    # "cycles" (consecutive cycles run without yielding, with the commands and
    # deadlines applied between them), "scan" (the deadline scan before waiting).
    max_step_by_kind: dict[str, float] = field(default_factory=dict)
    max_step_cpu_by_kind: dict[str, float] = field(default_factory=dict)

    def reset_maxima(self) -> None:
        """Start a new window for the step maxima (benchmarks measure one window)."""
        self.max_step_seconds = 0.0
        self.max_step_cpu_seconds = 0.0
        self.max_step_by_kind = {}
        self.max_step_cpu_by_kind = {}


@dataclass(frozen=True, slots=True)
class EngineBudgets:
    """How long the engine may hold the loop, and how often it wakes when idle
    (docs/architecture.md, "The runtime on one event loop")."""

    idle_tick: float = 1.0  # seconds between wake-ups with nothing to do
    command_budget: float = 0.005  # seconds of commands or cycles per stretch
    slice_size: int = DEFAULT_SLICE  # keys per publisher slice between yields


DEFAULT_BUDGETS = EngineBudgets()


class Engine:
    # Read by the runtime's other parts; set only by the engine (its commands and loop).
    synced = ReadOnly[bool]()  # True once the initial load is applied (a `MarkSynced` command)
    running = ReadOnly[bool]()
    scheduling = ReadOnly[bool]()  # leader: cycles and timed rules run (`set_scheduling`)

    def __init__(
        self,
        scheduler: Scheduler,
        *,
        publish_interval: float = 0.2,
        scheduling: bool = True,
        gc_pacer: GcPacer | None = None,
        budgets: EngineBudgets = DEFAULT_BUDGETS,
    ) -> None:
        self.scheduler = scheduler
        # Nothing on the runtime's side shows a workload's API object (snapshots and
        # status are built from the core's records), so it is not kept.
        scheduler.set_keep_objects(False)
        # Off on a follower replica (docs/cluster.md#high-availability): it applies what the leader
        # wrote and publishes snapshots, but runs no cycles and fires no timed rules.
        self._scheduling = scheduling
        self.idle_tick = budgets.idle_tick
        self.command_budget = budgets.command_budget
        self._synced = False
        # Fed with every admission on the scheduler's clock; read by the publisher.
        self.rates = AdmissionRates()
        # Runs the cyclic collector between steps while the engine runs (the servers
        # pass one; tests and the simulator keep CPython's own schedule).
        self.gc_pacer = gc_pacer
        # The queue marks drained from the core's feed, until the publisher takes them.
        scheduler.follow_changes()
        self._marks = Changes()
        self.publisher = SnapshotPublisher(
            scheduler,
            pacing=PublishPacing(interval=publish_interval, slice_size=budgets.slice_size),
            links=PublisherLinks(
                synced=lambda: self._synced,
                rates=self.rates,
                collector=FreezePolicy(ENGINE_FREEZE_AFTER),
                changes=self._marks_for_publisher,
            ),
        )
        scheduler.set_block_waiter(_admission_stays_blocked)
        self._commands: asyncio.Queue[Command] = asyncio.Queue()
        self._wakeup = asyncio.Event()
        self._idle = asyncio.Event()
        self._done = asyncio.Event()
        self._running = False
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._needs_cycle = True
        # The deadlines of every workload that has one, recomputed only for workloads
        # that changed (`_deadline_dirty`): a workload's deadlines depend on its own
        # state alone. A periodic full pass over the quota holders is the safety net.
        self._deadlines: dict[str, list[Deadline]] = {}
        self._deadline_dirty: set[str] = set()
        self._deadline_full_at = float("-inf")
        # ClusterQueues whose heads a blocked cycle left behind (see _unblock).
        self._blocked_heads: set[str] = set()
        # Workloads whose status may have changed since the status writer last looked.
        self._touched: set[str] = set()
        self.touched_event = asyncio.Event()
        # When the engine last gave the loop a turn (a stretch of cycles is measured
        # from it; `_settle` resets it when it yields between command slices).
        self._stretch = TimeBox(budgets.command_budget)
        self.stats = EngineStats()
        # Called with (workload key, ClusterQueue, instant) for every admission (the
        # forecasts' live calibration records the forecast then served).
        self.admission_observers: list[Callable[[str, str, Instant], None]] = []

    # -- reading ---------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The current published snapshot: read it once per request."""
        return self.publisher.snapshot()

    @property
    def generation(self) -> int:
        return self.publisher.generation

    async def wait_for_change(self, timeout: float, *, after: int | None = None) -> Snapshot:
        """Long-poll helper: the first snapshot with a generation other than `after`
        (default: the current one), or the current one after `timeout` seconds."""
        return await self.publisher.wait_for_change(timeout, after=after)

    def set_scheduling(self, on: bool) -> None:
        """Start (leader) or stop (follower) scheduling cycles and timed rules."""
        if on == self._scheduling:
            return
        self._scheduling = on
        if on:
            self._needs_cycle = True
        self._wakeup.set()

    def take_touched(self) -> set[str]:
        """The workload keys whose status may have changed since the last call."""
        keys, self._touched = self._touched, set()
        self.touched_event.clear()
        return keys

    def _drain(self) -> Changes:
        """Take what the core recorded since the last drain: touch the workloads it
        names, keep the queue marks for the publisher."""
        changes = self.scheduler.take_changes()
        if changes:
            self._marks.merge(Changes(queues=changes.queues))
            self._touch(changes.admitted)
            self._touch(changes.evicted)
            self._touch(key for _, key in changes.heads)
        return changes

    def _marks_for_publisher(self) -> QueueMarks:
        self._drain()
        marks, self._marks = self._marks.queues, Changes()
        return marks

    def _touch(self, keys: Iterable[str]) -> None:
        keys = list(keys)
        self._touched.update(keys)
        self._deadline_dirty.update(keys)
        if self._touched:
            self.touched_event.set()

    # -- feeding ---------------------------------------------------------------------
    def submit(self, command: Command) -> None:
        """Queue a command; it is applied on the engine's loop, in submission order."""
        self._commands.put_nowait(command)
        self._idle.clear()
        self._wakeup.set()

    async def flush(self) -> None:
        """Wait until every command submitted before this call has been applied."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.submit(Barrier(done))
        if not self._running:
            self.apply_pending()
        await done

    @property
    def idle(self) -> bool:
        """True while the running engine waits for work (see :meth:`wait_idle`)."""
        return self._idle.is_set()

    async def wait_idle(self) -> None:
        """Wait until the running engine has applied everything and has nothing left
        to try (it then waits for a command or a deadline)."""
        await self._idle.wait()

    def apply_pending(self) -> int:
        """Apply every queued command now, synchronously (tests, or before `run`)."""
        applied = 0
        changed = False
        while not self._commands.empty():
            changed = self._apply(self._commands.get_nowait()) or changed
            applied += 1
        if applied:
            self._after_changes()
            self._drain()
        if changed:
            self._needs_cycle = True
            self.publisher.request()
        return applied

    async def publish_now(self) -> bool:
        """Publish a snapshot now, outside the coalescing schedule (tests, shutdown)."""
        return await self.publisher.publish()

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> asyncio.Task[None]:
        """Run the engine in a task of the current loop (until :meth:`stop`)."""
        if self._task is None or self._task.done():
            self._stopping = False
            self._task = asyncio.get_running_loop().create_task(self.run(), name="engine")
        return self._task

    async def stop(self) -> None:
        """Stop after the current step; returns once `run` has returned."""
        self._stopping = True
        self._wakeup.set()
        if self._task is not None and not self._task.done():
            await self._task
        elif self._running:
            await self._done.wait()

    async def run(self) -> None:
        """The engine loop; returns after :meth:`stop`. Use it directly (e.g. in a task
        group) or through :meth:`start`."""
        if self._running:
            raise RuntimeError("the engine is already running")
        self._running = True
        self._done.clear()
        loop = asyncio.get_running_loop()
        publisher = loop.create_task(self.publisher.run(), name="snapshot-publisher")
        pacer = None
        if self.gc_pacer is not None:
            pacer = loop.create_task(self.gc_pacer.run(), name="gc-pacer")
        self.publisher.request()
        try:
            while not self._stopping:
                if await self._settle():
                    self._needs_cycle = True
                if self._needs_cycle and self._scheduling and not self._stopping:
                    self._needs_cycle = False
                    await self._run_cycles()
                    continue
                await self._wait_for_work()
        finally:
            for task in (publisher, pacer):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            self._running = False
            self._idle.clear()
            self._done.set()

    # -- one turn --------------------------------------------------------------------
    async def _settle(self) -> bool:
        """Apply one time-boxed slice of the queued commands, then the due deadlines.

        One slice per call: the callers run cycles between slices. Applying every
        queued command before the next cycle let a steady backlog (arrivals faster than
        a loop short of CPU applies them) starve the cycles: loop-lag once admitted 54
        workloads in 30 s that way, with the quota free."""
        changed = False
        if not self._commands.empty() and not self._stopping:
            box = TimeBox(self.command_budget)
            while not self._commands.empty() and not box.spent():
                changed = self._apply(self._commands.get_nowait()) or changed
            self._after_changes()
            self._drain()
            self._record_step(box.started, "commands")
            if not self._commands.empty():
                await box.yield_()
                self._stretch.restart()
        if self._scheduling:
            started = stamp()
            changed = self._fire_deadlines() or changed
            changed = self._unblock() or changed
            self._drain()
            self._record_step(started, "deadlines")
        if changed:
            self.publisher.request()
        return changed

    def _apply(self, command: Command) -> bool:
        """Apply one command; True if scheduling state may have changed.

        A failing command is logged and skipped: one bad object or signal must never
        stop the engine.
        """
        s = self.scheduler
        self.stats.commands += 1
        try:
            if isinstance(command, Barrier):
                if not command.done.done():
                    command.done.set_result(None)
                return False
            if isinstance(command, MarkSynced):
                if not self._synced:
                    self._synced = True
                    log.info("event=synced workloads=%d", len(s.objects.workloads))
                self.publisher.request()
                return False
            if isinstance(command, ApplyObject):
                self._apply_object(command)
            elif isinstance(command, DeleteObject):
                delete_object(s, command.kind, command.namespace, command.name)
            else:
                self._apply_signal(command)
            s.finalize_evictions()
        except Exception:
            self.stats.command_errors += 1
            log.exception("event=command-failed command=%s", type(command).__name__)
        return True

    def _apply_object(self, command: ApplyObject) -> None:
        s = self.scheduler
        obj = command.obj
        apply_object(s, obj, keep_status=command.keep_status)
        if isinstance(obj, Workload):
            self._touch((f"{obj.metadata.namespace}/{obj.metadata.name}",))
        else:
            # Queue and flavor changes can stop, drain or re-admit quota holders.
            self._touch(s.holders.all_keys())
        if isinstance(obj, ClusterQueue):
            problem = s.queue_plugin_error(obj.metadata.name)
            if problem is not None:
                log.warning(
                    "event=queue-plugin-error clusterQueue=%s error=%r",
                    obj.metadata.name,
                    problem,
                )

    def _apply_signal(self, command: Command) -> None:
        """A signal about one workload: it finished, its pods are ready, (de)activated."""
        s = self.scheduler
        if isinstance(command, Finish):
            s.finish(
                command.key,
                failed=command.failed,
                reason=command.reason,
                message=command.message,
            )
        elif isinstance(command, PodsReady):
            s.pods_ready(command.key)
        elif isinstance(command, SetActive):
            s.set_active(command.key, command.active)
        elif isinstance(command, SetReclaimable):
            s.set_reclaimable(command.key, dict(command.counts))
        elif isinstance(command, SetWaitingForReplacements):
            s.set_waiting_for_replacements(command.key, command.waiting)
        elif isinstance(command, SetOnHold):
            s.set_on_hold(command.key, command.message)
        else:
            return
        self._touch((command.key,))

    def _after_changes(self) -> None:
        s = self.scheduler
        s.finalize_evictions()
        s.observe_conditions()

    # -- deadlines -------------------------------------------------------------------
    def _scan_deadlines(self) -> tuple[bool, Instant | None]:
        """(is any deadline due now, the earliest future one).

        `pods_ready.next_deadline` walks every workload, which is O(n) with 100k
        pending, and even walking every quota holder after each cycle dominated the
        loop in cluster mode; so deadlines are cached per workload and recomputed
        for the workloads that changed since the last scan.
        """
        s = self.scheduler
        now = s.now()
        started = time.monotonic()
        if started - self._deadline_full_at > FULL_DEADLINE_SCAN_SECONDS:
            self._deadline_full_at = started
            self._deadline_dirty.update(s.holders.all_keys())
            self._deadline_dirty.update(self._deadlines)
        dirty = self._deadline_dirty
        box = TimeBox(self.command_budget)
        while dirty:
            # The rescan of every holder costs 2-4 us each with waitForPodsReady: at
            # 100k running workloads, hundreds of ms in one go. The rest waits for the
            # engine's next turn (docs/architecture.md, "The runtime on one event loop").
            for _ in range(min(len(dirty), DEADLINE_KEYS_PER_CHECK)):
                key = dirty.pop()
                wl = s.workload(key)
                found = deadlines(s, wl) if wl is not None else []
                if found:
                    self._deadlines[key] = found
                else:
                    self._deadlines.pop(key, None)
            if box.spent():
                break
        due = False
        # With keys still to recompute, the engine comes back at once rather than
        # sleeping until a deadline it does not know yet.
        earliest: Instant | None = now if dirty else None
        for found in self._deadlines.values():
            for d in found:
                if d.at <= now:
                    due = True
                elif earliest is None or d.at < earliest:
                    earliest = d.at
        return due, earliest

    def _fire_deadlines(self) -> bool:
        due, _ = self._scan_deadlines()
        if not due:
            return False
        keys = list(self._deadlines)
        self._touch(keys)  # they change, and so may their deadlines
        fired = fire_due(self.scheduler, keys)
        self.stats.deadlines_fired += fired
        self._after_changes()
        return fired > 0

    def _unblock(self) -> bool:
        """After a cycle stopped on docs/scheduling.md#blocking-admission, its other heads were
        requeued as if never tried, which under BestEffortFIFO parks them; upstream would have
        admitted them in the same cycle after the wait. Once admission is unblocked, their
        ClusterQueues are flushed so the next cycle tries them."""
        s = self.scheduler
        if not self._blocked_heads or admission_blocked(s):
            return False
        cqs = sorted(self._blocked_heads)
        self._blocked_heads.clear()
        s.retry(cqs)
        return True

    # -- cycles ----------------------------------------------------------------------
    async def _run_cycles(self) -> None:
        """Cycles while they make progress. Consecutive cycles share one stretch of
        the loop up to `command_budget` (a cycle at 100k pending costs well under a
        millisecond): yielding after every single cycle made each admission wait a
        whole turn of a busy loop, and admissions fell behind the finishes."""
        s = self.scheduler
        idle = RepeatDetector()
        self._stretch = TimeBox(self.command_budget)
        while not self._stopping:
            started = stamp()
            self._drain()  # so that what the next drain holds is this cycle's
            stats = run_cycle(s)
            s.observe_conditions()
            heads = self._drain().heads
            self._record_step(started, "cycle")
            self._record_step(self._stretch.started, "cycles")
            if not stats.ran:
                return
            self.stats.cycles += 1
            self.stats.admitted += len(stats.admitted)
            self._observe_admissions(stats.admitted)
            self.stats.preempted += len(stats.preempted)
            self.publisher.request()
            if stats.blocked:
                self._blocked_heads.update(cq for cq, _ in heads)
                return  # wait for an event: see _admission_stays_blocked
            if stats.admitted or stats.preempted:
                idle.reset()
            elif idle.repeated(cycle_fingerprint(s, heads)):
                return
            if self._stretch.spent():
                await self._stretch.yield_()
            if await self._settle():
                idle.reset()

    def _observe_admissions(self, keys: list[str]) -> None:
        s = self.scheduler
        now = s.now()
        for key in keys:
            cq = s.holders.cluster_queue_of(key)
            if cq is not None:
                self.rates.observe(cq, now)
                for observer in self.admission_observers:
                    observer(key, cq, now)

    # -- waiting ---------------------------------------------------------------------
    async def _wait_for_work(self) -> None:
        if not self._commands.empty() or self._stopping:
            return
        started = stamp()
        _, earliest = self._scan_deadlines()
        self._record_step(started, "scan")
        timeout = self.idle_tick
        if earliest is not None:
            until = (earliest - self.scheduler.now()) / MICROS_PER_SECOND
            timeout = min(timeout, max(0.0, until))
        self._wakeup.clear()
        self._idle.set()
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), timeout)
        finally:
            self._idle.clear()

    def _record_step(self, started: Stamp, kind: str) -> None:
        wall, cpu = since(started)
        stats = self.stats
        if wall >= stats.max_step_by_kind.get(kind, 0.0):
            stats.max_step_by_kind[kind] = wall
            stats.max_step_seconds = max(stats.max_step_seconds, wall)
        if cpu >= stats.max_step_cpu_by_kind.get(kind, 0.0):
            stats.max_step_cpu_by_kind[kind] = cpu
            stats.max_step_cpu_seconds = max(stats.max_step_cpu_seconds, cpu)
