"""`queuescope trace import swf|alibaba FILE`: a job trace as a simulator scenario
(docs/simulate.md#importing-traces). Opens the files; the mapping is scheduler.traces."""

from __future__ import annotations

import argparse
import gzip
import io
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import yaml

from scheduler.api.decode import ApiError, load_documents
from scheduler.api.durations import DurationError, parse_duration
from scheduler.api.quantity import Quantity, QuantityError, scheduler_value
from scheduler.traces.alibaba import GPU_RESOURCES, AlibabaOptions, read_nodes, read_pods
from scheduler.traces.records import Capacity, Flavor, Skips, Trace, dns_label
from scheduler.traces.scenario import (
    Cluster,
    Imported,
    ImportOptions,
    QuotaFileError,
    build,
    cluster_from_capacity,
    cluster_from_documents,
    write,
)
from scheduler.traces.swf import SwfOptions, machines_capacity, read_machines, read_swf

EXIT_OK = 0
EXIT_BAD_INPUT = 2
GZIP_MAGIC = b"\x1f\x8b"
MICROS = 1_000_000


class TraceInputError(Exception):
    """Bad input for the import as a whole (exit 2): a missing file, no capacity, ..."""


def add_trace_parser(sub: Any) -> None:
    trace = sub.add_parser("trace", help="job traces: import SWF or Alibaba traces as scenarios")
    actions = trace.add_subparsers(dest="trace_command", required=True)
    imp = actions.add_parser(
        "import",
        help="write a trace as a scenario for `queuescope simulate`",
        description="Write a job trace as a scenario: Kueue objects for its cluster and one "
        "Workload arrival per job (docs/simulate.md#importing-traces).",
    )
    formats = imp.add_subparsers(dest="trace_format", required=True)
    swf = formats.add_parser("swf", help="Standard Workload Format (.swf, .swf.gz), Alea's too")
    _common(
        swf,
        "--machines",
        "Alea .machines file of the clusters (default: FILE's .machines beside it)",
    )
    swf.add_argument(
        "--tenant",
        choices=("user", "group", "none"),
        default="user",
        help="what becomes a namespace: user (field 12), group (field 13), or one for all",
    )
    ali = formats.add_parser("alibaba", help="Alibaba GPU trace v2023 pod list (CSV)")
    _common(
        ali, "--nodes", "node list for the quotas (default: the one *node_list*.csv beside FILE)"
    )
    ali.add_argument(
        "--gpu-unit",
        choices=("milli", "gpu"),
        default="milli",
        help="milli: thousandths of a GPU as alibaba.com/gpu-milli (sharing kept); gpu: "
        "whole nvidia.com/gpu (a shared GPU counts as one)",
    )


def _common(p: argparse.ArgumentParser, capacity_flag: str, capacity_help: str) -> None:
    """The flags every format takes; `capacity_flag` names the format's own file of the
    cluster's capacity, one of the quota's sources."""
    p.add_argument("file", metavar="FILE", help="the trace (gzip-compressed or not)")
    p.add_argument("-o", "--output", default="-", metavar="FILE", help="scenario file (- = stdout)")
    p.add_argument("--name", help="the trace's name (default: from FILE): Scenario, ClusterQueue")
    p.add_argument("--cluster-queue", metavar="NAME", help="the ClusterQueue (default: --name)")
    quota = p.add_argument_group("quota (default: from the trace's header, machines or nodes)")
    quota.add_argument(capacity_flag, metavar="FILE", help=capacity_help)
    quota.add_argument("--quota-file", metavar="FILE", help="YAML of flavors and ClusterQueues")
    quota.add_argument("--cpu", metavar="QUANTITY", help="cpu quota of one flavor 'default'")
    quota.add_argument("--memory", metavar="QUANTITY", help="memory quota (with --cpu)")
    quota.add_argument("--gpu", metavar="QUANTITY", help="GPU quota in whole GPUs (with --cpu)")
    p.add_argument(
        "--queueing-strategy",
        choices=("BestEffortFIFO", "StrictFIFO"),
        default="BestEffortFIFO",
        help="of the generated ClusterQueue",
    )
    p.add_argument(
        "--start-at",
        metavar="DURATION",
        default="0s",
        help="drop jobs submitted earlier than this after the first (Go duration)",
    )
    p.add_argument("--limit", type=int, metavar="N", help="import at most N jobs, the first")


@contextmanager
def open_text(path: str) -> Iterator[TextIO]:
    """A trace file as text lines, decompressed when it is gzip (by its first bytes)."""
    try:
        raw = Path(path).open("rb")  # noqa: SIM115 (closed by the `with` below)
    except OSError as err:
        raise TraceInputError(f"{path}: cannot read: {err.strerror or err}") from None
    with raw:
        binary: Any = gzip.GzipFile(fileobj=raw) if raw.peek(2)[:2] == GZIP_MAGIC else raw
        # Undecodable bytes become U+FFFD: the line they are on is then malformed, not fatal.
        yield io.TextIOWrapper(binary, encoding="utf-8", errors="replace", newline="")


def _default_name(path: str) -> str:
    name = Path(path).name
    for suffix in (".gz", ".swf", ".csv"):
        name = name.removesuffix(suffix)
    return dns_label(name, "trace")


def _read(path: str, reader: Any) -> Any:
    try:
        with open_text(path) as lines:
            return reader(lines)
    except (OSError, EOFError, gzip.BadGzipFile) as err:
        raise TraceInputError(f"{path}: cannot read: {err}") from None


def _flag_capacity(args: argparse.Namespace, gpu_resource: str, gpu_scale: int) -> Capacity | None:
    if args.cpu is None:
        if args.memory is not None or args.gpu is not None:
            raise TraceInputError("--memory and --gpu need --cpu")
        return None
    quota: dict[str, int] = {}
    for flag, resource, scale in (
        ("cpu", "cpu", 1),
        ("memory", "memory", 1),
        ("gpu", gpu_resource, gpu_scale),
    ):
        raw = getattr(args, flag)
        if raw is None:
            continue
        try:
            quota[resource] = scheduler_value(resource, Quantity.parse(raw)) * scale
        except QuantityError as err:
            raise TraceInputError(f"--{flag}: {err}") from None
    return Capacity([Flavor("default", quota)], "command line")


def _quota_file(path: str, cluster_queue: str | None) -> Cluster:
    try:
        load_documents([path])  # validated as Kueue objects: errors name document and field
        documents = [d for d in yaml.safe_load_all(Path(path).read_text()) if d is not None]
        return cluster_from_documents(documents, path, cluster_queue)
    except ApiError as err:
        raise TraceInputError(str(err)) from None
    except (OSError, yaml.YAMLError, QuotaFileError) as err:
        raise TraceInputError(str(err)) from None


def _sibling(path: str, pattern: str) -> str | None:
    found = sorted(Path(path).parent.glob(pattern))
    return str(found[0]) if len(found) == 1 else None


def _swf(args: argparse.Namespace, name: str) -> tuple[Trace, Capacity | None]:
    machines_path = args.machines
    if machines_path is None:
        candidate = Path(args.file.removesuffix(".gz") + ".machines")
        machines_path = str(candidate) if candidate.is_file() else None
    machines_skips = Skips()
    machines = (
        _read(machines_path, lambda lines: read_machines(lines, machines_path, machines_skips))
        if machines_path
        else []
    )
    options = SwfOptions(name, args.tenant, tuple(m.name for m in machines))
    trace: Trace = _read(args.file, lambda lines: read_swf(lines, args.file, options))
    trace.skips.malformed[:0] = machines_skips.malformed
    capacity = machines_capacity(machines, f"machines file {machines_path}") or trace.capacity
    return trace, capacity


def _alibaba(args: argparse.Namespace, name: str) -> tuple[Trace, Capacity | None]:
    options = AlibabaOptions(name, args.gpu_unit)
    nodes_path = args.nodes or _sibling(args.file, "*node_list*.csv")
    trace: Trace = _read(args.file, lambda lines: read_pods(lines, args.file, options))
    if nodes_path is None:
        return trace, None
    node_skips = Skips()
    capacity: Capacity = _read(
        nodes_path, lambda lines: read_nodes(lines, nodes_path, options, node_skips)
    )
    trace.skips.malformed[:0] = node_skips.malformed
    return trace, capacity


def import_trace(args: argparse.Namespace) -> Imported:
    """The scenario of the trace the arguments name (TraceInputError: bad input)."""
    name = args.name or _default_name(args.file)
    if args.limit is not None and args.limit < 0:
        raise TraceInputError("--limit must be >= 0")
    try:
        start_at = parse_duration(args.start_at) // MICROS
    except DurationError as err:
        raise TraceInputError(f"--start-at: {err}") from None
    if args.trace_format == "swf":
        trace, capacity = _swf(args, name)
        gpu_resource, gpu_scale = GPU_RESOURCES["gpu"], 1
    else:
        trace, capacity = _alibaba(args, name)
        gpu_resource = GPU_RESOURCES[args.gpu_unit]
        gpu_scale = 1000 if args.gpu_unit == "milli" else 1
    if args.quota_file:
        cluster = _quota_file(args.quota_file, args.cluster_queue)
    else:
        capacity = _flag_capacity(args, gpu_resource, gpu_scale) or capacity
        if capacity is None:
            raise TraceInputError(
                f"{args.file}: the trace states no capacity; give --cpu (and --memory, "
                "--gpu) or --quota-file"
            )
        cluster = cluster_from_capacity(
            capacity, args.cluster_queue or name, args.queueing_strategy
        )
    return build(trace, cluster, ImportOptions(start_at=start_at, limit=args.limit))


def run_trace(args: argparse.Namespace, argv: list[str] | None = None) -> int:
    try:
        imported = import_trace(args)
    except TraceInputError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    command = "queuescope " + shlex.join(argv if argv is not None else sys.argv[1:])
    comments = [f"Generated by: {command}", *imported.summary()]
    if args.output == "-":
        write(imported, sys.stdout, comments)
    else:
        try:
            with Path(args.output).open("w", encoding="utf-8") as out:
                write(imported, out, comments)
        except OSError as err:
            print(f"error: {args.output}: cannot write: {err.strerror or err}", file=sys.stderr)
            return EXIT_BAD_INPUT
    for line in imported.summary():
        print(f"trace import: {line}", file=sys.stderr)
    return EXIT_OK
