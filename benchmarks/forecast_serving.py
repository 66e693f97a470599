"""`python -m benchmarks.forecast_serving [--pending N] [--refreshes K] [--method M]
[--cpu-quota Q] [--strategy S]`: what serving forecasts costs
(docs/forecasting.md#serving, figures in docs/benchmarks.md).

A real engine on the system clock holds N pending workloads in one ClusterQueue (the
`feed` of the other benchmarks: one cpu each, no `maximumExecutionTimeSeconds`) and
publishes as in `serve`; the ClusterQueue is given an admission rate so that the `rate`
method forecasts every workload. With a quota Q > 0 (the default for the forward
methods: 100 cpu) the engine admits Q workloads first, so the `forecast` and
`walltime` methods run the core forward over a queue that really drains: 100 workloads
an hour (the one-hour default runtime), until the 30-day horizon. The forecast service
runs its worker process with a one-second cadence (a refresh starts as soon as the
previous one is done when it takes longer), and the benchmark reports, over K refreshes
after the first: each refresh's time (snapshot taken to last result applied, the first
one sending every chunk), the worker's own time and its CPU time, the longest stretch
the service ran on the loop in wall and CPU time (as the service counts it, and as the
loop's own steps show it: `loop_steps_with_forecasts`, by task, from
:mod:`benchmarks.loop_steps`), the loop lag measured by the servers' `LoopLagMonitor`
every 10 ms meanwhile, and the resident memory of the worker and of the server process.
For comparison, the loop lag is first measured as long without the forecast service.

Not part of `python -m benchmarks all`: run it on its own.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import sys
import time
from collections.abc import Sequence
from typing import Any

from benchmarks.feed import Shape, loaded_scheduler
from benchmarks.loop_steps import LoopSteps
from scheduler.runtime.clock import SystemClock
from scheduler.runtime.commands import MarkSynced
from scheduler.runtime.engine import Engine
from scheduler.runtime.forecast_method import METHODS
from scheduler.runtime.forecasts import ForecastConfig, ForecastService
from scheduler.runtime.heap_freezing import GcPacer
from visibility_server.looplag import LoopLagMonitor


class _Lags(LoopLagMonitor):
    """The servers' loop-lag monitor, keeping every sample for percentiles."""

    def __init__(self) -> None:
        super().__init__(interval=0.01)
        self.samples: list[float] = []

    def record(self, lag: float) -> None:
        super().record(lag)
        self.samples.append(max(0.0, lag))

    def figures(self) -> dict[str, float]:
        ordered = sorted(self.samples) or [0.0]

        def at(q: float) -> float:
            return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)

        return {"p50_ms": at(0.5), "p99_ms": at(0.99), "max_ms": at(1.0), "n": len(ordered)}


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _Collections:
    """The server process's garbage collections while measured: how many and the longest,
    in wall and in CPU time, by generation (a pause of the collector is a pause of the
    loop; the collections run on the loop's thread, so its CPU time is theirs)."""

    def __init__(self) -> None:
        self.longest: dict[int, float] = {}
        self.longest_cpu: dict[int, float] = {}
        self.by_generation: dict[int, int] = {}
        self.count = 0
        self._started = (0.0, 0.0)

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = (time.perf_counter(), time.thread_time())
            return
        generation = info.get("generation", -1)
        elapsed = time.perf_counter() - self._started[0]
        cpu = time.thread_time() - self._started[1]
        self.count += 1
        self.by_generation[generation] = self.by_generation.get(generation, 0) + 1
        self.longest[generation] = max(self.longest.get(generation, 0.0), elapsed)
        self.longest_cpu[generation] = max(self.longest_cpu.get(generation, 0.0), cpu)

    def figures(self) -> dict[str, Any]:
        def ms(by: dict[int, float]) -> dict[str, float]:
            return {str(g): round(s * 1000, 2) for g, s in sorted(by.items())}

        return {
            "count": self.count,
            "count_by_generation": {str(g): n for g, n in sorted(self.by_generation.items())},
            "longest_ms_by_generation": ms(self.longest),
            "longest_cpu_ms_by_generation": ms(self.longest_cpu),
        }


def _process_cpu_seconds(pid: int | None) -> float:
    """User + system CPU of a process (Linux `/proc/PID/stat`), 0 when unknown."""
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime


def _rss_bytes(pid: str = "self") -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


async def measure(
    pending: int, refreshes: int, method: str, shape: Shape, run_seconds: float
) -> dict[str, Any]:
    s = loaded_scheduler(SystemClock(), shape, pending)
    engine = Engine(s, publish_interval=0.2, gc_pacer=GcPacer())
    # Every collection from the engine's start: the load's walk of the queue included.
    whole_run = _Collections()
    gc.callbacks.append(whole_run)
    # 600 admissions over the last ten minutes: a rate for every position.
    now = s.now()
    names = shape.cluster_queues()
    for name in names:
        for i in range(600):
            engine.rates.observe(name, now - (600 - i) * 1_000_000)
    engine.submit(MarkSynced())
    engine_task = asyncio.create_task(engine.run())
    admitted = int(shape.cpu_quota)
    while sum(len(engine.snapshot().views.get(n, ())) for n in names) < pending - admitted:
        await asyncio.sleep(0.1)
    rss_before = _rss_bytes()
    # The loop's lag without forecasts, over as long as the measured refreshes take.
    baseline = _Lags()
    baseline_task = asyncio.create_task(baseline.run())
    cpu_before, wall_before = _cpu_seconds(), time.perf_counter()
    await asyncio.sleep(refreshes + 2.0)
    idle_cpu_share = (_cpu_seconds() - cpu_before) / (time.perf_counter() - wall_before)
    baseline_task.cancel()
    await asyncio.gather(baseline_task, return_exceptions=True)

    config = ForecastConfig(
        method=method, interval=1.0, refresh_timeout=600.0, run_seconds=run_seconds
    )
    service = ForecastService(engine.snapshot, s.now, config)
    lag = _Lags()
    collections = _Collections()
    gc.callbacks.append(collections)
    steps = LoopSteps()
    steps.install()
    cpu_before, wall_before = _cpu_seconds(), time.perf_counter()
    tasks = [asyncio.create_task(service.run()), asyncio.create_task(lag.run())]
    rows: list[dict[str, Any]] = []
    worker_rss = 0
    try:
        seen = 0
        while len(rows) < refreshes + 1:
            await asyncio.sleep(0.05)
            worker_rss = max(worker_rss, service.worker_resident_bytes() or 0)
            if service.stats.refreshes > seen:
                seen = service.stats.refreshes
                worker_cpu = _process_cpu_seconds(service.stats.worker_pid)
                rows.append(
                    {
                        "refresh": seen,
                        "served": service.stats.last_served,
                        "fallback": service.stats.last_fallback,
                        "refresh_s": round(service.stats.last_refresh_seconds, 3),
                        "worker_s": round(service.stats.last_worker_seconds, 3),
                        "worker_cpu_s": round(service.stats.last_worker_cpu_seconds, 3),
                        # the worker process's CPU since it started (all refreshes so far)
                        "worker_cpu_total_s": round(worker_cpu, 2),
                        "chunks_sent": service.stats.chunks_sent,
                        "max_step_ms": round(service.stats.max_step_seconds * 1000, 2),
                        "max_step_cpu_ms": round(service.stats.max_step_cpu_seconds * 1000, 2),
                        "loop_lag_max_ms": round(lag.max_lag * 1000, 2),
                    }
                )
        forecast_cpu_share = (_cpu_seconds() - cpu_before) / (time.perf_counter() - wall_before)
    finally:
        gc.callbacks.remove(collections)
        gc.callbacks.remove(whole_run)
        steps.uninstall()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await engine.stop()
        await asyncio.gather(engine_task, return_exceptions=True)
    return {
        "method": method,
        "cpu_quota": shape.cpu_quota,
        "strategy": shape.strategy,
        "sizes": shape.sizes,
        "preemption": shape.preemption,
        "cohort_queues": shape.cohort_queues,
        "run_seconds": run_seconds,
        "pending": pending,
        "refreshes": rows,
        "loop_lag_without_forecasts": baseline.figures(),
        "loop_lag_with_forecasts": lag.figures(),
        "server_collections_with_forecasts": collections.figures(),
        "server_collections_whole_run": whole_run.figures(),
        # every step the loop ran, by task: the service's is ForecastService.run
        "loop_steps_with_forecasts": steps.figures(),
        # the server process's CPU (its threads, not the worker) per wall second
        "server_cpu_share_without_forecasts": round(idle_cpu_share, 3),
        "server_cpu_share_with_forecasts": round(forecast_cpu_share, 3),
        "worker_rss_mib": round(worker_rss / 2**20, 1),
        "server_rss_mib_before": round(rss_before / 2**20, 1),
        "server_rss_mib_after": round(_rss_bytes() / 2**20, 1),
        "server_max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "engine_max_step_cpu_ms": round(engine.stats.max_step_cpu_seconds * 1000, 2),
        "publish_max_step_cpu_ms": round(engine.publisher.stats.max_step_cpu_seconds * 1000, 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.forecast_serving")
    p.add_argument("--pending", type=int, default=100_000)
    p.add_argument("--refreshes", type=int, default=5)
    p.add_argument("--method", choices=sorted(METHODS), default="rate")
    p.add_argument(
        "--cpu-quota",
        default=None,
        help="the ClusterQueue's cpu quota (default: 0 for rate, 100 for the forward methods)",
    )
    p.add_argument("--strategy", choices=("StrictFIFO", "BestEffortFIFO"), default="StrictFIFO")
    p.add_argument(
        "--sizes",
        choices=("uniform", "mixed"),
        default="uniform",
        help="one cpu each, or 1 to 8 cpu with limits of 1 minute to 2 hours",
    )
    p.add_argument("--preemption", choices=("LowerPriority", "Never"), default="LowerPriority")
    p.add_argument(
        "--cohort-queues",
        type=int,
        default=1,
        help="that many ClusterQueues in one Cohort, sharing the cpu quota evenly",
    )
    p.add_argument(
        "--run-seconds",
        type=float,
        default=ForecastConfig().run_seconds,
        help="the forward run's budget (ForecastConfig.run_seconds)",
    )
    args = p.parse_args(argv)
    quota = (
        args.cpu_quota if args.cpu_quota is not None else ("0" if args.method == "rate" else "100")
    )
    started = time.perf_counter()
    shape = Shape(
        namespaces=10,
        cpu_quota=quota,
        strategy=args.strategy,
        sizes=args.sizes,
        preemption=args.preemption,
        cohort_queues=args.cohort_queues,
    )
    result = asyncio.run(
        measure(args.pending, args.refreshes, args.method, shape, args.run_seconds)
    )
    result["seconds"] = round(time.perf_counter() - started, 1)
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
