"""Alibaba's GPU cluster trace v2023 (`openb_pod_list_*.csv`, `openb_node_list_*.csv`):
one Kubernetes pod a row (docs/simulate.md#importing-traces).

Pods: name, cpu_milli, memory_mib, num_gpu, gpu_milli (share of each GPU, 1000 = whole),
gpu_spec (allowed GPU models, `|`-separated, empty = any), qos, pod_phase, and
creation/deletion/scheduled times in seconds from the trace's start. Nodes: sn,
cpu_milli, memory_mib, gpu, model.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from scheduler.traces import records

MIB = 1024 * 1024
WHOLE_GPU = 1000
GPU_MODEL_LABEL = records.LABEL_PREFIX + "gpu-model"
NO_GPU_FLAVOR = "cpu-only"
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos")
TIME_COLUMNS = ("creation_time", "deletion_time", "scheduled_time")
NODE_COLUMNS = ("cpu_milli", "memory_mib", "gpu", "model")

# qos -> WorkloadPriorityClass value: latency-sensitive and guaranteed pods first,
# best-effort last and preemptible by the others.
QOS_PRIORITY = {"guaranteed": 1000, "ls": 1000, "burstable": 500, "be": 0}

# The trace's times count from an undisclosed start; the scenario puts it at the
# simulator's default start time (docs/simulate.md#choices-where-the-contract-is-open).
ORIGIN = 1_767_225_600  # 2026-01-01T00:00:00Z

GpuUnit = Literal["milli", "gpu"]
GPU_RESOURCES: dict[GpuUnit, str] = {"milli": "alibaba.com/gpu-milli", "gpu": "nvidia.com/gpu"}


@dataclass(frozen=True, slots=True)
class AlibabaOptions:
    name: str  # the trace's name: the namespace of every pod
    gpu_unit: GpuUnit = "milli"  # thousandths of a GPU (sharing kept) or whole GPUs


def _rows(
    lines: Iterable[str], source: str, required: tuple[str, ...], skips: records.Skips
) -> Iterable[tuple[int, dict[str, str]]]:
    """(line number, row) of a CSV with a header naming at least `required`."""
    reader = csv.reader(lines)
    header = next(reader, None)
    if header is None:
        skips.bad_line(source, 1, "empty file: expected a header line")
        return
    missing = [c for c in required if c not in header]
    if missing:
        skips.bad_line(source, 1, f"header lacks column(s) {', '.join(missing)}")
        return
    for row in reader:
        if not row:
            continue
        if len(row) != len(header):
            skips.bad_line(
                source, reader.line_num, f"expected {len(header)} columns, found {len(row)}"
            )
            continue
        yield reader.line_num, dict(zip(header, row, strict=True))


def _int(row: dict[str, str], column: str) -> int:
    text = row[column].strip()
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{column} {text!r} is not an integer") from None


def read_nodes(
    lines: Iterable[str], source: str, options: AlibabaOptions, skips: records.Skips
) -> records.Capacity:
    """A flavor per GPU model (`cpu-only` for nodes without GPUs), with the sum of its
    nodes' cpu, memory and GPUs as quota."""
    totals: dict[str, Counter[str]] = {}
    gpu = GPU_RESOURCES[options.gpu_unit]
    for number, row in _rows(lines, source, NODE_COLUMNS, skips):
        try:
            cpu, memory, gpus = (_int(row, c) for c in NODE_COLUMNS[:3])
        except ValueError as err:
            skips.bad_line(source, number, str(err))
            continue
        model = row["model"].strip() or (NO_GPU_FLAVOR if gpus == 0 else "unknown")
        quota = totals.setdefault(model, Counter())
        quota.update(
            {
                "cpu": cpu,
                "memory": memory * MIB,
                gpu: gpus * (WHOLE_GPU if options.gpu_unit == "milli" else 1),
            }
        )
    # CPU-only nodes first: a pod without GPUs lands there before it takes a GPU node.
    order = sorted(totals, key=lambda m: (m != NO_GPU_FLAVOR, m))
    flavors = [
        records.Flavor(
            records.dns_label(model),
            {r: totals[model][r] for r in ("cpu", "memory", gpu)},
            {GPU_MODEL_LABEL: model},
        )
        for model in order
    ]
    return records.Capacity(
        flavors,
        f"node list {source}",
        priorities={f"qos-{q}": v for q, v in QOS_PRIORITY.items()},
        preempt_lower_priority=True,
    )


def _requests(row: dict[str, str], options: AlibabaOptions) -> dict[str, int]:
    requests = {"cpu": _int(row, "cpu_milli"), "memory": _int(row, "memory_mib") * MIB}
    gpus = _int(row, "num_gpu")
    if gpus > 0:
        share = _int(row, "gpu_milli") or WHOLE_GPU
        if options.gpu_unit == "milli":
            requests[GPU_RESOURCES["milli"]] = gpus * min(share, WHOLE_GPU)
        else:
            requests[GPU_RESOURCES["gpu"]] = gpus  # a shared GPU counts as a whole one
    return {r: v for r, v in requests.items() if v > 0}


def _job(
    row: dict[str, str], order: int, options: AlibabaOptions, skips: records.Skips
) -> records.TraceJob | None:
    """The pod of one well-formed row; None (counted) for a pod that never ran."""
    if not row["scheduled_time"].strip():
        skips.skip("never scheduled")
        return None
    created, deleted, scheduled = (_int(row, c) for c in TIME_COLUMNS)
    if created < 0 or scheduled < created:
        raise ValueError(f"scheduled_time {scheduled} before creation_time {created}")
    runtime = deleted - scheduled
    if runtime <= 0:
        skips.skip("never ran: deleted when scheduled")
        return None
    requests = _requests(row, options)
    qos = records.dns_label(row["qos"], "unknown")
    models = tuple(sorted(m for m in row["gpu_spec"].split("|") if m.strip()))
    return records.TraceJob(
        name=records.dns_label(row["name"]),
        order=order,
        submit=created,
        runtime=runtime,
        pods=(records.PodGroup(1, requests),),
        tenant=records.dns_label(options.name),
        queue=qos,
        priority_class=f"qos-{qos}" if qos in QOS_PRIORITY else None,
        labels={records.QOS_LABEL: qos},
        node_labels={GPU_MODEL_LABEL: models} if models else {},
    )


def read_pods(lines: Iterable[str], source: str, options: AlibabaOptions) -> records.Trace:
    """Every pod that ran; malformed rows are named in the trace's skips."""
    skips = records.Skips()
    read = records.JobList(skips)
    for number, row in _rows(lines, source, POD_COLUMNS + TIME_COLUMNS, skips):
        try:
            job = _job(row, len(read.jobs), options, skips)
        except ValueError as err:
            skips.bad_line(source, number, str(err))
            continue
        if job is not None:
            read.add(job, source, number, f"pod {row['name']!r}")
    return records.Trace(options.name, ORIGIN, read.jobs, skips)
