"""The Standard Workload Format (SWF) of the Parallel Workloads Archive, and Alea's
extension of it (docs/simulate.md#importing-traces).

A job is one line of 18 whitespace-separated numbers, -1 meaning unknown; `;` lines are
the header (`; MaxProcs: 100`). Alea's logs add three fields: the allocated node ids, the
queue name and the PBS node spec (`2:ppn=12:cl_zegox#excl`); their memory field is bytes
per node, where the standard's is kilobytes per processor. A companion `.machines` file
(Alea) lists the clusters: id, name, nodes, CPUs per node, speed, RAM per node in KB.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from scheduler.traces import records

STANDARD_FIELDS = 18
ALEA_FIELDS = 21
KIB = 1024
MILLI = 1000
INT32_MAX = 2**31 - 1
CLUSTER_LABEL = records.LABEL_PREFIX + "cluster"

# SWF status: 1 completed, 0 failed, 5 cancelled; 2, 3 and 4 are partial executions of
# a checkpointed job, whose summary line (1, 0 or 5) carries the totals.
PARTIAL_STATUSES = frozenset({2, 3, 4})

Tenant = Literal["user", "group", "none"]

# 0-based field positions
JOB, SUBMIT, RUN, ALLOC_PROCS, REQ_PROCS, REQ_TIME, REQ_MEM, STATUS, USER, GROUP, QUEUE = (
    0,
    1,
    3,
    4,
    7,
    8,
    9,
    10,
    11,
    12,
    14,
)
ALEA_QUEUE, ALEA_NODESPEC = 19, 20


@dataclass(frozen=True, slots=True)
class Machine:
    """One line of an Alea `.machines` file."""

    name: str
    nodes: int
    cpus_per_node: int
    memory_kb_per_node: int


def read_header(lines: Iterable[str]) -> dict[str, str]:
    """`; Key: value` comment lines as a dict (the first value of a key wins)."""
    header: dict[str, str] = {}
    for line in lines:
        text = line.strip()
        if not text.startswith(";"):
            continue
        key, sep, value = text[1:].partition(":")
        if sep and key.strip() and " " not in key.strip():
            header.setdefault(key.strip(), value.strip())
    return header


def _number(text: str) -> int:
    """An SWF field: an integer, or a decimal rounded to the nearest integer."""
    try:
        return int(text)
    except ValueError:
        value = float(text)  # ValueError for anything that is not a number
        if not math.isfinite(value):
            raise ValueError(text) from None
        return round(value)


def _header_int(header: dict[str, str], key: str) -> int | None:
    try:
        value = int(header[key].split()[0])
    except (KeyError, ValueError, IndexError):
        return None
    return value if value > 0 else None


def header_capacity(header: dict[str, str]) -> records.Capacity | None:
    """One flavor with `MaxProcs` cpus (else `MaxNodes`), if the header says."""
    for key in ("MaxProcs", "MaxNodes"):
        value = _header_int(header, key)
        if value is not None:
            return records.Capacity(
                [records.Flavor("default", {"cpu": value * MILLI})], f"header {key}"
            )
    return None


def read_machines(lines: Iterable[str], source: str, skips: records.Skips) -> list[Machine]:
    """An Alea `.machines` file; a malformed line is reported and skipped."""
    machines: list[Machine] = []
    for number, line in enumerate(lines, 1):
        fields = line.split()
        if not fields or line.lstrip().startswith(("#", ";")):
            continue
        if len(fields) < 6:
            skips.bad_line(source, number, f"expected 6 fields, found {len(fields)}")
            continue
        try:
            nodes, cpus, memory = int(fields[2]), int(fields[3]), int(fields[5])
        except ValueError as err:
            skips.bad_line(source, number, f"not a number: {err}")
            continue
        if nodes <= 0 or cpus <= 0:
            skips.bad_line(source, number, "nodes and CPUs per node must be positive")
            continue
        machines.append(Machine(records.dns_label(fields[1]), nodes, cpus, max(memory, 0)))
    return machines


def machines_capacity(machines: list[Machine], source: str) -> records.Capacity | None:
    """A flavor per cluster, selected by the node label `simulation.queuescope.io/cluster`."""
    if not machines:
        return None
    flavors = []
    for m in machines:
        quota = {"cpu": m.nodes * m.cpus_per_node * MILLI}
        if m.memory_kb_per_node:
            quota["memory"] = m.nodes * m.memory_kb_per_node * KIB
        flavors.append(records.Flavor(m.name, quota, {CLUSTER_LABEL: m.name}))
    return records.Capacity(flavors, source)


@dataclass(frozen=True, slots=True)
class SwfOptions:
    name: str  # the trace's name: the namespace when tenant is "none"
    tenant: Tenant = "user"
    clusters: tuple[str, ...] = ()  # cluster names a node spec may constrain to


def _node_spec(spec: str, procs: int, clusters: tuple[str, ...]) -> tuple[list[int], set[str]]:
    """Pods per chunk of a PBS node spec as (ppn per pod repeated), and cluster names.

    `2:ppn=12:cl_zegox+1:ppn=4#excl` -> [12, 12, 4], {"zegox"}. A chunk without `ppn`
    shares the job's processors among its nodes. ValueError when it cannot be read.
    """
    per_pod: list[int] = []
    wanted: set[str] = set()
    chunks = spec.split("#", 1)[0].split("+")
    for chunk in chunks:
        parts = chunk.split(":")
        # A chunk names its node count, or one node by its host name.
        by_host = "." in parts[0] and not parts[0][0].isdigit()
        nodes = 1 if by_host else int(parts[0])
        if nodes <= 0:
            raise ValueError(f"{nodes} nodes")
        ppn = None
        for prop in parts if by_host else parts[1:]:
            if prop.startswith("ppn="):
                ppn = math.ceil(float(prop[4:]))
                continue
            # `cl_zewura`, `^cl_zewura`, `zewura12.domain`, `^zewura12...`, `host=zewura12...`
            name = prop.removeprefix("^").removeprefix("host=")
            host = re.match(r"(?:cl_)?([a-z]+)\d*(?:\.|$)", name)
            if host and host.group(1) in clusters:
                wanted.add(host.group(1))
            elif name.startswith("cl_"):
                wanted.add(records.dns_label(name[3:]))
        if ppn is None:
            ppn = max(1, math.ceil(procs / (nodes * len(chunks))))
        if ppn <= 0:
            raise ValueError(f"ppn={ppn}")
        per_pod += [ppn] * nodes
    return per_pod, wanted


def _pods(
    fields: list[str], procs: int, options: SwfOptions
) -> tuple[list[records.PodGroup], set[str]]:
    """The pod groups of a job: one 1-cpu pod per processor (standard SWF), or one pod per
    node of Alea's node spec with its ppn cpus and the memory per node."""
    memory = _number(fields[REQ_MEM])
    if len(fields) < ALEA_FIELDS:
        requests = {"cpu": MILLI}
        if memory > 0:
            requests["memory"] = memory * KIB  # kilobytes per processor
        return [records.PodGroup(procs, requests)], set()
    try:
        per_pod, clusters = _node_spec(fields[ALEA_NODESPEC], procs, options.clusters)
    except (ValueError, IndexError):
        per_pod, clusters = [1] * procs, set()
    groups: list[records.PodGroup] = []
    for ppn in per_pod:
        requests = {"cpu": ppn * MILLI}
        if memory > 0:
            requests["memory"] = memory  # bytes per node
        if groups and groups[-1].requests == requests:
            groups[-1] = records.PodGroup(groups[-1].count + 1, requests)
        else:
            groups.append(records.PodGroup(1, requests))
    return groups, clusters


def _tenant(fields: list[str], options: SwfOptions) -> str:
    if options.tenant == "none":
        return records.dns_label(options.name)
    value = _number(fields[USER if options.tenant == "user" else GROUP])
    return f"{options.tenant}-{value}" if value >= 0 else f"{options.tenant}-unknown"


def _queue(fields: list[str]) -> str:
    if len(fields) >= ALEA_FIELDS:
        return records.dns_label(fields[ALEA_QUEUE], "batch")
    number = _number(fields[QUEUE])
    return f"queue-{number}" if number >= 0 else "batch"


def _job(
    fields: list[str], order: int, options: SwfOptions, skips: records.Skips
) -> records.TraceJob | None:
    """The job of one well-formed line, or None (counted in `skips`) when it is not one."""
    status = _number(fields[STATUS])
    if status in PARTIAL_STATUSES:
        skips.skip("partial execution record; its summary line is imported")
        return None
    runtime = _number(fields[RUN])
    if runtime <= 0:
        skips.skip("never ran: run time -1 or 0")
        return None
    submit = _number(fields[SUBMIT])
    if submit < 0:
        skips.skip("no submit time")
        return None
    procs = _number(fields[REQ_PROCS])
    if procs <= 0:
        procs = _number(fields[ALLOC_PROCS])
    if procs <= 0:
        skips.skip("no processor count")
        return None
    pods, clusters = _pods(fields, procs, options)
    requested = _number(fields[REQ_TIME])
    labels = {records.JOB_LABEL: str(_number(fields[JOB]))}
    for key, index in ((records.USER_LABEL, USER), (records.GROUP_LABEL, GROUP)):
        value = _number(fields[index])
        if value >= 0:
            labels[key] = str(value)
    return records.TraceJob(
        name=f"job-{_number(fields[JOB])}",
        order=order,
        submit=submit,
        runtime=runtime,
        pods=tuple(pods),
        tenant=_tenant(fields, options),
        queue=_queue(fields),
        requested_seconds=min(requested, INT32_MAX) if requested > 0 else None,
        labels=labels,
        node_labels={CLUSTER_LABEL: tuple(sorted(clusters))} if clusters else {},
    )


def read_swf(lines: Iterable[str], source: str, options: SwfOptions) -> records.Trace:
    """Every job of an SWF text; malformed lines are named in the trace's skips."""
    skips = records.Skips()
    read = records.JobList(skips)
    header_lines: list[str] = []
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text:
            continue
        if text.startswith(";"):
            header_lines.append(text)
            continue
        fields = text.split()
        if len(fields) not in (STANDARD_FIELDS, ALEA_FIELDS):
            skips.bad_line(
                source,
                number,
                f"expected {STANDARD_FIELDS} fields (or Alea's {ALEA_FIELDS}), found {len(fields)}",
            )
            continue
        try:
            for value in fields[:STANDARD_FIELDS]:
                _number(value)
        except ValueError:
            skips.bad_line(source, number, f"field {fields.index(value) + 1} is not a number")
            continue
        job = _job(fields, len(read.jobs), options, skips)
        if job is not None:
            read.add(job, source, number, f"job number {job.labels[records.JOB_LABEL]}")
    header = read_header(header_lines)
    origin = _header_int(header, "UnixStartTime") or 0
    return records.Trace(options.name, origin, read.jobs, skips, header_capacity(header))
