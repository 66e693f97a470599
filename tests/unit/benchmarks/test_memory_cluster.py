"""The pieces of `memory --cluster` that need no control plane: /proc reading and
the growth per added Workload."""

from __future__ import annotations

import os

from benchmarks.memory_cluster import Side, _growth, proc_memory


def test_proc_memory_reads_this_process() -> None:
    rss, peak = proc_memory(os.getpid())
    assert 0 < rss <= peak
    with open(f"/proc/{os.getpid()}/statm") as statm:
        pages = int(statm.read().split()[1])
    # The same figure as statm's resident pages, give or take what ran in between.
    assert abs(rss - pages * os.sysconf("SC_PAGE_SIZE")) < 16 * 2**20


def _side(side: str, n: int, rss: int) -> Side:
    return Side(side, n, rss, rss, 1.0, 1.0, 0, quiet=True)


def test_growth_is_per_added_workload_of_one_side() -> None:
    runs = [
        _side("queuescope", 100_000, 400 * 2**20),
        _side("queuescope", 10_000, 130 * 2**20),
        _side("Kueue", 10_000, 100 * 2**20),
    ]
    assert _growth(runs, "queuescope") == (270 * 2**20) / 90_000
    assert _growth(runs, "Kueue") is None  # one size only
    assert runs[0].per_workload == 400 * 2**20 / 100_000
