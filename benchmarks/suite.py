"""The benchmarks of docs/performance.md, each a function of its parsed arguments.

Sizes are flags; each flag's default depends on `--quick` (a size that finishes in
under a minute) or not (the size `make bench` runs). See `python -m benchmarks NAME
--help`.
"""

from __future__ import annotations

import argparse
import heapq
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.cluster_sync import cluster_sync
from benchmarks.feed import CLUSTER_QUEUE, Shape, loaded_scheduler, workload_manifest
from benchmarks.forecast_accuracy import TRACES_DIR, forecast_accuracy, forecaster_present, names
from benchmarks.harness import BenchServer
from benchmarks.memory_cluster import memory_cluster
from benchmarks.result import Result, Target, format_number
from benchmarks.stats import median, ratio, summary
from scheduler.api import decode_object
from scheduler.core.clock import ManualClock
from scheduler.core.cycle import run_cycle
from scheduler.core.ingest import apply_object, scheduler_config
from scheduler.core.metadata import fill_metadata
from scheduler.core.scheduler import Scheduler

KIB = 1024
FEED_LABEL = {"decode": "decoded", "bulk": "template copies"}


@dataclass(frozen=True, slots=True)
class Size:
    """A size flag: its full and quick defaults."""

    flag: str
    full: Any
    quick: Any
    help: str
    type: Callable[[str], Any] = int


def depths(value: str) -> list[int]:
    """`1000,10k,1M` -> [1000, 10000, 1000000]."""
    out = []
    for raw in value.split(","):
        part = raw.strip().lower()
        scale = {"k": 1000, "m": 1_000_000}.get(part[-1:], 1)
        digits = part[:-1] if scale > 1 else part
        if not digits.isdigit():
            raise argparse.ArgumentTypeError(f"not a size: {value!r}")
        out.append(int(digits) * scale)
    if not out or any(d < 0 for d in out):
        raise argparse.ArgumentTypeError(f"no sizes in {value!r}")
    return out


@dataclass(frozen=True, slots=True)
class Switch:
    """An on/off flag that picks a variant of a benchmark."""

    flag: str
    help: str


@dataclass(frozen=True, slots=True)
class Benchmark:
    name: str
    summary: str
    sizes: tuple[Size, ...] = ()
    run: Callable[[argparse.Namespace], Result] | None = None
    unavailable: str = ""  # why it cannot run yet (then `run` is None)
    switches: tuple[Switch, ...] = ()

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        for size in self.sizes:
            parser.add_argument(
                f"--{size.flag}",
                type=size.type,
                default=None,
                help=f"{size.help} (default {size.full!r}; with --quick {size.quick!r})",
            )
        for switch in self.switches:
            parser.add_argument(f"--{switch.flag}", action="store_true", help=switch.help)

    def resolve(self, args: argparse.Namespace) -> argparse.Namespace:
        """Fill unset size flags from the full or quick defaults."""
        values = vars(args).copy()
        for size in self.sizes:
            key = size.flag.replace("-", "_")
            if values.get(key) is None:
                default = size.quick if values.get("quick") else size.full
                values[key] = size.type(default) if isinstance(default, str) else default
        return argparse.Namespace(**values)

    def command(self, args: argparse.Namespace) -> str:
        parts = ["python -m benchmarks", self.name]
        if getattr(args, "quick", False):
            parts.append("--quick")
        parts.extend(
            f"--{s.flag}" for s in self.switches if getattr(args, s.flag.replace("-", "_"), False)
        )
        for size in self.sizes:
            value = getattr(args, size.flag.replace("-", "_"), None)
            if value is not None and value != "":  # an unset path flag
                shown = ",".join(map(str, value)) if isinstance(value, list) else str(value)
                parts.append(f"--{size.flag} {shown}")
        return " ".join(parts)


def _ms(value: float) -> str:
    return f"{format_number(value)} ms"


# -- visibility-latency ----------------------------------------------------------------


def _same_items(server: BenchServer, depth: int) -> bool:
    """The baseline answers the same items as ours (it is a fair comparison)."""
    offset = max(0, depth // 2 - 50)
    query = f"?limit=100&offset={offset}"
    ours = server.get_json(
        f"/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/{CLUSTER_QUEUE}/pendingworkloads"
        + query
    )
    base = server.get_json(f"/bench/baseline/clusterqueues/{CLUSTER_QUEUE}/pendingworkloads{query}")
    return bool(ours["items"] == base["items"] and len(ours["items"]) == min(100, depth))


def visibility_latency(args: argparse.Namespace) -> Result:
    per_depth: dict[int, dict[str, Any]] = {}
    for depth in args.depths:
        with BenchServer(depth) as server:
            same = _same_items(server, depth)
            if not same:
                raise RuntimeError(f"baseline and ours disagree at depth {depth}")
            figures = server.loadgen(
                "latency",
                "--requests",
                str(args.requests),
                "--baseline",
                "--baseline-requests",
                str(args.baseline_requests),
                "--max-seconds",
                str(args.max_seconds),
            )
            figures["stats"] = server.get_json("/bench/stats")
        per_depth[depth] = figures
    rows = []
    for depth, f in per_depth.items():
        ours, base = f["ours"]["latency_ms"], f["baseline"]["latency_ms"]
        rows.append(
            [
                f"{depth:,}",
                _ms(ours["p50"]),
                _ms(ours["p99"]),
                str(ours["count"]),
                _ms(base["p50"]),
                _ms(base["p99"]),
                str(base["count"]),
                f"{format_number(ratio(base['p50'], ours['p50']))}x",
            ]
        )

    def p(depth: int, who: str, key: str) -> float | None:
        f = per_depth.get(depth)
        return None if f is None else float(f[who]["latency_ms"][key])

    main_depth = 100_000 if 100_000 in per_depth else max(per_depth)
    ours50, base50 = p(main_depth, "ours", "p50"), p(main_depth, "baseline", "p50")
    headline = ratio(base50, ours50) if ours50 is not None and base50 is not None else float("nan")
    p99_100k = p(100_000, "ours", "p99")
    ratio_100k = headline if main_depth == 100_000 else None
    small, large = p(1000, "ours", "p99"), p(1_000_000, "ours", "p99")
    growth = ratio(large, small) if small is not None and large is not None else None
    return Result(
        name="visibility-latency",
        headline=headline,
        unit="x",
        headline_label=f"baseline/ours, p50, at N={main_depth:,}",
        command=visibility_latency_command(args),
        columns=[
            "pending (N)",
            "ours p50",
            "ours p99",
            "ours n",
            "baseline p50",
            "baseline p99",
            "baseline n",
            "baseline/ours (p50)",
        ],
        rows=rows,
        targets=[
            Target("our p99 at N=100k", p99_100k, "<", 5.0, "ms"),
            Target("baseline/ours at N=100k (p50)", ratio_100k, ">=", 20.0, "x"),
            Target("our p99 growth from N=1k to N=1M", growth, "<", 2.0, "x"),
        ],
        notes=[
            "GET .../clusterqueues/bench/pendingworkloads?limit=100&offset=X, X uniform at random, "
            "one keep-alive HTTPS connection per side, ours and baseline requests interleaved "
            "(the first 20 of ours and 2 of the baseline dropped as warm-up); the baseline may "
            "use half of the time limit per depth, so at 1M it measures fewer requests.",
            "The baseline copies the ClusterQueue's pending set and sorts it per request, as "
            "upstream Kueue does (benchmarks/baseline.py); it skips authentication and "
            "authorization, which only flatters it. Before measuring, a page from each side is "
            "compared: the items are identical.",
        ],
        figures={str(k): v for k, v in per_depth.items()},
    )


def visibility_latency_command(args: argparse.Namespace) -> str:
    return BENCHMARKS["visibility-latency"].command(args)


# -- visibility-throughput ---------------------------------------------------------------


CONDITIONAL_PAGES = 50  # distinct pages the conditional run asks for (one probe each)


def _with_server_cpu(server: BenchServer, common: list[str], conditional: bool) -> dict[str, Any]:
    """A load-generator run, plus the server's CPU time per request over it: on a
    shared machine the server may not get a whole core, and this figure does not
    depend on how much of one it got."""
    extra = ["--conditional", "--distinct-pages", str(CONDITIONAL_PAGES)] if conditional else []
    before = server.get_json("/bench/stats")["cpu_seconds"]
    figures: dict[str, Any] = server.loadgen("throughput", *common, *extra)
    spent = server.get_json("/bench/stats")["cpu_seconds"] - before
    served = figures["requests"] + figures["errors"] + (CONDITIONAL_PAGES if conditional else 0)
    figures["server_cpu_us_per_request"] = spent / served * 1e6 if served else float("nan")
    return figures


def visibility_throughput(args: argparse.Namespace) -> Result:
    log_level = "INFO" if args.access_log else "WARNING"
    with BenchServer(args.depth, log_level=log_level) as server:
        loop = server.get_json("/bench/stats").get("loop", "")
        common = ["--connections", str(args.connections), "--seconds", str(args.seconds)]
        pages = _with_server_cpu(server, common, conditional=False)
        not_modified = _with_server_cpu(server, common, conditional=True)
    rows = []
    for label, f in (("100-item page (200)", pages), ("If-None-Match (304)", not_modified)):
        lat = f["latency_ms"]
        cpu_us = f["server_cpu_us_per_request"]
        rows.append(
            [
                label,
                format_number(f["rps"]),
                str(f["requests"]),
                str(f["errors"]),
                _ms(lat.get("p50", float("nan"))),
                _ms(lat.get("p99", float("nan"))),
                f"{f['client_cpu_share'] * 100:.0f}%",
                f"{format_number(cpu_us)} µs",
                f"{format_number(1e6 / cpu_us)} req/s",
            ]
        )
    return Result(
        name="visibility-throughput",
        headline=pages["rps"],
        unit="req/s",
        headline_label=f"100-item pages at N={args.depth:,}",
        command=BENCHMARKS["visibility-throughput"].command(args),
        columns=[
            "request",
            "req/s",
            "requests",
            "errors",
            "p50",
            "p99",
            "load generator CPU",
            "server CPU per request",
            "one whole core at that cost",
        ],
        rows=rows,
        targets=[
            Target("pages per second", pages["rps"], ">=", 2000, "req/s"),
            Target("304s per second", not_modified["rps"], ">=", 5000, "req/s"),
            Target("errors", pages["errors"] + not_modified["errors"], "<=", 0, ""),
        ],
        notes=[
            f"{args.connections} keep-alive connections from one load-generator process "
            f"pinned to the other CPU, {args.seconds:g} s each; random offsets for pages, "
            f"{CONDITIONAL_PAGES} distinct pages for the conditional requests. "
            "'load generator CPU' near 100% means the client, not the server, set the pace.",
            f"The server ran on the {loop or 'default'} event loop. 'Server CPU per request' "
            "is the server process's CPU time over the run divided by the requests answered "
            "(the probe request per page of the conditional run included, background work of the "
            "idle engine too); 'one whole core at that cost' is its inverse, the rate the "
            "server would sustain if it had a core to itself, which on a shared machine the "
            "measured req/s may not reach.",
        ],
        figures={"pages": pages, "not_modified": not_modified, "loop": loop},
    )


# -- scheduler-throughput (pure core, in this process) -------------------------------------

# Upstream Kueue's scheduler performance test, "baseline" configuration: per ClusterQueue
# (class, count, creation interval ms, runtime ms, priority, cpu request).
UPSTREAM_SETS = (
    ("small", 350, 100, 200, 50, 1),
    ("medium", 100, 500, 500, 100, 5),
    ("large", 50, 1200, 1000, 200, 20),
)


def _baseline_cluster(cohorts: int, queues: int) -> list[dict[str, Any]]:
    kueue = "kueue.x-k8s.io/v1beta1"
    docs: list[dict[str, Any]] = [
        {"apiVersion": kueue, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "perf"}},
    ]
    for c in range(cohorts):
        for q in range(queues):
            name = f"cq-{c}-{q}"
            docs.append(
                {
                    "apiVersion": kueue,
                    "kind": "ClusterQueue",
                    "metadata": {"name": name},
                    "spec": {
                        "cohort": f"cohort-{c}",
                        "namespaceSelector": {},
                        "preemption": {
                            "reclaimWithinCohort": "Any",
                            "withinClusterQueue": "LowerPriority",
                        },
                        "resourceGroups": [
                            {
                                "coveredResources": ["cpu"],
                                "flavors": [
                                    {
                                        "name": "default",
                                        "resources": [
                                            {
                                                "name": "cpu",
                                                "nominalQuota": "20",
                                                "borrowingLimit": "100",
                                            }
                                        ],
                                    }
                                ],
                            }
                        ],
                    },
                }
            )
            docs.append(
                {
                    "apiVersion": kueue,
                    "kind": "LocalQueue",
                    "metadata": {"name": name, "namespace": "perf"},
                    "spec": {"clusterQueue": name},
                }
            )
    return docs


class CoreClock:
    """Time spent inside the core, and each cycle's duration."""

    def __init__(self) -> None:
        self.core = 0.0
        self.cycles: list[float] = []


def _run_cycles(s: Any, timer: CoreClock) -> list[str]:
    """Cycles until nothing changes, as the engine runs them (admissions or a new
    queue state go on; an unchanged unproductive state stops)."""

    admitted: list[str] = []
    seen: set[object] = set()
    while True:
        started = time.perf_counter()
        stats = run_cycle(s)
        s.observe_conditions()
        elapsed = time.perf_counter() - started
        timer.core += elapsed
        if not stats.ran:
            return admitted
        timer.cycles.append(elapsed)
        admitted.extend(stats.admitted)
        if stats.admitted or stats.preempted:
            seen.clear()
            continue
        state = tuple(
            (name, q.counts()) for name in s.queues.cluster_queues() if (q := s.queues.queue(name))
        )
        if state in seen:
            return admitted
        seen.add(state)


def upstream_baseline_shape(
    scale: float, cohorts: int, queues: int, *, keep_objects: bool = False
) -> dict[str, Any]:
    """The upstream shape on a virtual clock: arrivals at their creation times, each
    admitted workload finishing after its runtime; only core calls are timed. By default
    the core runs as the engine runs it, without keeping each workload's API object
    (only the simulator keeps them, for its output)."""

    start = 1_700_000_000_000_000
    clock = ManualClock(start)
    s = Scheduler(clock, scheduler_config(None))
    s.set_keep_objects(keep_objects)
    for doc in _baseline_cluster(cohorts, queues):
        apply_object(s, decode_object(doc))
    s.finalize_evictions()
    events: list[tuple[int, int, str, Any]] = []  # (instant, seq, kind, payload)
    runtime_of: dict[str, int] = {}
    seq = 0
    for c in range(cohorts):
        for q in range(queues):
            lq = f"cq-{c}-{q}"
            for cls, count, every_ms, runtime_ms, priority, cpu in UPSTREAM_SETS:
                for i in range(max(1, round(count * scale))):
                    manifest = workload_manifest("perf", f"{lq}-{cls}-{i}", priority, str(cpu))
                    manifest["spec"]["queueName"] = lq
                    at = start + i * every_ms * 1000
                    obj = fill_metadata(decode_object(manifest), at)
                    runtime_of[f"perf/{obj.metadata.name}"] = runtime_ms * 1000
                    events.append((at, seq, "arrive", obj))
                    seq += 1
    heapq.heapify(events)
    total = len(events)
    timer = CoreClock()
    admitted_total = 0
    running: dict[str, int] = {}  # key -> admission number (a stale finish is ignored)
    wall = time.perf_counter()
    while events:
        at = events[0][0]
        clock.set(max(at, clock.now()))
        started = time.perf_counter()
        while events and events[0][0] <= at:
            _, _, kind, payload = heapq.heappop(events)
            if kind == "arrive":
                apply_object(s, payload)
            else:
                key, number = payload
                if running.get(key) == number:
                    del running[key]
                    s.finish(key)
        s.finalize_evictions()
        s.observe_conditions()
        timer.core += time.perf_counter() - started
        for key in _run_cycles(s, timer):
            admitted_total += 1
            running[key] = admitted_total
            seq += 1
            heapq.heappush(
                events, (clock.now() + runtime_of[key], seq, "finish", (key, admitted_total))
            )
    wall = time.perf_counter() - wall
    finished = sum(1 for wl in s.objects.workloads.values() if wl.finished)
    return {
        "workloads": total,
        "admissions": admitted_total,
        "finished": finished,
        "core_seconds": timer.core,
        "wall_seconds": wall,
        "admissions_per_second": admitted_total / timer.core if timer.core else 0.0,
        "cycles": len(timer.cycles),
        "cycle_ms": summary([c * 1000 for c in timer.cycles]),
        "virtual_seconds": (clock.now() - start) / 1_000_000,
    }


def deep_queue_cycles(pending: int, cycles: int) -> dict[str, Any]:
    """Cycle time with `pending` workloads in one ClusterQueue: each cycle admits the
    head (1 cpu of 1), which then finishes, so every measured cycle does the same work."""

    clock = ManualClock(1_700_000_000_000_000)
    s = loaded_scheduler(clock, Shape(namespaces=10, cpu_quota="1"), pending + cycles)
    times: list[float] = []
    for _ in range(cycles):
        clock.set(clock.now() + 1000)
        started = time.perf_counter()
        stats = run_cycle(s)
        times.append(time.perf_counter() - started)
        if len(stats.admitted) != 1:
            raise RuntimeError(f"a deep-queue cycle admitted {len(stats.admitted)} workloads")
        s.finish(stats.admitted[0])
        s.finalize_evictions()
    return {"pending": pending, "cycle_ms": summary([t * 1000 for t in times])}


def scheduler_throughput(args: argparse.Namespace) -> Result:
    shape = upstream_baseline_shape(args.scale, args.cohorts, args.queues)
    kept = upstream_baseline_shape(args.scale, args.cohorts, args.queues, keep_objects=True)
    shallow = deep_queue_cycles(args.shallow, args.deep_cycles)
    deep = deep_queue_cycles(args.deep, args.deep_cycles)
    growth = ratio(deep["cycle_ms"]["p50"], shallow["cycle_ms"]["p50"])
    cyc = shape["cycle_ms"]
    rows = [
        [
            f"upstream 'baseline' shape ({args.cohorts}x{args.queues} CQs, "
            f"{shape['workloads']:,} workloads)",
            format_number(shape["admissions_per_second"]),
            _ms(cyc["p50"]),
            _ms(cyc["p99"]),
            str(shape["cycles"]),
        ],
        [
            "the same, keeping each workload's API object (as the simulator does)",
            format_number(kept["admissions_per_second"]),
            _ms(kept["cycle_ms"]["p50"]),
            _ms(kept["cycle_ms"]["p99"]),
            str(kept["cycles"]),
        ],
        *[
            [
                f"one ClusterQueue, {d['pending']:,} pending",
                "",
                _ms(d["cycle_ms"]["p50"]),
                _ms(d["cycle_ms"]["p99"]),
                str(d["cycle_ms"]["count"]),
            ]
            for d in (shallow, deep)
        ],
    ]
    return Result(
        name="scheduler-throughput",
        headline=shape["admissions_per_second"],
        unit="admissions/s",
        headline_label="upstream 'baseline' shape, pure core",
        command=BENCHMARKS["scheduler-throughput"].command(args),
        columns=["shape", "admissions/s", "cycle p50", "cycle p99", "cycles"],
        rows=rows,
        targets=[
            Target("admissions per second", shape["admissions_per_second"], ">=", 2000, "/s"),
            Target(
                f"cycle p50 at {args.deep:,} / at {args.shallow:,} pending", growth, "<=", 1.5, "x"
            ),
        ],
        notes=[
            "In-process, the pure core on a virtual clock: workloads arrive at their creation "
            "times and each admitted one finishes after its runtime (upstream's shape: 5 cohorts "
            "x 6 ClusterQueues, nominal 20 cpu, borrowing limit 100; per ClusterQueue 350 small, "
            "100 medium, 50 large). Admissions per second count only time inside the core "
            "(ingest, cycles, finishes); decoding the manifests is done before. The core runs "
            "as the engine runs it, without keeping each workload's API object; the second "
            "row keeps them, as the simulator does for its output.",
            f"Deep queue: each of {args.deep_cycles} cycles admits the head, which then "
            "finishes; cycle p50 compared at two depths.",
        ],
        figures={
            "baseline_shape": shape,
            "baseline_shape_keeping_objects": kept,
            "shallow": shallow,
            "deep": deep,
            "growth": growth,
        },
    )


# -- loop-lag --------------------------------------------------------------------------------


def loop_lag(args: argparse.Namespace) -> Result:
    with BenchServer(args.pending, cpu_quota=str(args.running)) as server:
        server.get_json("/bench/probe/start")
        before = server.get_json("/bench/stats")
        server.get_json(
            f"/bench/arrivals/start?rate={args.arrival_rate}&seconds={args.seconds}"
            f"&high_share=0.02&run_seconds=0.5"
        )
        client = server.loadgen(
            "steady",
            "--rate",
            str(args.request_rate),
            "--seconds",
            str(args.seconds),
        )
        probe = server.get_json("/bench/probe/stop")
        after = server.get_json("/bench/stats")
    lag = probe["lag_ms"]
    eng0, eng1 = before["engine"], after["engine"]
    seconds = args.seconds
    admitted = eng1["admitted"] - eng0["admitted"]
    preempted = eng1["preempted"] - eng0["preempted"]
    req = client["latency_ms"]
    gc_max = max(g["max_ms"] for g in probe["gc"].values())
    rows = [
        [
            "event-loop lag p50 / p99 / max",
            f"{_ms(lag['p50'])} / {_ms(lag['p99'])} / {_ms(lag['max'])}",
        ],
        ["requests (200 and 304)", f"{req['count']:,}, errors {client['errors']}"],
        ["request p50 / p99 / max", f"{_ms(req['p50'])} / {_ms(req['p99'])} / {_ms(req['max'])}"],
        ["requests over 100 ms", str(client["over_100ms"])],
        ["arrivals submitted", f"{after['arrivals']['submitted']:,} in {seconds:g} s"],
        ["admissions / preemptions", f"{admitted:,} / {preempted:,}"],
        ["pending at the end", f"{after['view_entries']:,}"],
        [
            "snapshots published",
            str(after["publisher"]["publishes"] - before["publisher"]["publishes"]),
        ],
        [
            "longest publish step / engine step",
            f"{_ms(after['publisher']['max_step_ms'])} / {_ms(after['engine']['max_step_ms'])}",
        ],
        [
            "longest publish step / engine step in CPU time",
            f"{_ms(after['publisher']['max_step_cpu_ms'])} / {_ms(eng1['max_step_cpu_ms'])}",
        ],
        [
            "longest engine step by kind, wall (CPU)",
            ", ".join(
                f"{k} {_ms(v)} ({_ms(eng1['max_step_cpu_ms_by_kind'].get(k, 0.0))})"
                for k, v in eng1["max_step_ms_by_kind"].items()
            ),
        ],
        [
            "longest GC pass (gen 0/1/2), wall (CPU, objects freed by the costliest)",
            " / ".join(
                f"{_ms(gen['max_ms'])} ({_ms(gen['max_cpu_ms'])}, "
                f"{gen['collected_by_costliest']:,})"
                for gen in (probe["gc"][f"gen{g}"] for g in range(3))
            ),
        ],
        [
            "server CPU / stolen by the hypervisor",
            f"{after['cpu_seconds'] - before['cpu_seconds']:.1f} s / "
            f"{after['steal_seconds'] - before['steal_seconds']:.2f} s",
        ],
    ]
    return Result(
        name="loop-lag",
        headline=lag["p99"],
        unit="ms",
        headline_label=f"event-loop lag p99 at {args.pending:,} pending",
        command=BENCHMARKS["loop-lag"].command(args),
        columns=["figure", "value"],
        rows=rows,
        targets=[
            Target("event-loop lag p99", lag["p99"], "<=", 20, "ms"),
            Target("slowest request", req["max"], "<=", 100, "ms"),
        ],
        notes=[
            f"Server with {args.pending:,} pending in one ClusterQueue (StrictFIFO, "
            f"{args.running} cpu of quota, preemption within the ClusterQueue). Inside the server "
            f"a driver submits {args.arrival_rate} new workloads per second (2% at a higher "
            "priority, which preempt) and finishes admitted ones after 0.5 s. The load "
            f"generator sends {args.request_rate} requests/s (half 100-item pages, half "
            "conditional). Lag: a task sleeping 1 ms, its overshoot sampled all along.",
            f"The longest GC pass in the window was {_ms(gc_max)}.",
        ],
        figures={
            "lag_ms": lag,
            "gc": probe["gc"],
            "client": client,
            "before": before,
            "after": after,
        },
    )


# -- memory ----------------------------------------------------------------------------------


def memory(args: argparse.Namespace) -> Result:
    if getattr(args, "cluster", False):
        return memory_cluster(args, _memory_command(args))
    runs: list[dict[str, Any]] = []
    baselines: dict[str, int] = {}
    plan = [(n, "decode") for n in args.decoded] + [(n, "bulk") for n in args.bulk]
    for n, how in plan:
        if how not in baselines:
            with BenchServer(0, feed=how) as empty:
                baselines[how] = empty.get_json("/bench/stats")["rss_bytes"]
        with BenchServer(n, feed=how) as server:
            time.sleep(1.0)
            stats = server.get_json("/bench/stats")
        per = (stats["rss_bytes"] - baselines[how]) / n if n else 0.0
        core = (stats["rss_after_feed"] - stats["rss_before_feed"]) / n if n else 0.0
        runs.append(
            {
                "pending": n,
                "feed": how,
                "rss_bytes": stats["rss_bytes"],
                "empty_rss_bytes": baselines[how],
                "bytes_per_workload": per,
                "core_bytes_per_workload": core,
                "feed_seconds": stats["feed_seconds"],
            }
        )
    rows = [
        [
            f"{r['pending']:,}",
            "own decoded object each" if r["feed"] == "decode" else "copies of one template",
            f"{r['rss_bytes'] / 2**20:,.0f} MiB",
            f"{r['bytes_per_workload'] / KIB:.2f} KiB",
            f"{r['core_bytes_per_workload'] / KIB:.2f} KiB",
        ]
        for r in runs
    ]
    decoded = [r for r in runs if r["feed"] == "decode"]
    main = max(decoded or runs, key=lambda r: r["pending"])
    targets = [
        Target(
            f"per workload at {r['pending']:,} ({FEED_LABEL[r['feed']]})",
            r["bytes_per_workload"] / KIB,
            "<=",
            2.0,
            "KiB",
        )
        for r in runs
    ]
    return Result(
        name="memory",
        headline=main["bytes_per_workload"] / KIB,
        unit="KiB/workload",
        headline_label=f"RSS per pending workload at {main['pending']:,}, {main['feed']} feed",
        command=_memory_command(args),
        columns=[
            "pending",
            "workloads",
            "server RSS",
            "per workload (total)",
            "of which core + API objects",
        ],
        rows=rows,
        targets=targets,
        notes=[
            "Resident memory of the server process once its snapshot holds the queue, minus "
            "that of the same server with nothing pending, divided by the pending count. "
            "'decoded': every workload decoded from its own manifest (what a real store holds); "
            "'template copies': the fast feed of the latency benchmarks, sharing the API object "
            "and pod specs, so it shows the cost of the core and snapshot structures alone.",
        ],
        figures={"runs": runs},
    )


def _memory_command(args: argparse.Namespace) -> str:
    """The command line with only the flags of the variant that ran."""
    cluster = getattr(args, "cluster", False)
    mine = {"workloads", "qps", "logs"} if cluster else {"decoded", "bulk"}
    bench = BENCHMARKS["memory"]
    sizes = tuple(s for s in bench.sizes if s.flag in mine)
    return Benchmark(bench.name, bench.summary, sizes, switches=bench.switches).command(args)


# -- snapshot ------------------------------------------------------------------------------------


def snapshot(args: argparse.Namespace) -> Result:
    with BenchServer(args.pending) as server:
        trials = server.get_json(f"/bench/snapshot/trials?count={args.trials}", timeout=1800)
    totals = [t["total_ms"] for t in trials]
    steps = [t["max_step_ms"] for t in trials]
    lags = [t["probe_max_lag_ms"] for t in trials]
    gcs = [t["gc_max_ms"] for t in trials]
    captures = [t["capture_ms"] for t in trials]
    step_cpu = [t["max_step_cpu_ms"] for t in trials]
    steal = [t["steal_ms"] for t in trials]
    rows = [
        ["publish, capture to swap", _ms(median(totals)), _ms(max(totals))],
        ["capture (one synchronous step)", _ms(median(captures)), _ms(max(captures))],
        ["longest publish step", _ms(median(steps)), _ms(max(steps))],
        ["longest publish step in CPU time", _ms(median(step_cpu)), _ms(max(step_cpu))],
        ["CPU time stolen by the hypervisor during a trial", _ms(median(steal)), _ms(max(steal))],
        ["longest GC pass during the publish", _ms(median(gcs)), _ms(max(gcs))],
        ["longest loop block seen by a 1 ms probe", _ms(median(lags)), _ms(max(lags))],
    ]
    block = max(*steps, *lags)
    return Result(
        name="snapshot",
        headline=median(totals),
        unit="ms",
        headline_label=f"median publish of a {args.pending:,} ClusterQueue",
        command=BENCHMARKS["snapshot"].command(args),
        columns=["step", f"median of {len(trials)}", "max"],
        rows=rows,
        targets=[
            Target("publish (median)", median(totals), "<=", 50, "ms"),
            Target("longest loop block (max over trials)", block, "<=", 10, "ms"),
        ],
        notes=[
            f"In the benchmark server with {args.pending:,} pending in one ClusterQueue: each "
            "trial submits one new workload and waits for the snapshot that includes it. "
            "The publisher's own timings, plus a task sleeping 1 ms whose overshoot is the "
            "longest time anything (publish, collector, requests) held the loop.",
        ],
        figures={"trials": trials},
    )


# -- the registry ------------------------------------------------------------------------------

_LIST: Sequence[Benchmark] = (
    Benchmark(
        "visibility-latency",
        "p50/p99 of a 100-item page over HTTPS at several queue depths, side by side with "
        "the upstream-equivalent copy-and-sort baseline",
        (
            Size("depths", "1k,10k,100k,1M", "1k,100k", "queue depths (comma list; k, M)", depths),
            Size("requests", 1000, 300, "measured requests per depth, ours"),
            Size("baseline-requests", 60, 20, "measured requests per depth, baseline"),
            Size("max-seconds", 90.0, 15.0, "time limit per depth", float),
        ),
        visibility_latency,
    ),
    Benchmark(
        "visibility-throughput",
        "requests/s one server process sustains for 100-item pages and for 304s",
        (
            Size("depth", 100_000, 10_000, "pending workloads in the queue"),
            Size("seconds", 10.0, 4.0, "duration of each run", float),
            Size("connections", 8, 8, "keep-alive connections of the load generator"),
        ),
        visibility_throughput,
        switches=(
            Switch(
                "access-log",
                "the server at --log-level INFO, writing the access log "
                "(docs/operations.md#the-access-log) to its log file",
            ),
        ),
    ),
    Benchmark(
        "scheduler-throughput",
        "admissions/s of the pure core on upstream's 'baseline' shape, and cycle time at "
        "two queue depths",
        (
            Size("scale", 1.0, 0.2, "share of upstream's 15,000 workloads", float),
            Size("cohorts", 5, 5, "cohorts"),
            Size("queues", 6, 6, "ClusterQueues per cohort"),
            Size("shallow", 1000, 1000, "pending workloads, small queue"),
            Size("deep", 100_000, 100_000, "pending workloads, deep queue"),
            Size("deep-cycles", 2000, 300, "measured cycles per depth"),
        ),
        scheduler_throughput,
    ),
    Benchmark(
        "loop-lag",
        "event-loop lag while the server answers a steady load and the scheduler admits, "
        "preempts and receives new workloads",
        (
            Size("pending", 100_000, 100_000, "pending workloads at the start"),
            Size("seconds", 30.0, 8.0, "duration", float),
            Size("arrival-rate", 1000, 1000, "new workloads per second"),
            Size("request-rate", 200, 200, "requests per second of the load generator"),
            Size("running", 50, 50, "cpu quota of the ClusterQueue (1 cpu per workload)"),
        ),
        loop_lag,
    ),
    Benchmark(
        "memory",
        "resident memory per pending workload in the embedded server; with --cluster, in "
        "cluster mode on a real kube-apiserver beside upstream Kueue's manager",
        (
            Size("decoded", "100k", "10k", "sizes fed from decoded manifests", depths),
            Size("bulk", "100k,1M", "100k", "sizes fed as template copies", depths),
            Size("workloads", "10k,100k", "10k", "--cluster: Workloads in kube-apiserver", depths),
            Size("qps", 200.0, 200.0, "--cluster: both controllers' client QPS (and burst)", float),
            Size("logs", "", "", "--cluster: a folder to keep every process's log in", str),
        ),
        memory,
        switches=(
            Switch(
                "cluster", "cluster mode on a real kube-apiserver (benchmarks/memory_cluster.py)"
            ),
            Switch("no-upstream", "--cluster: our server only, not upstream Kueue's manager"),
        ),
    ),
    Benchmark(
        "snapshot",
        "time to publish a snapshot of a large ClusterQueue and the longest loop block",
        (
            Size("pending", 100_000, 100_000, "pending workloads in the ClusterQueue"),
            Size("trials", 20, 6, "republishes measured"),
        ),
        snapshot,
    ),
    Benchmark(
        "cluster-sync",
        "cluster mode on a real kube-apiserver: writes and time to quiet after a start and "
        "a restart, SIGTERM to exit, admissions/s end to end (also with real Pods on kwok Nodes)",
        (
            Size("workloads", 10_000, 2_000, "Workloads in kube-apiserver before the start"),
            Size("admit", 2_000, 500, "admissions measured end to end"),
            Size("qps", 200.0, 200.0, "the server's client QPS (and burst)", float),
            Size("pod-jobs", 300, 60, "Jobs run with real Pods on kwok Nodes (0: skip)"),
            Size("pod-quota", 20, 10, "CPUs of the pods run's ClusterQueue (1 per Job)"),
            Size("kueue-manager", "", "", "upstream Kueue manager binary for the pods run", str),
        ),
        cluster_sync,
    ),
    Benchmark(
        "forecast-accuracy",
        "start-time forecasts on the KTH-SP2 and wagap-2013 traces: band coverage, p50 "
        "error against the walltime and rate methods, replay time",
        (
            Size("limit", 0, 2000, "jobs per trace, the first submitted (0: all)"),
            Size("traces", "kth-sp2,wagap-2013", "kth-sp2,wagap-2013", "traces", names),
            Size("methods", "forecast,walltime,rate", "forecast,walltime,rate", "methods", names),
            Size("traces-dir", str(TRACES_DIR), str(TRACES_DIR), "the traces folder", str),
        ),
        forecast_accuracy if forecaster_present() else None,
        ""
        if forecaster_present()
        else "needs `queuescope simulate --record-forecasts` (issue 15, the forecaster)",
    ),
)

BENCHMARKS: dict[str, Benchmark] = {b.name: b for b in _LIST}
