"""The snapshot publisher while the engine walks a deep queue (docs/benchmarks.md,
"The publisher's capture while the engine walks a BestEffortFIFO queue").

    python -m benchmarks.publisher_walk [--pending N] [--strategy S] [--sizes Z]
                                        [--seconds T]

One ClusterQueue with N pending workloads of the `feed` benchmarks and a quota of 100
cpu, preemption `Never`, is loaded into the core; then the engine runs on the real
clock with the publisher publishing every 0.2 s. Under BestEffortFIFO each cycle
examines the next head and parks it with a new pending message, so tens of thousands
of workloads change between two publishes; under StrictFIFO the blocked head stops
the cycles. Every 2 s and for the whole run it prints the publisher's longest
synchronous stretch and its longest capture (CPU and wall), the publishes, the
publisher's CPU, the touched keys checked ahead of the capture and inside it, and the
engine's longest stretch. No HTTP server: the loop holds the engine and the publisher.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence

from benchmarks.feed import Shape, loaded_scheduler
from scheduler.core.scheduler import Scheduler
from scheduler.runtime.clock import SystemClock
from scheduler.runtime.commands import MarkSynced
from scheduler.runtime.engine import Engine
from scheduler.runtime.heap_freezing import GcPacer

WINDOW = 2.0  # seconds between two printed lines


def _loaded(pending: int, strategy: str, sizes: str) -> Scheduler:
    shape = Shape(cpu_quota="100", strategy=strategy, sizes=sizes, preemption="Never")
    return loaded_scheduler(SystemClock(), shape, pending)


async def _run(pending: int, strategy: str, sizes: str, seconds: float) -> None:
    engine = Engine(_loaded(pending, strategy, sizes), publish_interval=0.2, gc_pacer=GcPacer())
    engine.submit(MarkSynced())
    task = asyncio.create_task(engine.run())
    started, cpu_started = time.perf_counter(), time.process_time()
    ps, es = engine.publisher.stats, engine.stats
    run: dict[str, float] = {}  # the longest of each kind over the run, in seconds
    try:
        while time.perf_counter() - started < seconds:
            await asyncio.sleep(WINDOW)
            window = {
                "step": ps.max_step_cpu_seconds,
                "step wall": ps.max_step_seconds,
                "capture": ps.max_capture_cpu_seconds,
                "capture wall": ps.max_capture_seconds,
                "engine": es.max_step_cpu_seconds,
            }
            for kind, spent in window.items():
                run[kind] = max(run.get(kind, 0.0), spent)
            print(
                f"{time.perf_counter() - started:5.1f} s  publisher step "
                f"{_ms(window['step'])} CPU ({_ms(window['step wall'])} wall), capture "
                f"{_ms(window['capture'])} CPU ({_ms(window['capture wall'])} wall), "
                f"publishes {ps.publishes}, engine step {_ms(window['engine'])} CPU, "
                f"cycles {es.cycles}",
                flush=True,
            )
            ps.reset_maxima()
            es.reset_maxima()
    finally:
        task.cancel()
    print(
        f"run: {pending} {strategy} {sizes}, {time.perf_counter() - started:.1f} s wall, "
        f"process CPU {time.process_time() - cpu_started:.1f} s; publisher CPU "
        f"{ps.cpu_seconds:.2f} s in {ps.publishes} publishes; longest publisher step "
        f"{_ms(run['step'])} CPU ({_ms(run['step wall'])} wall); longest capture "
        f"{_ms(run['capture'])} CPU ({_ms(run['capture wall'])} wall); touched keys checked "
        f"ahead {ps.checked_ahead}, in captures {ps.checked_in_capture}; longest engine "
        f"step {_ms(run['engine'])} CPU; cycles {es.cycles}",
        flush=True,
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.publisher_walk", description=__doc__)
    p.add_argument("--pending", type=int, default=100_000)
    p.add_argument("--strategy", default="BestEffortFIFO")
    p.add_argument("--sizes", default="mixed", choices=["uniform", "mixed"])
    p.add_argument("--seconds", type=float, default=16.0)
    args = p.parse_args(argv)
    asyncio.run(_run(args.pending, args.strategy, args.sizes, args.seconds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
