"""The flush of a deep BestEffortFIFO queue, in the core alone (docs/benchmarks.md, "The
flush of a deep BestEffortFIFO queue").

    python -m benchmarks.queue_flush [--pending N] [--flushes K] [--walk C]

One ClusterQueue of the `feed` benchmarks (mixed sizes, 100 cpu, preemption `Never`) with
N pending workloads, on a manual clock. Cycles run until every workload that does not
fit is parked; then, K times, one admitted workload finishes, which releases quota and
flushes the queue, and the cycles park everything again (or, with --walk, run C cycles
before the first flush and between two). It prints each flush's CPU and
wall time, the CPU of the first drain into the parked set, and the process's peak RSS.
Run it from two checkouts one after the other to compare code.
"""

from __future__ import annotations

import argparse
import resource
import time
from collections.abc import Sequence

from benchmarks.feed import CLUSTER_QUEUE, Shape, loaded_scheduler
from scheduler.core.clock import ManualClock
from scheduler.core.cycle import run_cycle
from scheduler.core.scheduler import Scheduler

START = 1_767_225_600 * 1_000_000  # 2026-01-01, in microseconds


def _drain(s: Scheduler, cycles: int | None = None) -> None:
    """Run cycles until the queue's heap is empty (every head admitted or parked), or
    `cycles` of them."""
    queue = s.queues.queue(CLUSTER_QUEUE)
    ran = 0
    while queue is not None and queue.counts().active and (cycles is None or ran < cycles):
        run_cycle(s)
        ran += 1


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.queue_flush", description=__doc__)
    p.add_argument("--pending", type=int, default=100_000)
    p.add_argument("--flushes", type=int, default=3)
    p.add_argument(
        "--walk",
        type=int,
        default=None,
        help="flush after this many cycles instead of once everything is parked, so the "
        "heap and the parked set are both large (a release in the middle of a walk)",
    )
    args = p.parse_args(argv)
    shape = Shape(
        namespaces=10, cpu_quota="100", strategy="BestEffortFIFO", sizes="mixed", preemption="Never"
    )
    s = loaded_scheduler(ManualClock(START), shape, args.pending)
    cpu = time.thread_time()
    _drain(s, args.walk)
    drain_cpu = time.thread_time() - cpu
    queue = s.queues.queue(CLUSTER_QUEUE)
    assert queue is not None
    print(f"parked: {queue.counts().parked}; first drain {drain_cpu:.2f} s CPU")
    for holder in s.holders.all_keys()[: args.flushes]:
        wall, cpu = time.perf_counter(), time.thread_time()
        s.finish(holder)
        cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
        print(f"flush: {cpu * 1000:.1f} ms CPU, {wall * 1000:.1f} ms wall, {queue.counts()}")
        _drain(s, args.walk)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {rss:.0f} MiB")


if __name__ == "__main__":
    main()
