"""What every trace format is read into: jobs, capacity, and the lines that were skipped.

Requests are held as the scheduler's integers (milli-cpu, bytes, counts), so capacity
checks are exact; they become quantity strings only when the scenario is written.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

# Labels and annotations the importers write (docs/simulate.md#importing-traces).
LABEL_PREFIX = "simulation.queuescope.io/"
RUNTIME_ANNOTATION = LABEL_PREFIX + "runtime"
USER_LABEL = LABEL_PREFIX + "trace-user"
GROUP_LABEL = LABEL_PREFIX + "trace-group"
JOB_LABEL = LABEL_PREFIX + "trace-job"
QOS_LABEL = LABEL_PREFIX + "trace-qos"

_NOT_NAME = re.compile(r"[^a-z0-9-]+")
NAME_MAX = 63


def dns_label(text: str, fallback: str = "x") -> str:
    """`text` as a DNS-1123 label: lower case, runs of other characters become '-'."""
    name = _NOT_NAME.sub("-", text.lower()).strip("-")[:NAME_MAX].rstrip("-")
    return name or fallback


@dataclass(frozen=True, slots=True)
class PodGroup:
    """Identical pods of a job: `count` pods, each requesting `requests`."""

    count: int
    requests: dict[str, int]  # resource -> scheduler value (milli-cpu, bytes, units)


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job of a trace, in the trace's own terms, ready to become a Workload."""

    name: str  # the Workload's name (a DNS label)
    order: int  # position in the file: ties in submit time keep file order
    submit: int  # seconds since the trace's origin (`Trace.origin`)
    runtime: int  # seconds it ran (> 0): the simulator's runtime annotation
    pods: tuple[PodGroup, ...]
    tenant: str  # namespace (a DNS label)
    queue: str  # LocalQueue (a DNS label)
    requested_seconds: int | None = None  # the user's limit: maximumExecutionTimeSeconds
    priority_class: str | None = None  # a WorkloadPriorityClass of `Capacity.priorities`
    labels: dict[str, str] = field(default_factory=dict)
    # node label key -> the values allowed (one: nodeSelector; several: nodeAffinity)
    node_labels: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def total(self) -> dict[str, int]:
        out: Counter[str] = Counter()
        for group in self.pods:
            for resource, value in group.requests.items():
                out[resource] += value * group.count
        return dict(out)


@dataclass(frozen=True, slots=True)
class Flavor:
    """A ResourceFlavor and the quota the ClusterQueue gives it."""

    name: str
    quota: dict[str, int]  # resource -> scheduler value
    node_labels: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Capacity:
    """The cluster a trace ran on: flavors with quota, priority classes, preemption."""

    flavors: list[Flavor]
    source: str  # where the figures come from, for the summary and the docs
    priorities: dict[str, int] = field(default_factory=dict)  # WorkloadPriorityClass values
    preempt_lower_priority: bool = False

    def resources(self) -> list[str]:
        """Every resource some flavor has quota for, in a stable order."""
        seen: dict[str, None] = {}
        for flavor in self.flavors:
            for resource in flavor.quota:
                seen.setdefault(resource, None)
        return list(seen)

    def totals(self) -> dict[str, int]:
        out: Counter[str] = Counter()
        for flavor in self.flavors:
            out.update(flavor.quota)
        return dict(out)


MAX_REPORTED_LINES = 20


@dataclass(slots=True)
class Skips:
    """Records not imported: malformed lines (file and line named) and jobs skipped for a
    reason (never ran, invalid, ...), counted."""

    malformed: list[str] = field(default_factory=list)
    reasons: Counter[str] = field(default_factory=Counter)

    def bad_line(self, source: str, line: int, problem: str) -> None:
        self.malformed.append(f"{source}:{line}: {problem}")

    def skip(self, reason: str) -> None:
        self.reasons[reason] += 1

    @property
    def total(self) -> int:
        return len(self.malformed) + sum(self.reasons.values())

    def summary(self) -> list[str]:
        """Lines for standard error: each malformed line (the first few), then counts."""
        out = [f"skipped malformed line {m}" for m in self.malformed[:MAX_REPORTED_LINES]]
        extra = len(self.malformed) - MAX_REPORTED_LINES
        if extra > 0:
            out.append(f"... and {extra} more malformed lines")
        if self.malformed:
            out.append(f"malformed lines skipped: {len(self.malformed)}")
        out += [f"jobs skipped ({reason}): {n}" for reason, n in sorted(self.reasons.items())]
        return out


@dataclass(slots=True)
class JobList:
    """The jobs read so far, in file order and each name once: a job whose name an earlier
    one took is a malformed line of its own."""

    skips: Skips
    jobs: list[TraceJob] = field(default_factory=list)
    names: set[str] = field(default_factory=set)

    def add(self, job: TraceJob, source: str, line: int, what: str) -> None:
        """Keep `job`, or name line `line` of `source` as `what` (the job as the format
        calls it) repeating."""
        if job.name in self.names:
            self.skips.bad_line(source, line, f"{what} repeats")
            return
        self.names.add(job.name)
        self.jobs.append(job)


@dataclass(slots=True)
class Trace:
    """A parsed trace: its jobs, where its clock starts, its capacity if it says."""

    name: str
    origin: int  # Unix time of submit time 0
    jobs: list[TraceJob]
    skips: Skips
    capacity: Capacity | None = None
