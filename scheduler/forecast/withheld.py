"""Offering a deep BestEffortFIFO queue's workloads one that fits at a time, in a forward
run (docs/forecasting.md#cost).

Under BestEffortFIFO every quota release flushes the parked workloads back and the core
tries them one head per cycle, in queue order: those that fit are admitted, the others
parked again. On a queue of mixed sizes, a release that frees a little quota walks the
whole queue to find the few small workloads that fit, so a forward run grows with the
number of releases times the queue's depth.

Where the quota alone decides whether a head is admitted, that walk has one outcome that
can be found without it: the workloads admitted are, in queue order, each one whose
request fits what the ones before it left. So the run withholds those workloads from the
queue (they stay pending, `Scheduler.withhold`) and, before each cycle, queues again the
first one in queue order that fits what is available now; the core's own cycle admits it.
The heads skipped would have failed, and such a failing head changes nothing: it borrows
from no one (no Cohort), every flavor scan of a one-flavor group runs to its end, a
workload's request does not change in the run, and it cannot preempt: under `Never` no
head can; under `LowerPriority` only holders of a lower priority can be its victims, so
a head is worth a cycle only if what is free and what those holders hold together cover
its request, and such a head is offered too, fitting or not; the core's cycle then
preempts for it or parks it. One the core parks (it could not preempt, or a workload
queued the usual way ahead of it took the quota) is parked aside until the next release
(quota freed or a holder gone), as the core parks it. At a release, an offered workload
not tried yet goes back among the withheld ones (one ahead of it may fit now), unless
the queue put it first (it preempted and waits for its victims). So the same workloads
are admitted, and the same holders preempted, at the same instants and in the same order
as the walk would (tested with the shortcut on and off).

Covered: the ClusterQueues `Hopeless` covers, that also are BestEffortFIFO, outside any
Cohort, with one flavor per resource group. Only workloads with no requeue backoff and
in a namespace the queue selects are withheld; the others stay queued as before. Should
an offered workload fail while what is free still covers its request (something other
than quota kept it out), every workload withheld there is queued again and the queue is
run in full from then on.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from scheduler.core.changes import Changes
from scheduler.core.model import ClusterQueueInfo
from scheduler.core.queue.interface import OrderKey
from scheduler.core.queue.ordering import fifo_order_key
from scheduler.core.quota import QuotaTree
from scheduler.core.scheduler import Scheduler
from scheduler.forecast.hopeless import Hopeless, requests_of

# A queue whose workloads ask for more distinct combinations of amounts than this is run
# in full: finding the first that fits looks at every combination.
MAX_SHAPES = 64

Shape = tuple[int, ...]  # amounts of the queue's covered resources, in `_Queue.resources` order


@dataclass(slots=True)
class _Queue:
    """One covered ClusterQueue's withheld workloads, by the amounts they ask."""

    resources: tuple[tuple[str, str], ...]  # (flavor, resource) of each covered resource
    preempts: bool  # preemption within the queue LowerPriority (else Never)
    priority: dict[str, int] = field(default_factory=dict)  # of each withheld workload
    shapes: dict[Shape, list[tuple[OrderKey, str]]] = field(default_factory=dict)  # heaps
    offered: str | None = None  # the workload queued again and not yet admitted
    # offered, tried and not admitted for want of quota: parked until a release, as the
    # core parks them
    parked: list[tuple[Shape, OrderKey, str]] = field(default_factory=list)
    last_free: Shape | None = None
    last_holders: int = 0

    def watch_releases(self, free: Shape, holders: int) -> bool:
        """A release (quota freed or a holder gone) brings the parked ones back, as the
        core's flush does; returns whether there was one."""
        last = self.last_free
        released = last is not None and (
            holders < self.last_holders or any(f > b for f, b in zip(free, last, strict=True))
        )
        if released:
            for shape, order, key in self.parked:
                heapq.heappush(self.shapes.setdefault(shape, []), (order, key))
            self.parked.clear()
        self.last_free, self.last_holders = free, holders
        return released

    def candidate(self, free: Shape, holders: list[tuple[int, Shape]] | None) -> Shape | None:
        """The shape of the next workload the walk over every head would admit, or let
        try to preempt: the first in queue order whose request `free` covers, or, with
        `holders` ((priority, usage) of each, under LowerPriority), that `free` and what
        the holders of a lower priority hold together cover. One of a lower priority in
        the same shape can do no better, so each shape's first is enough to look at."""
        best: tuple[OrderKey, Shape] | None = None
        for shape, heap in self.shapes.items():
            if not heap or (best is not None and heap[0][0] >= best[0]):
                continue
            order, key = heap[0]
            reach = free if holders is None else _plus_below(free, holders, self.priority[key])
            if covers(reach, shape):
                best = (order, shape)
        return None if best is None else best[1]


def _plus_below(free: Shape, holders: list[tuple[int, Shape]], priority: int) -> Shape:
    """What is free plus what the holders of a lower priority than `priority` hold."""
    total = list(free)
    for held_priority, held in holders:
        if held_priority < priority:
            for i, amount in enumerate(held):
                total[i] += amount
    return tuple(total)


def covers(have: Shape, shape: Shape) -> bool:
    return all(a <= h for a, h in zip(shape, have, strict=True))


@dataclass(slots=True)
class Withheld:
    queues: dict[str, _Queue] = field(default_factory=dict)

    @staticmethod
    def of(s: Scheduler, hopeless: Hopeless | None) -> Withheld:
        """Withhold the workloads of every covered ClusterQueue of `s` (see the module)."""
        found = Withheld()
        if hopeless is None:
            return found
        for name, info in s.objects.cluster_queues.items():
            bound = hopeless.bounds.get(name)
            if bound is None or not _eligible(info):
                continue
            queue = _withhold(s, info)
            if queue is not None:
                found.queues[name] = queue
        return found

    def offer(self, s: Scheduler) -> None:
        """Queue again, in each covered ClusterQueue that has none offered, the next
        withheld workload the walk over every head would admit."""
        tree = s.quota
        if not isinstance(tree, QuotaTree):
            return
        for name, queue in self.queues.items():
            free = tuple(tree.available(name, fr) for fr in queue.resources)
            if queue.watch_releases(free, s.holders.count(name)) and queue.offered is not None:
                self._withdraw(s, name, queue.offered)
            if queue.offered is not None or not s.cq_active(name):
                continue
            holders = _holdings(s, name, queue) if queue.preempts else None
            while (shape := queue.candidate(free, holders)) is not None:
                _, key = heapq.heappop(queue.shapes[shape])
                wl = s.workload(key)
                if wl is None or s.queues.locate(key) is not None or wl.holds_quota:
                    continue  # queued again, or admitted, by some other way: not ours now
                s.sync_workload(wl)
                if s.queues.locate(key) is not None:
                    queue.offered = key
                    break

    def observe(self, s: Scheduler, changes: Changes) -> None:
        """Follow a cycle. An offered workload admitted makes room for the next offer.
        One tried and not admitted stays offered while it is the queue's next head (the
        core tries it again at once).
        Otherwise the core parked it: if it still fits what is free, something other than
        quota kept it out and the shortcut ends for its queue; if not (a workload ahead of
        it, queued the usual way, took the quota), it is parked
        aside until a release, as the core parked it."""
        admitted = set(changes.admitted)
        tried = {key for _, key in changes.heads}
        now = s.now()
        for name, queue in list(self.queues.items()):
            offered = queue.offered
            if offered is None or (offered not in tried and offered not in admitted):
                continue
            if offered in admitted:
                queue.offered = None
                continue
            pending = s.queues.queue(name)
            head = pending.peek(now) if pending is not None else None
            if head is not None and head.key == offered:
                continue
            if self._fits_now(s, name, offered):
                self._release(s, name)
            else:
                self._park(s, name, offered)

    def _fits_now(self, s: Scheduler, name: str, key: str) -> bool:
        queue, tree = self.queues[name], s.quota
        wl, info = s.workload(key), s.objects.cluster_queues.get(name)
        if wl is None or info is None or not isinstance(tree, QuotaTree):
            return True  # not ours to reason about any more: run the queue in full
        asked = requests_of(wl, info)
        free = tuple(tree.available(name, fr) for fr in queue.resources)
        return covers(free, tuple(asked[r] for _, r in queue.resources))

    def _withdraw(self, s: Scheduler, name: str, key: str) -> None:
        """After a release, an offered workload not tried yet goes back among the withheld
        ones: one ahead of it in queue order may fit now. Not one the queue put first (it
        preempted and waits for its victims: the core tries it next)."""
        pending, wl = s.queues.queue(name), s.workload(key)
        if pending is None or wl is None or wl.holds_quota:
            return
        entry = pending.get(key)
        if entry is None or key in pending.in_flight_keys():
            return
        if pending.order_key(entry) != fifo_order_key(entry):
            return
        self._park(s, name, key)
        queue = self.queues[name]
        shape, order, parked_key = queue.parked.pop()
        heapq.heappush(queue.shapes.setdefault(shape, []), (order, parked_key))

    def _park(self, s: Scheduler, name: str, key: str) -> None:
        queue = self.queues[name]
        queue.offered = None
        wl = s.workload(key)
        info = s.objects.cluster_queues.get(name)
        if wl is None or info is None:
            return
        entry = s.queue_entry(wl)
        s.withhold(key)
        asked = requests_of(wl, info)
        shape = tuple(asked[r] for _, r in queue.resources)
        queue.parked.append((shape, fifo_order_key(entry), key))

    def _release(self, s: Scheduler, name: str) -> None:
        queue = self.queues.pop(name)
        keys = [key for heap in queue.shapes.values() for _, key in heap]
        keys += [key for _, _, key in queue.parked]
        for key in keys:
            wl = s.workload(key)
            if wl is not None:
                s.sync_workload(wl)


def _holdings(s: Scheduler, name: str, queue: _Queue) -> list[tuple[int, Shape]]:
    """(priority, usage of the queue's resources) of each workload holding its quota."""
    found: list[tuple[int, Shape]] = []
    for key in s.holders.keys(name):
        wl = s.workload(key)
        if wl is not None:
            usage = s.usage_of(wl)
            found.append((wl.priority, tuple(usage.get(fr, 0) for fr in queue.resources)))
    return found


def _eligible(info: ClusterQueueInfo) -> bool:
    return (
        info.strategy == "BestEffortFIFO"
        and not info.cohort
        and all(len(g.flavors) == 1 for g in info.groups)
    )


def _withhold(s: Scheduler, info: ClusterQueueInfo) -> _Queue | None:
    pending = s.queues.queue(info.name)
    if pending is None:
        return None
    resources = tuple((g.flavors[0], r) for g in info.groups for r in g.covered)
    chosen: list[tuple[Shape, OrderKey, str]] = []
    for entry in pending.queued_entries():
        wl = s.workload(entry.key)
        if (
            wl is None
            or wl.requeue_state is not None
            or not s.namespace_matches(info.name, wl.namespace)
        ):
            continue
        asked = requests_of(wl, info)
        shape = tuple(asked[r] for _, r in resources)
        chosen.append((shape, fifo_order_key(entry), wl.key))
    if len({shape for shape, _, _ in chosen}) > MAX_SHAPES:
        return None
    queue = _Queue(resources, info.preemption.within_cluster_queue == "LowerPriority")
    for shape, order, key in chosen:
        queue.shapes.setdefault(shape, []).append((order, key))
        wl = s.workload(key)
        queue.priority[key] = wl.priority if wl is not None else 0
        s.withhold(key)
    for heap in queue.shapes.values():
        heapq.heapify(heap)
    return queue
