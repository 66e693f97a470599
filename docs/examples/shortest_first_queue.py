"""Example queue plugin: shortest wait first (newest first within a priority).

The built-in queues serve equal-priority workloads oldest first (docs/scheduling.md#queue-order).
This plugin serves them newest first (LIFO), e.g. for interactive work where a fresh submission
is more likely to still be wanted than one that has waited for hours. Everything
else is inherited from :class:`FifoQueue`: the sticky preemptor still goes first,
priority still dominates, and the requeue, backoff and flush rules are those of the
ClusterQueue's ``queueingStrategy`` (StrictFIFO or BestEffortFIFO).

Configure it per ClusterQueue with an annotation naming the class (a PendingQueue
subclass is itself a queue factory)::

    apiVersion: kueue.x-k8s.io/v1beta1
    kind: ClusterQueue
    metadata:
      name: interactive
      annotations:
        queuescope.io/queue-plugin: "shortest_first_queue:ShortestWaitFirstQueue"
    spec:
      queueingStrategy: BestEffortFIFO
      ...

with this file's directory on ``PYTHONPATH``; or package it and declare an entry
point, then use the entry point's name in the annotation::

    [project.entry-points."queuescope.queues"]
    ShortestWaitFirst = "shortest_first_queue:ShortestWaitFirstQueue"

An unresolvable name is reported as a configuration error, not a crash.
"""

from __future__ import annotations

from scheduler.core.queue.fifo import FifoQueue
from scheduler.core.queue.interface import OrderKey, QueueEntry


class ShortestWaitFirstQueue(FifoQueue):
    """FifoQueue with the timestamp comparison reversed."""

    def order_key(self, entry: QueueEntry) -> OrderKey:
        # Same shape as the built-in key (sticky, priority, time, uid, key) so the
        # order stays total and deterministic; only the time is negated.
        sticky = entry.key == self.sticky_key
        return (not sticky, -entry.priority, -entry.timestamp, entry.uid, entry.key)
