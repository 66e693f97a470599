"""The engine's fingerprint of the state a cycle sees: its layout, and that the collector
stops tracking it at once (docs/benchmarks.md, "What the full collections walked")."""

from __future__ import annotations

import gc

from scheduler.core.cycle import run_cycle
from scheduler.core.scheduler import Scheduler
from scheduler.runtime.cycle_fingerprint import cycle_fingerprint
from tests.unit.runtime.support import cluster, one_queue, real_scheduler, workload


def _walked_once() -> tuple[Scheduler, list[tuple[str, str]]]:
    """A BestEffortFIFO queue of 2 cpu whose head (4 cpu) does not fit, after one cycle."""
    s = real_scheduler()
    cluster(
        s,
        *one_queue("2"),
        workload("team", "big", "main", "4", creation="2026-01-01T00:00:00Z"),
        workload("team", "small", "main", "4", creation="2026-01-01T00:00:01Z"),
    )
    s.follow_changes()
    s.take_changes()
    assert run_cycle(s).admitted == []
    return s, list(s.take_changes().heads)


def test_the_layout_names_every_queue_and_head() -> None:
    s, heads = _walked_once()
    assert heads == [("cq", "team/big")]
    last = s.workload("team/big")
    assert last is not None and last.last_assignment is not None
    tried = sorted(last.last_assignment.tried_flavor_idx.items())
    expected: list[str | int | None] = [1, "cq", 1, 1, 0, "team/big", len(tried)]
    for (index, resource), flavor_index in tried:
        expected += (index, resource, flavor_index)
    assert cycle_fingerprint(s, heads) == tuple(expected)
    # A head never tried, and a cycle with no heads.
    assert cycle_fingerprint(s, [("cq", "team/small")]) == (1, "cq", 1, 1, 0, "team/small", None)
    assert cycle_fingerprint(s, []) == (1, "cq", 1, 1, 0)


def test_the_same_state_gives_equal_fingerprints_and_a_change_another() -> None:
    s, heads = _walked_once()
    first = cycle_fingerprint(s, heads)
    assert cycle_fingerprint(s, heads) == first
    run_cycle(s)  # parks the second head too
    assert cycle_fingerprint(s, heads) != first


def test_one_young_pass_leaves_a_fingerprint_untracked() -> None:
    """A walk keeps one fingerprint per cycle alive; tracked, they would reach the
    oldest generation and be walked by every full pass."""
    s, heads = _walked_once()
    fingerprint = cycle_fingerprint(s, heads)
    assert gc.is_tracked(fingerprint)  # every new tuple is, until a pass looks at it
    gc.collect(0)
    assert not gc.is_tracked(fingerprint)
