"""Where cluster mode's bytes per Workload go, structure by structure.

Not a benchmark with a target: a measuring tool for docs/benchmarks.md ("Cluster-mode
memory beside upstream Kueue"). It wires the server's cluster runtime as `serve` does
(`queuescope/serve_cluster.py`: the core, the engine with its publisher, the store, the
Job integration and the status writers, leading without an election) over the in-memory
API server of the unit tests, seeds N pending Workloads shaped as `memory --cluster`
creates them (or, with `--jobs`, N suspended Jobs the integration makes Workloads for),
waits until everything is synced and quiet, and reports:

* the process's RSS growth per Workload over the run (the fake API server's objects are
  made before the start, so mostly outside it), and its peak growth: when the two are
  equal, what the process holds is the high-water mark of the load (the initial list
  held parsed), not the sum of its live objects;
* by default, deep sizes (`sys.getsizeof` over everything reachable, each object charged
  to the first structure it is found from): the store's records, the core's
  WorkloadStates, the rest of the core (queues, holders, tree), the published snapshot,
  the publisher's caches, the Job integration, the writers;
* with `--trace`, instead, what `tracemalloc` still holds grouped by the innermost frame
  in this repository's product code (a pydantic or `json` allocation is charged to the
  line of ours that asked for it) and by area. Much slower.

    python -m benchmarks.memory_breakdown --workloads 10000 [--jobs] [--trace] [--forecasts]

With `--forecasts` the forecast service runs too, with its worker process, as `serve`
starts it (`queuescope/serve_forecasts.py`), and the measure waits for its second
refresh: what feeding the worker costs the server's process.

The fake's uids are short ("uid-10"): a real one is 36 characters, about 50 bytes more
per Workload, which the deep sizes here do not show.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import sys
import time
import tracemalloc
import types
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry

from queuescope.cli import _parser
from queuescope.serve_cluster import _cluster_runtime, _new_engine
from queuescope.serve_forecasts import OFF, forecast_service
from scheduler.runtime.engine import Engine
from scheduler.runtime.forecasts import ForecastService
from scheduler.runtime.kube.cluster import ClusterRuntime
from scheduler.runtime.kube.heap import release_free_heap
from scheduler.runtime.kube.resources import (
    CLUSTER_QUEUES,
    JOBS,
    LOCAL_QUEUES,
    NAMESPACES,
    RESOURCE_FLAVORS,
    WORKLOADS,
)
from tests.e2e.bulk import pending_workload
from tests.unit.runtime.kube.fakes import FakeKube
from tests.unit.runtime.support import cluster_queue, flavor, job, local_queue, namespace

ROOT = Path(__file__).resolve().parent.parent
OURS = tuple(str(ROOT / d) + "/" for d in ("scheduler", "visibility_server", "queuescope"))
NS = "bench-memory"
KIB = 1024

# Area of a product file, by the first path prefix that matches (relative to the root).
AREAS: tuple[tuple[str, str], ...] = (
    ("scheduler/runtime/kube/records.py", "store: Workload records"),
    ("scheduler/runtime/kube/reflector.py", "store: reflector caches"),
    ("scheduler/runtime/kube/store.py", "store"),
    ("scheduler/runtime/kube/jobs.py", "Job integration"),
    ("scheduler/runtime/kube/status_writer.py", "status writers"),
    ("scheduler/runtime/kube/", "cluster runtime, other"),
    ("scheduler/runtime/snapshot", "snapshot"),
    ("scheduler/runtime/publish", "snapshot"),
    ("scheduler/runtime/", "runtime, other"),
    ("scheduler/core/", "core"),
    ("scheduler/api/", "API decoding (kept by the core)"),
    ("scheduler/kubeapi/", "API client"),
    ("visibility_server/", "visibility server"),
    ("scheduler/", "scheduler, other"),
)


@dataclass
class Measured:
    rss_growth: int  # bytes of RSS the server's start added, fake API server's share aside
    untrimmed_growth: int  # the same before the heap's free pages were given back
    peak_growth: int  # the same for the peak RSS (VmHWM) over the run
    snapshot: tracemalloc.Snapshot | None  # with tracing
    deep: dict[str, int]  # without: deep sizes by structure


def _settings(qps: float, forecasts: bool) -> argparse.Namespace:
    method = [] if forecasts else ["--forecast-method", OFF]
    flags = ["--kubeconfig", "unused", "--kube-api-qps", str(qps), "--kube-api-burst", "1000"]
    return _parser().parse_args(["serve", *flags, *method])


def _seed(fake: FakeKube, n: int, jobs: bool) -> None:
    fake.seed(NAMESPACES, namespace(NS))
    fake.seed(RESOURCE_FLAVORS, flavor("bench-flavor"))
    fake.seed(CLUSTER_QUEUES, cluster_queue("bench", "0", flavor_name="bench-flavor"))
    fake.seed(LOCAL_QUEUES, local_queue(NS, "bench", "bench"))
    for i in range(n):
        if jobs:
            fake.seed(JOBS, {**job(NS, f"job-{i:06d}", "bench"), "status": {}})
        else:
            fake.seed(WORKLOADS, pending_workload(NS, "bench", i))


def _frame_key(trace: tracemalloc.Trace) -> str:
    """The innermost frame in our product code, else the innermost one."""
    for frame in reversed(trace.traceback):
        if frame.filename.startswith(OURS):
            return f"{frame.filename[len(str(ROOT)) + 1 :]}:{frame.lineno}"
    first = trace.traceback[-1]
    name = first.filename
    if name.startswith(str(ROOT)):
        name = name[len(str(ROOT)) + 1 :]
    return f"(outside) {name}:{first.lineno}"


def _area(key: str) -> str:
    if key.startswith("(outside) tests/"):
        return "fake API server (not in the real process)"
    for prefix, area in AREAS:
        if key.startswith(prefix):
            return area
    return "outside our code (startup, libraries)"


_OPAQUE = (
    type,
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.FrameType,
    types.CoroutineType,
    types.CodeType,
    asyncio.AbstractEventLoop,
    asyncio.Future,
    logging.Logger,
)


class DeepSizes:
    """Bytes (`sys.getsizeof`) reachable from roots, each object charged once, to the
    first root it is found from: the order of `measure` calls decides who owns what is
    shared. Classes, modules, functions, frames, the loop and tasks are not followed."""

    def __init__(self, *exclude: object) -> None:
        self.seen: set[int] = {id(x) for x in exclude}
        self.sizes: dict[str, int] = {}

    def measure(self, label: str, *roots: object) -> None:
        total = 0
        stack = list(roots)
        while stack:
            obj = stack.pop()
            if id(obj) in self.seen or isinstance(obj, _OPAQUE):
                continue
            self.seen.add(id(obj))
            total += sys.getsizeof(obj)
            stack.extend(gc.get_referents(obj))
        self.sizes[label] = self.sizes.get(label, 0) + total


def _deep_sizes(
    fake: FakeKube, engine: Engine, runtime: ClusterRuntime, forecasts: ForecastService | None
) -> dict[str, int]:
    store = runtime.store
    sizes = DeepSizes(fake, fake.objects, fake.log, fake.bodies, fake.calls)
    sizes.measure("store: Workload records (reflector cache)", store.reflectors["Workload"].cache)
    for kind, reflector in store.reflectors.items():
        if kind != "Workload":
            sizes.measure("store: other kinds' caches", reflector.cache)
    sizes.measure("core: WorkloadState of each Workload", engine.scheduler.objects.workloads)
    sizes.measure("core: queues, holders, tree, the rest", engine.scheduler)
    sizes.measure("snapshot: the published one", engine.snapshot())
    sizes.measure("snapshot: publisher's caches", engine.publisher)
    sizes.measure("forecast service", forecasts)
    sizes.measure("engine, other", engine)
    sizes.measure("Job integration", runtime.jobs)
    sizes.measure("status writers", runtime.workload_writer, runtime.queue_writer)
    sizes.measure("store, other (watch state, stats)", store)
    return sizes.sizes


def _rss(field: str = "VmRSS") -> int:
    """VmRSS (or another field, VmHWM) of this process in bytes (Linux /proc)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * KIB
    return 0


def _reset_peak() -> None:
    """Start the peak RSS (VmHWM) again from the current RSS, so that seeding the fake
    does not count (Linux 4.0 and later; elsewhere the peak is the process's)."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


async def _run(
    n: int, jobs: bool, settle: float, trace: bool, forecasts: bool
) -> tuple[Measured, float]:
    fake = FakeKube()
    _seed(fake, n, jobs)
    args = _settings(1000.0, forecasts)
    gc.collect()
    rss_before = _rss()
    _reset_peak()
    if trace:
        tracemalloc.start(10)
    started = time.monotonic()
    _, engine = _new_engine(args)
    registry = CollectorRegistry()
    runtime = _cluster_runtime(args, fake.rest, engine, registry)
    service = forecast_service(args, engine, registry)
    tasks = [asyncio.create_task(engine.run()), asyncio.create_task(runtime.run())]
    if service is not None:
        tasks.append(asyncio.create_task(service.run()))
    await runtime.store.synced.wait()
    quiet_since = time.monotonic()
    last = (fake.rv, runtime.workload_writer.backlog)
    while time.monotonic() - quiet_since < settle:
        await asyncio.sleep(0.5)
        await engine.flush()
        now = (fake.rv, runtime.workload_writer.backlog)
        if now != last or not engine.idle or now[1]:
            quiet_since, last = time.monotonic(), now
            print(f"settling: version {now[0]}, backlog {now[1]}", file=sys.stderr)
    while service is not None and service.stats.refreshes < 2:  # the first feed done
        await asyncio.sleep(0.5)
    took = time.monotonic() - started
    gc.collect()
    untrimmed = _rss() - rss_before
    # As `serve` does once synced (queuescope/serve_cluster.py).
    gc.freeze()
    await release_free_heap()
    measured = Measured(
        _rss() - rss_before,
        untrimmed,
        _rss("VmHWM") - rss_before,
        tracemalloc.take_snapshot() if trace else None,
        {} if trace else _deep_sizes(fake, engine, runtime, service),
    )
    tracemalloc.stop()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return measured, took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory_breakdown")
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument("--jobs", action="store_true", help="seed Jobs, not Workloads")
    parser.add_argument("--top", type=int, default=25, help="lines to list")
    parser.add_argument("--settle", type=float, default=3.0, help="quiet seconds to wait")
    parser.add_argument(
        "--forecasts", action="store_true", help="run the forecast service and its worker"
    )
    parser.add_argument(
        "--trace",
        action="store_true",
        help="group by allocating line (tracemalloc; slow) instead of deep sizes by structure",
    )
    args = parser.parse_args(argv)
    n = args.workloads
    measured, took = asyncio.run(_run(n, args.jobs, args.settle, args.trace, args.forecasts))
    what = "Jobs" if args.jobs else "Workloads"
    print(f"{n:,} {what}, synced and quiet in {took:.0f} s")
    growth = measured.rss_growth
    print(f"RSS growth: {growth / KIB / KIB:.1f} MiB, {growth / n:,.0f} B per Workload")
    before = measured.untrimmed_growth
    print(
        f"RSS growth before the final heap trim: {before / KIB / KIB:.1f} MiB,"
        f" {before / n:,.0f} B per Workload"
    )
    peak = measured.peak_growth
    print(f"peak RSS growth: {peak / KIB / KIB:.1f} MiB, {peak / n:,.0f} B per Workload")
    if measured.snapshot is None:
        print("\n| structure | deep size per Workload | total |\n|---|---|---|")
        for label, size in measured.deep.items():
            print(f"| {label} | {size / n:,.0f} B | {size / KIB / KIB:.1f} MiB |")
        total = sum(measured.deep.values())
        print(f"| **all of the above** | **{total / n:,.0f} B** | {total / KIB / KIB:.1f} MiB |")
        return 0
    by_line: dict[str, int] = defaultdict(int)
    for trace in measured.snapshot.traces:
        by_line[_frame_key(trace)] += trace.size
    by_area: dict[str, int] = defaultdict(int)
    for key, size in by_line.items():
        by_area[_area(key)] += size
    server = sum(s for a, s in by_area.items() if not a.startswith("fake"))
    print("\n| area | traced per Workload | total |\n|---|---|---|")
    for area, size in sorted(by_area.items(), key=lambda kv: -kv[1]):
        print(f"| {area} | {size / n:,.0f} B | {size / KIB / KIB:.1f} MiB |")
    print(f"| **server, all areas** | **{server / n:,.0f} B** | {server / KIB / KIB:.1f} MiB |")
    print("\n| line | per Workload |\n|---|---|")
    for key, size in sorted(by_line.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"| {key} | {size / n:,.0f} B |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
