"""True runtimes in a scenario: the `simulation.queuescope.io/runtime` annotation
(docs/simulate.md#runtime-annotation).

A Workload or an object that makes one (a Job, a Pod, a StatefulSet) so annotated
gets `PodsReady` when it is admitted and finishes (Succeeded) that long after its
admission; an eviction (or a StatefulSet's hold) restarts its clock. The driver
learns admissions and evictions from the core's change feed, so it also sees the
admissions of a cycle that waits for pods to be ready.

Only the simulator reads these values: they are the future a forecast must not see
(docs/forecasting.md#no-leakage).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from scheduler.api import Scenario, Workload
from scheduler.api.decode import ApiError, Decoded
from scheduler.api.durations import DurationError, parse_duration
from scheduler.api.workload_sources import WORKLOAD_SOURCES
from scheduler.core.clock import MICROS_PER_SECOND, Instant
from scheduler.core.scheduler import Scheduler

RUNTIME_ANNOTATION = "simulation.queuescope.io/runtime"
ANNOTATION_PATH = f"metadata.annotations[{RUNTIME_ANNOTATION}]"

_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def parse_runtime(text: str) -> Instant:
    """Exact microseconds of a runtime: plain seconds ("3600", "12.5") or a Go
    duration ("1h30m"). Raises ValueError for anything else, negative or zero
    durations included (a job runs for some time)."""
    value = text.strip()
    if value != text or not value:
        raise ValueError(f"invalid runtime {text!r}: seconds (e.g. 3600) or a Go duration (1h)")
    if _SECONDS.fullmatch(value):
        micros = int(Fraction(value) * MICROS_PER_SECOND)
    else:
        try:
            micros = parse_duration(value)
        except DurationError as err:
            raise ValueError(
                f"invalid runtime {text!r}: seconds (e.g. 3600) or a Go duration (1h): {err}"
            ) from None
    if micros <= 0:
        raise ValueError(f"invalid runtime {text!r}: must be positive")
    return micros


def annotated_runtime(obj: Any) -> str | None:
    """The raw annotation of a Workload or an object that makes one, if any."""
    if not isinstance(obj, (*WORKLOAD_SOURCES, Workload)):
        return None
    return obj.metadata.annotations.get(RUNTIME_ANNOTATION)


def check_annotations(documents: Iterable[Decoded]) -> None:
    """Bad input stops the run before it starts, naming file, document and field:
    every annotated input document and every annotated object a Scenario applies."""
    for d in documents:
        _check(d.obj, d, ANNOTATION_PATH, d.obj)
        if isinstance(d.obj, Scenario):
            for i, ev in enumerate(d.obj.spec.events):
                if ev.apply is not None:
                    _check(ev.apply, d, f"spec.events[{i}].apply.{ANNOTATION_PATH}", d.obj)


def _check(obj: Any, d: Decoded, path: str, owner: Any) -> None:
    raw = annotated_runtime(obj)
    if raw is None:
        return
    try:
        parse_runtime(raw)
    except ValueError as err:
        meta = owner.metadata
        raise ApiError(
            str(err),
            source=d.source,
            index=d.index,
            kind=owner.kind,
            name=meta.name,
            namespace=getattr(meta, "namespace", None),
            path=path,
        ) from None


@dataclass(slots=True)
class RuntimeDriver:
    """Finishes annotated workloads their runtime after admission."""

    runtimes: dict[str, Instant] = field(default_factory=dict)  # workload key -> runtime
    # (finish instant, sequence, key, admission generation)
    _heap: list[tuple[Instant, int, str, int]] = field(default_factory=list)
    _generation: dict[str, int] = field(default_factory=dict)
    _seq: int = 0

    def register(self, key: str, original: Any) -> None:
        """Remember the runtime of `key` (the Workload made of `original`); an update
        without the annotation forgets it."""
        raw = annotated_runtime(original)
        if raw is None:
            self.runtimes.pop(key, None)
        else:
            self.runtimes[key] = parse_runtime(raw)

    def admitted(self, s: Scheduler, keys: Iterable[str]) -> None:
        """These workloads were just admitted: their pods run now, their clock starts."""
        now = s.now()
        for key in keys:
            runtime = self.runtimes.get(key)
            if runtime is None:
                continue
            generation = self._generation.get(key, 0) + 1
            self._generation[key] = generation
            s.pods_ready(key)
            self._seq += 1
            heapq.heappush(self._heap, (now + runtime, self._seq, key, generation))

    def evicted(self, keys: Iterable[str]) -> None:
        """An eviction stops the clock; the next admission starts it again."""
        for key in keys:
            if key in self._generation:
                self._generation[key] += 1

    def next_instant(self) -> Instant | None:
        while self._heap and self._stale(self._heap[0]):
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def _stale(self, item: tuple[Instant, int, str, int]) -> bool:
        return self._generation.get(item[2]) != item[3]

    def fire_due(self, s: Scheduler) -> list[str]:
        """Finish every workload whose runtime is over; returns their keys in order."""
        now = s.now()
        done: list[str] = []
        while self._heap and self._heap[0][0] <= now:
            item = heapq.heappop(self._heap)
            if self._stale(item):
                continue
            key = item[2]
            self._generation[key] += 1
            wl = s.workload(key)
            if wl is not None and wl.holds_quota and s.finish(key):
                done.append(key)
        return done
