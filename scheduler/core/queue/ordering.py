"""The docs/scheduling.md#queue-order queue order, shared by StrictFIFO and BestEffortFIFO, as a
sort key.

A key (rather than a comparator) lets the queue keep workloads in sorted containers
and lets visibility compare positions with the same order the queue pops in.
"""

from __future__ import annotations

from scheduler.core.queue.interface import OrderKey, QueueEntry


def fifo_order_key(entry: QueueEntry, *, sticky: bool = False) -> OrderKey:
    """Smaller sorts first.

    1. the sticky workload (``False`` < ``True``, hence ``not sticky``);
    2. higher priority (negated);
    3. earlier queue-order timestamp (docs/scheduling.md#queue-order-timestamp);
    4. smaller uid, then smaller ``namespace/name`` (D1), so the order is total.
    """
    return (not sticky, -entry.priority, entry.timestamp, entry.uid, entry.key)
