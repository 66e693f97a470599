"""What the forecast worker is fed, captured from the core on the loop
(docs/forecasting.md#what-the-worker-is-fed).

Three kinds of facts, all immutable once made, so a published snapshot can hold them
and the forecast service can send them as they are:

- :class:`WorkloadFacts` of every pending workload, made with its snapshot entry (and
  rebuilt with it, see :func:`facts_are_current`);
- :class:`RunningWorkload` of every quota holder, cached per workload and rebuilt only
  when its admission record or reservation instant changes (:class:`RunningCapture`);
- :class:`FinishedWorkload` for each holder that left the holders because it finished:
  the runtime it held quota for, which the runtime predictors learn from.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

from scheduler.core.state_view import ClusterStateView
from scheduler.core.workload import PODS_READY, QUOTA_RESERVED, WorkloadState
from scheduler.forecast.predictors import USER_LABEL
from scheduler.runtime.estimates import MICROS
from scheduler.runtime.workload_records import FinishedWorkload, RunningWorkload, WorkloadFacts

FINISHED_KEPT: Final = 1000  # finishes a snapshot carries (the service sends the new ones)
_SLICE: Final = 512  # holders read per step of a capture


def workload_facts(wl: WorkloadState, eviction_ordering: bool) -> WorkloadFacts:
    rs = wl.requeue_state
    return WorkloadFacts(
        uid=wl.uid,
        local_queue=wl.queue_name,
        priority=wl.priority,
        order_timestamp=wl.queue_order_timestamp(eviction_ordering),
        pod_sets=wl.pod_sets,
        maximum_execution_time_seconds=wl.maximum_execution_time_seconds,
        accumulated_execution_seconds=wl.accumulated_execution_seconds,
        user=wl.labels.get(USER_LABEL, ""),
        requeue_count=rs.count if rs is not None else None,
        requeue_at=rs.requeue_at if rs is not None else None,
    )


def facts_are_current(
    facts: WorkloadFacts | None, wl: WorkloadState, eviction_ordering: bool
) -> bool:
    """Whether `facts` still describe `wl` (identity checks, then a few numbers)."""
    if facts is None:
        return False
    rs = wl.requeue_state
    return (
        facts.pod_sets is wl.pod_sets
        and facts.order_timestamp == wl.queue_order_timestamp(eviction_ordering)
        and facts.uid == wl.uid
        and facts.priority == wl.priority
        and facts.local_queue == wl.queue_name
        and facts.maximum_execution_time_seconds == wl.maximum_execution_time_seconds
        and facts.accumulated_execution_seconds == wl.accumulated_execution_seconds
        and facts.requeue_at == (rs.requeue_at if rs is not None else None)
        and facts.user == wl.labels.get(USER_LABEL, "")
    )


@dataclass(slots=True)
class RunningCapture:
    """The quota holders as :class:`RunningWorkload` tuples, and the finishes seen
    between two captures. Kept by the publisher between publishes."""

    _cache: dict[str, tuple[object, int, bool, RunningWorkload]] = field(default_factory=dict)
    _last: tuple[RunningWorkload, ...] = ()
    _finished: deque[FinishedWorkload] = field(default_factory=lambda: deque(maxlen=FINISHED_KEPT))
    _finished_view: tuple[FinishedWorkload, ...] = ()
    _seq: int = 0
    _epochs: tuple[tuple[str, int], ...] | None = None

    def unchanged(self, s: ClusterStateView) -> bool:
        """Whether the holders are as at the last capture, in O(#ClusterQueues): the core
        moves a ClusterQueue's holder epoch whenever its set of holders, or a holder's
        admission, changes. Whether pods are ready does not move it, so with
        waitForPodsReady on (where a forecast reads it) every publish captures."""
        names = sorted(
            s.objects.cluster_queues.keys() | s.objects.terminating
        )  # holders may outlive a CQ
        epochs = tuple((cq, s.holders.epoch(cq)) for cq in names)
        same = epochs == self._epochs and not s.config.wait_for_pods_ready.enable
        self._epochs = epochs
        return same

    def steps(self, s: ClusterStateView, keys: list[str]) -> Iterator[None]:
        """Capture the holders `keys` (taken in the publish's synchronous capture step),
        yielding every few hundred so the caller can give the loop a turn. The result
        is :attr:`running` and :attr:`finished`."""
        ordering = s.config.eviction_ordering
        workloads = s.objects.workloads
        cache = self._cache
        out: list[RunningWorkload] = []
        seen: set[str] = set()
        for i, key in enumerate(keys):
            if i and i % _SLICE == 0:
                yield
            wl = workloads.get(key)
            if wl is None or wl.admission is None:
                continue
            reserved = wl.conditions.get(QUOTA_RESERVED)
            at = reserved.last_transition if reserved is not None else s.now()
            ready = wl.conditions.is_true(PODS_READY)
            cached = cache.get(key)
            if (
                cached is not None
                and cached[0] is wl.admission
                and cached[1] == at
                and cached[2] == ready
                and facts_are_current(cached[3].facts, wl, ordering)
            ):
                out.append(cached[3])
                seen.add(key)
                continue
            running = RunningWorkload(
                wl.namespace, wl.name, wl.admission, at, ready, workload_facts(wl, ordering)
            )
            cache[key] = (wl.admission, at, ready, running)
            out.append(running)
            seen.add(key)
        now = s.now()
        for key in [k for k in cache if k not in seen]:
            _, at, _, running = cache.pop(key)
            wl = workloads.get(key)
            if wl is not None and wl.finished:
                self._seq += 1
                self._finished.append(
                    FinishedWorkload(
                        self._seq,
                        running.namespace,
                        running.name,
                        max(0.0, (now - at) / MICROS),
                        running.facts,
                    )
                )
                self._finished_view = ()
        if len(out) != len(self._last) or any(
            a is not b for a, b in zip(out, self._last, strict=True)
        ):
            self._last = tuple(out)

    @property
    def running(self) -> tuple[RunningWorkload, ...]:
        """The last capture's holders: the same tuple object while nothing changed."""
        return self._last

    @property
    def finished(self) -> tuple[FinishedWorkload, ...]:
        """The last FINISHED_KEPT finishes, oldest first: the same tuple while none came."""
        if not self._finished_view and self._finished:
            self._finished_view = tuple(self._finished)
        return self._finished_view
