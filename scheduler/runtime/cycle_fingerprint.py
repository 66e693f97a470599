"""What decides whether another unproductive scheduling cycle can do something different.

The engine runs cycles while they make progress (docs/scheduling.md#cycle-steps): after a
cycle that admitted nothing it runs another only if the state a cycle sees has not come
round again (`scheduler/runtime/repeat_detector.py`). It used to remember the fingerprint
of every state tried until something was admitted; walking a deep BestEffortFIFO queue
whose heads do not fit, every cycle parks one head, so that set held one fingerprint per
cycle: 100,000 of them at 100,000 pending, alive for the whole walk. It now keeps one.

A fingerprint is also one flat tuple of strings, integers and None. The collector stops
tracking a tuple of untracked items the first time a young pass finds it alive, and
then no pass of any generation walks it again. A nested tuple loses its tracking one
level per pass (a pass reaches the inner tuples after the outer one), so the outer
levels reached the oldest generation: with records and nested tuples, about five tracked
objects per cycle were most of what each full pass walked, 180 to 380 ms of the loop at
100,000 pending (docs/benchmarks.md, "What the full collections walked").
"""

from __future__ import annotations

from scheduler.core.scheduler import Scheduler

Fingerprint = tuple[str | int | None, ...]


def cycle_fingerprint(s: Scheduler, heads: list[tuple[str, str]]) -> Fingerprint:
    """Every queue's sizes and the flavor scan position of the cycle's heads
    (docs/scheduling.md#flavor-scan-resumption), O(#ClusterQueues + #heads).

    Laid out so that two fingerprints are equal exactly when those facts are: the number
    of queues, then (name, active, parked, in flight) per queue; then per head its key
    and either None (no flavor assignment tried) or the number of flavors tried
    followed by (pod set index, resource, flavor index) for each, in order.
    """
    parts: list[str | int | None] = []
    queues = []
    for name in s.queues.cluster_queues():
        queue = s.queues.queue(name)
        if queue is not None:
            queues.append((name, queue.counts()))
    parts.append(len(queues))
    for name, counts in queues:
        parts += (name, counts.active, counts.parked, counts.in_flight)
    for _, key in heads:
        parts.append(key)
        wl = s.workload(key)
        last = wl.last_assignment if wl is not None else None
        if last is None:
            parts.append(None)
            continue
        parts.append(len(last.tried_flavor_idx))
        for (index, resource), flavor in sorted(last.tried_flavor_idx.items()):
            parts += (index, resource, flavor)
    return tuple(parts)
