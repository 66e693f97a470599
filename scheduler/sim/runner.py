"""Replay a scenario on the virtual clock (docs/simulate.md): the core, driven synchronously.

The clock jumps from one instant at which something can happen to the next, so a
scenario spanning hours replays in milliseconds, and the same input always yields
the same output.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from scheduler.api import (
    AdmissionCheck,
    ClusterQueue,
    Cohort,
    Configuration,
    LocalQueue,
    Namespace,
    PriorityClass,
    ResourceFlavor,
    Scenario,
    Workload,
    WorkloadPriorityClass,
)
from scheduler.api.decode import ApiError, Decoded, decode_object
from scheduler.api.integrations import enabled_integrations
from scheduler.api.scenario import ScenarioEvent
from scheduler.api.statefulset_model import StatefulSet
from scheduler.api.validation.update import validate_update
from scheduler.api.workload_names import HASH_LENGTH
from scheduler.api.workload_sources import (
    WORKLOAD_SOURCES,
    integration_off_error,
    makes_workload,
    source_workload,
)
from scheduler.core.admission_checks import set_check_state
from scheduler.core.clock import Instant, ManualClock, instant_from_datetime
from scheduler.core.cycle import run_cycle
from scheduler.core.ingest import apply_object, delete_object, scheduler_config
from scheduler.core.metadata import fill_metadata
from scheduler.core.pods_ready import admission_blocked
from scheduler.core.queue_status import QueueStatusTracker
from scheduler.core.scheduler import QUEUE_PLUGIN_ANNOTATION, Scheduler
from scheduler.core.state_view import ClusterStateView
from scheduler.core.workload import EVICTED, StoredObject
from scheduler.sim.deadlines import DeadlineIndex
from scheduler.sim.endless import EndlessTimeouts
from scheduler.sim.fingerprint import IdleFingerprint
from scheduler.sim.observer import ReplayObserver
from scheduler.sim.runtimes import RuntimeDriver, check_annotations
from scheduler.sim.statefulsets import follow_scale

DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)
MAX_CYCLES = 1_000_000

# Objects are applied in dependency order so the first cycle sees a settled cluster;
# within a kind, document order.
_APPLY_ORDER: dict[type[Any], int] = {
    Namespace: 0,
    WorkloadPriorityClass: 1,
    PriorityClass: 1,
    ResourceFlavor: 2,
    AdmissionCheck: 2,
    Cohort: 3,
    ClusterQueue: 4,
    LocalQueue: 5,
    Workload: 6,
}


class SimulationError(Exception):
    """An internal failure of the run (exit 1), as opposed to bad input (ApiError, exit 2)."""


@dataclass(slots=True)
class TimedEvent:
    at: Instant
    order: int
    action: str
    target: str = ""
    obj: Any = None
    failed: bool = False
    delete_kind: str = ""
    delete_namespace: str | None = None
    delete_name: str = ""


@dataclass(slots=True)
class SimulationResult:
    scheduler: Scheduler
    objects: dict[tuple[str, str], Any] = field(default_factory=dict)  # (kind, key) -> API obj
    cycles: int = 0
    end: Instant = 0
    queue_status: QueueStatusTracker | None = None


class Simulation:
    def __init__(
        self,
        documents: Sequence[Decoded],
        *,
        cycles: int | None = None,
        until_idle: bool | None = None,
        start_time: datetime | None = None,
        observer: ReplayObserver | None = None,
    ) -> None:
        self.documents = list(documents)
        check_annotations(self.documents)
        # True runtimes (docs/simulate.md#runtime-annotation) and whoever watches the
        # replay (the forecast recorder): both need the core's change feed.
        self.runtimes = RuntimeDriver()
        self.observer = observer
        configs = [d for d in self.documents if isinstance(d.obj, Configuration)]
        scenarios = [d for d in self.documents if isinstance(d.obj, Scenario)]
        for extra in (configs[1:], scenarios[1:]):
            if extra:
                d = extra[0]
                raise ApiError(
                    source=d.source,
                    index=d.index,
                    path="kind",
                    detail=f"at most one {type(d.obj).__name__} may be given",
                )
        self.config_obj: Configuration | None = next(
            (d.obj for d in configs if isinstance(d.obj, Configuration)), None
        )
        self.scenario: Scenario | None = next(
            (d.obj for d in scenarios if isinstance(d.obj, Scenario)), None
        )
        spec = self.scenario.spec if self.scenario is not None else None
        start = start_time or (spec.start_time if spec is not None else None) or DEFAULT_START
        self.start = instant_from_datetime(start)
        if cycles is None and not until_idle and spec is not None and not spec.until_idle:
            cycles = spec.cycles
        self.cycles = cycles
        self.clock = ManualClock(self.start)
        self.scheduler = Scheduler(self.clock, scheduler_config(self.config_obj))
        # Plain Pods are workloads only with the `pod` integration (docs/simulate.md#pods),
        # StatefulSets with `statefulset` (docs/simulate.md#statefulsets).
        self._integrations = enabled_integrations(self.config_obj)
        self.queue_status = QueueStatusTracker(self.scheduler.config.queue_visibility, self.start)
        self.result = SimulationResult(self.scheduler, queue_status=self.queue_status)
        self._ordinal = 0
        self._timeline: list[TimedEvent] = []
        # Scenario updates refused by an immutability rule (reported, never applied).
        self.rejected_updates: list[str] = []
        self._cursor = 0
        self._endless = EndlessTimeouts()
        self._wpcs: dict[str, WorkloadPriorityClass] = {}
        self._pcs: dict[str, PriorityClass] = {}
        # The timed rules' deadlines and the idle test's fingerprint, both kept up to
        # date from what changed (docs/simulate.md#replay-cost): every change reaches
        # them through `_mark` or the change feed (`_drain`).
        self._deadlines = DeadlineIndex()
        self._idle = IdleFingerprint()

    # ----------------------------------------------------------------- inputs
    def _prepare(self, d: Decoded) -> Any:
        """Fill the defaults that depend on position (uid, creationTimestamp); Jobs, Pods
        and StatefulSets that name a queue become Workloads as their integration would
        create them."""
        obj = d.obj
        ordinal = self._ordinal
        self._ordinal += 1
        if isinstance(obj, WORKLOAD_SOURCES):
            source = self._fill_meta(obj, ordinal)
            try:
                made = source_workload(
                    source, self._wpcs, self._pcs, integrations=self._integrations
                )
            except ApiError as err:
                raise err.at(d.source, d.index) from None
            except ValueError as err:
                raise ApiError(
                    source=d.source, index=d.index, path="metadata", detail=str(err)
                ) from None
            assert made is not None, "the callers leave out what makes no Workload"
            obj = made
        if isinstance(obj, Workload):
            obj = self._fill_meta(obj, ordinal)
            ns = obj.metadata.namespace or "default"
            self.runtimes.register(f"{ns}/{obj.metadata.name}", d.obj)
        return obj

    def _fill_meta(self, obj: Any, ordinal: int) -> Any:
        return fill_metadata(obj, self.start + ordinal * 1000)

    def _remember(self, obj: Any) -> None:
        kind = obj.kind
        meta = obj.metadata
        key = f"{meta.namespace}/{meta.name}" if getattr(meta, "namespace", None) else meta.name
        self.result.objects[(kind, key)] = obj
        if isinstance(obj, WorkloadPriorityClass):
            self._wpcs[meta.name] = obj
        elif isinstance(obj, PriorityClass):
            self._pcs[meta.name] = obj

    def _apply(self, obj: Any, origin: Decoded | None = None) -> None:
        self._remember(obj)
        if isinstance(obj, Workload):
            key = f"{obj.metadata.namespace or 'default'}/{obj.metadata.name}"
            if key not in self.scheduler.objects.workloads and self.observer is not None:
                self.observer.arrived(key, self.clock.now())
            self._mark([key])
        else:
            self._mark_all()
        apply_object(self.scheduler, obj)
        self.scheduler.finalize_evictions()
        if isinstance(obj, ClusterQueue):
            problem = self.scheduler.queue_plugin_error(obj.metadata.name)
            if problem is not None:
                # Offline, a queue plugin that does not load is bad input: say so.
                raise ApiError(
                    problem,
                    source=origin.source if origin is not None else "",
                    index=origin.index if origin is not None else None,
                    kind="ClusterQueue",
                    name=obj.metadata.name,
                    path=f"metadata.annotations[{QUEUE_PLUGIN_ANNOTATION}]",
                )

    def _load(self) -> list[TimedEvent]:
        initial = [
            d
            for d in self.documents
            if _apply_rank(d.obj) is not None or isinstance(d.obj, WORKLOAD_SOURCES)
        ]
        # priority classes first: Jobs need them to resolve priorities
        for d in initial:
            if isinstance(d.obj, WorkloadPriorityClass | PriorityClass):
                self._remember(d.obj)
        # A Job, Pod or StatefulSet without the queue-name label is not managed
        # (manageJobsWithoutQueueName is off), so it produces no Workload; nor does a
        # StatefulSet of no replicas.
        initial = [d for d in initial if not _no_workload(d.obj)]
        prepared = [(self._prepare(d), i, d) for i, d in enumerate(initial)]
        prepared.sort(key=lambda p: (_apply_rank(p[0]) or 0, p[1]))
        for obj, _, origin in prepared:
            self._apply(obj, origin)
        return self._events()

    def _events(self) -> list[TimedEvent]:
        events: list[TimedEvent] = []
        if self.scenario is None:
            return events
        known = {k for (kind, k) in self.result.objects if kind == "Workload"}
        source = next(d for d in self.documents if d.obj is self.scenario)
        for i, ev in enumerate(self.scenario.spec.events):
            events.append(_timed_event(self.start + ev.at, i, ev))
            applied = ev.apply
            refused = self._refused(applied)
            if refused is not None:
                raise ApiError(
                    refused.detail,
                    path=f"spec.events[{i}].apply.{refused.path}",
                    source=source.source,
                    index=source.index,
                    kind="Scenario",
                    name=self.scenario.metadata.name,
                )
            if isinstance(applied, (*WORKLOAD_SOURCES, Workload)):
                ns = applied.metadata.namespace or "default"
                known.add(f"{ns}/{applied.metadata.name}")
        for i, te in enumerate(events):
            if te.target and te.target not in known and _owner_workload(te.target, known) is None:
                raise ApiError(
                    source=source.source,
                    index=source.index,
                    kind="Scenario",
                    name=self.scenario.metadata.name,
                    path=f"spec.events[{i}]",
                    detail=f'workload "{te.target}" is not defined by any input document',
                )
        events.sort(key=lambda e: (e.at, e.order))
        return events

    def _refused(self, obj: Any) -> ApiError | None:
        """An object a scenario applies whose integration is off (it names a queue)."""
        if not isinstance(obj, WORKLOAD_SOURCES) or not makes_workload(obj):
            return None
        return integration_off_error(obj, self._integrations)

    def _resolve(self, target: str) -> str:
        """The workload key an event names: itself, or the key of the Workload the Job,
        Pod or StatefulSet it names made."""
        keys = self.scheduler.objects.workloads
        if target in keys:
            return target
        return _owner_workload(target, keys) or target

    def _update_errors(self, obj: Any) -> list[str]:
        """docs/scheduling.md#invalid-input: an update that breaks an immutability rule is rejected,
        object unchanged."""
        meta = obj.metadata
        key = f"{meta.namespace}/{meta.name}" if getattr(meta, "namespace", None) else meta.name
        old = self.result.objects.get((obj.kind, key))
        if old is None:
            return []
        reserved = None
        if isinstance(obj, Workload):
            # The reservation lives in the core, not in the applied object.
            wl = self.scheduler.workload(key)
            reserved = wl is not None and wl.holds_quota
        return [str(e) for e in validate_update(old, obj, reserved=reserved)]

    def _fire(self, ev: TimedEvent) -> None:
        s = self.scheduler
        if ev.action == "apply":
            obj = ev.obj
            if isinstance(obj, StatefulSet):
                self._follow_scale(obj)
            if _no_workload(obj):
                return
            if isinstance(obj, (*WORKLOAD_SOURCES, Workload)):
                obj = self._prepare(Decoded(obj=obj, source="", index=0))
            rejected = self._update_errors(obj)
            if rejected:
                self.rejected_updates.append(
                    f"event {ev.order} ({obj.kind} {obj.metadata.name}): update rejected: "
                    + "; ".join(rejected)
                )
                return
            self._apply(obj)
            s.finalize_evictions()
            return
        # Any other event may change more than the workload it names (a deletion, a
        # check state): everything is looked at again.
        self._mark_all()
        target = self._resolve(ev.target) if ev.target else ""
        if ev.action == "delete":
            delete_object(s, ev.delete_kind, ev.delete_namespace, ev.delete_name)
        elif ev.action == "podsReady":
            s.pods_ready(target)
        elif ev.action == "finish":
            if s.finish(target, failed=ev.failed) and self.observer is not None:
                self.observer.finished(s, [target])
        elif ev.action == "deactivate":
            s.set_active(target, False)
        elif ev.action == "activate":
            s.set_active(target, True)
        elif ev.action == "setCheckState":
            change = ev.obj
            set_check_state(
                s,
                target,
                change.check,
                change.state,
                change.message,
                change.requeue_after_seconds,
            )
        s.finalize_evictions()

    def _follow_scale(self, sts: StatefulSet) -> None:
        """A StatefulSet scaled to zero or back: its Workload held or let go
        (docs/simulate.md#statefulsets); the hold stops its runtime's clock."""
        held = follow_scale(self.scheduler, self._fill_meta(sts, 0))
        if held is not None:
            self.runtimes.evicted([held])
            self._mark_all()

    # -------------------------------------------------------------------- run
    def _fire_due_now(self) -> bool:
        """Apply every scenario event and timed rule due at the current instant."""
        s = self.scheduler
        now = self.clock.now()
        fired = False
        while self._cursor < len(self._timeline) and self._timeline[self._cursor].at <= now:
            self._fire(self._timeline[self._cursor])
            self._cursor += 1
            fired = True
        self._drain()
        done = self.runtimes.fire_due(s)
        if done:
            fired = True
            self._mark(done)
            if self.observer is not None:
                self.observer.finished(s, done)
        timed = self._deadlines.fire_due(s)
        if timed:
            fired = True
            self._idle.mark(timed)
            if self.cycles is None and self._cursor >= len(self._timeline):
                self._endless.observe(s, timed)
        s.finalize_evictions()
        if fired:
            s.observe_conditions()
        return fired

    def _mark(self, keys: list[str]) -> None:
        """These workloads may have changed outside the change feed."""
        self._deadlines.mark(keys)
        self._idle.mark(keys)

    def _mark_all(self) -> None:
        self._deadlines.mark_all(self.scheduler)
        self._idle.mark_all()

    def _drain(self) -> None:
        """Hand what the core changed to the deadline index and the idle fingerprint,
        and its admissions and evictions to the runtime driver and the observer."""
        s = self.scheduler
        changes = s.take_changes()
        if not changes:
            return
        self._idle.changed(changes)
        deadlines = self._deadlines
        for keys in changes.queues.values():
            deadlines.mark(keys)
        deadlines.mark(key for _, key in changes.heads)
        deadlines.mark(changes.admitted)
        deadlines.mark(changes.evicted)
        if not (changes.admitted or changes.evicted):
            return
        self.runtimes.evicted(changes.evicted)
        self.runtimes.admitted(s, _still_running(s, changes.admitted))
        if self.observer is not None:
            self.observer.changed(s, changes)

    def _next_instant(self) -> Instant | None:
        # The timeline is sorted: its next event is the earliest left.
        timeline = self._timeline
        upcoming = [timeline[self._cursor].at] if self._cursor < len(timeline) else []
        deadline = self._deadlines.next_deadline(self.scheduler)
        if deadline is not None:
            upcoming.append(deadline)
        finish = self.runtimes.next_instant()
        if finish is not None:
            upcoming.append(finish)
        return min(upcoming) if upcoming else None

    def _advance(self) -> bool:
        """Move to the next thing that happens (the cycle's wait while admission is
        blocked, docs/scheduling.md#blocking-admission); False when nothing is left."""
        self._drain()
        if not admission_blocked(self.scheduler):
            return True  # the pods of an annotated workload just became ready
        if self._fire_due_now():
            return True
        instant = self._next_instant()
        if instant is None:
            return False
        target = max(self.clock.now(), instant)
        self.queue_status.advance(self.scheduler, target)
        self.clock.set(target)
        self._fire_due_now()
        return True

    def run(self) -> SimulationResult:
        s = self.scheduler
        s.follow_changes()
        self._timeline = self._load()
        self._cursor = 0
        s.set_block_waiter(self._advance)
        s.observe_conditions()
        cycles = 0
        seen: set[Any] = set()
        while True:
            if self._fire_due_now():
                seen.clear()
            if self.cycles is not None and cycles >= self.cycles:
                break
            if cycles >= MAX_CYCLES:
                raise SimulationError(f"no idle state after {MAX_CYCLES} cycles")
            stats = run_cycle(s)
            cycles += 1
            self._drain()
            s.observe_conditions()
            if stats.blocked:
                # docs/scheduling.md#blocking-admission: nothing can unblock admission; the run ends
                # here
                break
            if stats.admitted or stats.preempted:
                seen.clear()
                continue
            fingerprint = self._idle.take(s) if stats.ran else None
            if fingerprint is not None and fingerprint not in seen:
                seen.add(fingerprint)
                continue
            # Nothing more can happen at this instant: jump to the next one, if any.
            if self.observer is not None:
                self.observer.instant_done(s)
            instant = self._next_instant()
            if instant is None:
                break
            target = max(self.clock.now(), instant)
            self.queue_status.advance(s, target)
            self.clock.set(target)
            seen.clear()
        self.queue_status.finish(s)
        self.result.cycles = cycles
        self.result.end = self.clock.now()
        for key, wl in s.objects.workloads.items():
            if isinstance(wl.raw, StoredObject):
                self.result.objects[("Workload", key)] = wl.raw
        return self.result


def _apply_rank(obj: Any) -> int | None:
    """Where an object goes in the initial apply order; None for kinds not applied."""
    for kind, rank in _APPLY_ORDER.items():
        if isinstance(obj, kind):
            return rank
    return None


def _timed_event(at: Instant, order: int, ev: ScenarioEvent) -> TimedEvent:
    """A scenario event (`spec.events[order]`) as the timeline holds it."""
    te = TimedEvent(at=at, order=order, action="")
    if ev.apply is not None:
        te.action, te.obj = "apply", ev.apply
    elif ev.delete is not None:
        te.action = "delete"
        te.delete_kind = ev.delete.kind
        te.delete_namespace = ev.delete.namespace
        te.delete_name = ev.delete.name
    elif ev.pods_ready is not None:
        te.action, te.target = "podsReady", ev.pods_ready
    elif ev.finish is not None:
        te.action, te.target, te.failed = "finish", ev.finish, bool(ev.failed)
    elif ev.deactivate is not None:
        te.action, te.target = "deactivate", ev.deactivate
    elif ev.activate is not None:
        te.action, te.target = "activate", ev.activate
    elif ev.set_check_state is not None:
        te.action, te.obj = "setCheckState", ev.set_check_state
        te.target = ev.set_check_state.workload
    return te


def _no_workload(obj: object) -> bool:
    """A Job, Pod, StatefulSet or JobSet its integration makes no Workload of (no queue name,
    no replicas)."""
    return isinstance(obj, WORKLOAD_SOURCES) and not makes_workload(obj)


def _owner_workload(target: str, keys: Iterable[str]) -> str | None:
    """The key of the Workload a Job, Pod, StatefulSet or JobSet `target` (ns/name) made, among
    `keys`: a scenario may name a workload by its owner (docs/simulate.md, "events
    naming a Job")."""
    ns, _, name = target.partition("/")
    prefixes = tuple(f"{ns}/{kind}-{name}-" for kind in ("job", "pod", "statefulset", "jobset"))
    for key in keys:
        prefix = next((p for p in prefixes if key.startswith(p)), None)
        if prefix is not None and len(key) == len(prefix) + HASH_LENGTH:
            return key
    return None


def _still_running(s: ClusterStateView, keys: list[str]) -> list[str]:
    """Of the workloads admitted since the last look, those that still hold their
    quota unevicted (an admission undone in the same stretch starts no clock)."""
    out = []
    for key in keys:
        wl = s.workload(key)
        if wl is not None and wl.holds_quota and not wl.conditions.is_true(EVICTED):
            out.append(key)
    return out


def decode_inline(data: dict[str, Any], source: str, index: int) -> Any:
    return decode_object(data, source=source, index=index)
