"""The walk over the BestEffortFIFO queues of a Cohort's tree, counted instead of run,
in a forward run (docs/forecasting.md#cost).

After a quota release the core flushes every parked workload of the tree back and each
ClusterQueue offers one head per cycle, in queue order. A head the quota cannot take is
parked; one that fits is admitted, unless another queue's head admitted in the same
cycle took the quota first (it is then tried again next cycle). Through a deep queue of
mixed sizes that walk costs a cycle per head at every release. Unlike a queue alone
(`withheld.py`), the queues of a tree share quota, so *when* each queue reaches the
workload that fits decides which one gets the quota: the walk's cycles must be counted,
not skipped.

They are counted. The run withholds every pending workload of the tree (they stay
pending, `Scheduler.withhold`) and keeps, per ClusterQueue, where its walk stands since
the last release (the workloads before that point are parked). Before a cycle, each
queue's distance to its next workload that fits what is available now is found from
its workloads grouped by the amounts they ask; the smallest distance `k` is how many
cycles pass in which every head fails, with no effect on anything (the quota does not
change in them). So every queue's walk moves on `k` heads at once; the queues whose
next fitting workload is then their head offer it (it is queued again) and the others'
heads of that cycle fail (one more step). The core's own cycle then admits or skips the
workloads offered, as the walk's cycle would. A skipped one stays the queue's head.

Covered: trees of more than one ClusterQueue where every queue with workloads is
BestEffortFIFO with one flavor per resource group, preemption `Never` or `LowerPriority`
within the queue (and, from `Hopeless`, no reclaim or preemption while borrowing, no fair
sharing), and whose pending workloads are all in a namespace their queue selects, with
no requeue backoff, asking at most `MAX_SHAPES` combinations of amounts. Under
`LowerPriority` the count runs only while no workload of the queue outranks the queue's
lowest-priority holder: then no head has a victim and each fails or fits as under
`Never`. Should anything else appear in a queue of the tree (a workload requeued by an
eviction, for example), a workload offered not be admitted while the quota covers it, or
a head gain a victim, the workloads not yet parked are queued again and the tree is run
in full until the next release; the parked ones follow at that release, as the core's
flush would bring them, and the count starts again there if it may.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sortedcontainers import SortedList

from scheduler.core.changes import Changes
from scheduler.core.queue.interface import OrderKey
from scheduler.core.queue.ordering import fifo_order_key
from scheduler.core.quota import QuotaTree
from scheduler.core.scheduler import Scheduler
from scheduler.core.what_if import CycleProbe
from scheduler.forecast.hopeless import Hopeless, requests_of
from scheduler.forecast.withheld import MAX_SHAPES, Shape, covers

Item = tuple[OrderKey, str]  # a withheld workload: its place in queue order, its key


@dataclass(slots=True)
class _Walk:
    """One ClusterQueue's withheld workloads and where its walk stands."""

    resources: tuple[tuple[str, str], ...]  # (flavor, resource) of each covered resource
    items: SortedList[Item] = field(default_factory=SortedList)
    shapes: dict[Shape, SortedList[Item]] = field(default_factory=dict)
    shape_of: dict[str, Shape] = field(default_factory=dict)
    start: int = 0  # items before this index are parked until the next release
    offered: Item | None = None  # queued again, the walk's head (items[start])

    def add(self, item: Item, shape: Shape) -> None:
        self.items.add(item)
        self.shapes.setdefault(shape, SortedList()).add(item)
        self.shape_of[item[1]] = shape

    def remove(self, item: Item) -> None:
        self.items.remove(item)
        self.shapes[self.shape_of.pop(item[1])].remove(item)

    def distance(self, free: Shape) -> int | None:
        """How many heads fail before the next one `free` covers; None if none does."""
        if self.start >= len(self.items):
            return None
        first = self.items[self.start]
        best: Item | None = None
        for shape, items in self.shapes.items():
            if not covers(free, shape):
                continue
            i = items.bisect_left(first)
            if i < len(items) and (best is None or items[i] < best):
                best = items[i]
        return None if best is None else self.items.bisect_left(best) - self.start

    def clear_distance(self, split: OrderKey, blocks: Callable[[Item], bool]) -> int:
        """How many heads from where the walk stands each keep the skipped head whose
        queue order starts with `split` out of a cycle by themselves (`blocks`); the
        walk's end if all do. `blocks` is asked once per run of alike heads: the same
        amounts, the same priority, and the same side of `split` (which decides their
        order in the cycle when their borrowing and priority are the skipped head's)."""
        if self.start >= len(self.items):
            return 0
        first = self.items[self.start]
        best: Item | None = None
        for items in self.shapes.values():
            i = items.bisect_left(first)
            while i < len(items) and (best is None or items[i] < best):
                item = items[i]
                if not blocks(item):
                    best = item
                    break
                i = items.bisect_left(_run_end(item[0], split))
        end = len(self.items) if best is None else self.items.bisect_left(best)
        return end - self.start

    def step(self, heads: int) -> None:
        """`heads` heads fail and are parked."""
        self.start = min(len(self.items), self.start + heads)


WAITING, ACTIVE, ABANDONED, DONE = "waiting", "active", "abandoned", "done"


@dataclass(slots=True)
class _Tree:
    members: tuple[str, ...]  # every ClusterQueue of the tree
    preempting: frozenset[str]  # the members with LowerPriority within the queue
    last_holders: int  # quota holders in the tree after the last cycle
    walks: dict[str, _Walk] = field(default_factory=dict)  # each queue with workloads
    state: str = WAITING  # for a release that lets it count; then ACTIVE, ABANDONED or DONE
    recount: bool = False  # abandoned for a victim alone: WAITING again at the next release
    advanced: bool = False  # the walks were moved on for the coming cycle
    # No flavor of the tree refuses a workload by node labels or taints, and no workload
    # breaks a resource rule: the amounts and priority of a head decide what it does.
    plain: bool = False
    memo: dict[tuple[object, ...], bool] = field(default_factory=dict)  # see `_blocker`
    probe: CycleProbe | None = None  # the dry runs on the quota as it is now

    def forget(self) -> None:
        """The quota changed: what the dry runs said no longer holds."""
        self.memo.clear()
        self.probe = None

    def admitted_beside(self, s: Scheduler, key: str, rivals: list[str]) -> bool:
        if self.probe is None:
            self.probe = CycleProbe(s)
        return self.probe.admitted_beside(key, rivals)


@dataclass(slots=True)
class CohortWalk:
    trees: list[_Tree] = field(default_factory=list)

    @staticmethod
    def of(s: Scheduler, hopeless: Hopeless | None) -> CohortWalk:
        """The trees of `s` whose walks may be counted: the counting starts at each
        one's first release (see the module)."""
        found = CohortWalk()
        if hopeless is None or not isinstance(s.quota, QuotaTree):
            return found
        seen: set[str] = set()
        for name, info in sorted(s.objects.cluster_queues.items()):
            if name in seen or not info.cohort:
                continue
            members = tuple(sorted(s.tree_scope(name)))
            seen.update(members)
            if all(_eligible(s, hopeless, m) for m in members):
                preempting = frozenset(m for m in members if hopeless.bounds[m].preempts)
                found.trees.append(_Tree(members, preempting, _holders(s, members)))
        return found

    def offer(self, s: Scheduler) -> None:
        """Move every counted tree's walk on to its next cycle that can admit, and
        queue the heads of that cycle that fit."""
        quota = s.quota
        if not isinstance(quota, QuotaTree):
            return
        for tree in self.trees:
            holders = _holders(s, tree.members)
            if holders < tree.last_holders:
                _release(s, tree)
            tree.last_holders = holders
            if tree.state != ACTIVE or tree.advanced:
                continue
            if not _only_offered_queued(s, tree):
                abandon(s, tree)
                continue
            if _has_victims(s, tree):
                tree.recount = True
                abandon(s, tree)
                continue
            free = {
                name: tuple(quota.available(name, fr) for fr in walk.resources)
                for name, walk in tree.walks.items()
                if s.cq_active(name)
            }
            _advance(s, tree, free)
            tree.advanced = True

    def observe(self, s: Scheduler, changes: Changes) -> None:
        """Follow a cycle: an offered workload admitted leaves its walk; one skipped
        stays offered (it is its queue's head again); one the core parked is parked
        here until the next release, unless the quota covers it (something else kept
        it out: the tree is then run in full)."""
        admitted = set(changes.admitted)
        now = s.now()
        for tree in self.trees:
            tree.advanced = False
            if admitted:
                tree.forget()
            if tree.state == ACTIVE:
                _follow(s, tree, admitted, now)
            tree.last_holders = _holders(s, tree.members)


def _follow(s: Scheduler, tree: _Tree, admitted: set[str], now: int) -> None:
    for name, walk in tree.walks.items():
        offered = walk.offered
        if offered is None:
            continue
        if offered[1] in admitted:
            walk.remove(offered)
            walk.offered = None
            continue
        pending = s.queues.queue(name)
        head = pending.peek(now) if pending is not None else None
        if head is not None and head.key == offered[1]:
            continue  # skipped: tried again next cycle
        if _fits_now(s, name, walk, offered):
            abandon(s, tree)
            return
        s.withhold(offered[1])
        walk.offered = None
        walk.step(1)


def _release(s: Scheduler, tree: _Tree) -> None:
    """Quota was given back in the tree: the core flushed every parked workload of it
    back into its queue, and every walk starts again from its queue's first one."""
    tree.advanced = False
    tree.forget()
    if tree.state == ABANDONED:
        for walk in tree.walks.values():
            _queue(s, [key for _, key in walk.items[: walk.start]])
        tree.walks.clear()
        tree.state = WAITING if tree.recount else DONE
        tree.recount = False
    if tree.state == WAITING:
        if _preemptor_first(s, tree.members) or _head_has_victims(s, tree):
            return  # perhaps at the next release; nothing built meanwhile
        walks = _walks_of(s, tree.members)
        if walks is None:
            tree.state = DONE
            return
        tree.walks = walks
        tree.state = ACTIVE
        tree.plain = _plain(s, tree)
        for walk in tree.walks.values():
            for _, key in walk.items:
                s.withhold(key)
    elif tree.state == ACTIVE:
        for walk in tree.walks.values():
            if walk.offered is not None:
                s.withhold(walk.offered[1])  # not tried yet: back in queue order
                walk.offered = None
            walk.start = 0


def _has_victims(s: Scheduler, tree: _Tree) -> bool:
    """Whether a workload of a LowerPriority queue of the tree outranks the queue's
    lowest-priority holder: it may preempt, which the count does not model. Withheld
    workloads count too (the parked ones come back at the next release)."""
    for name in tree.preempting:
        walk = tree.walks.get(name)
        lowest = s.holders.lowest_priority(name)
        if walk is None or not walk.items or lowest is None:
            continue
        highest = -walk.items[0][0][1]  # queue order puts the highest priority first
        if highest > lowest:
            return True
    return False


def _head_has_victims(s: Scheduler, tree: _Tree) -> bool:
    """`_has_victims` before the walks are built, right after a release: every workload
    is then in its queue, whose head has the highest priority."""
    now = s.now()
    for name in tree.preempting:
        pending = s.queues.queue(name)
        head = pending.peek(now) if pending is not None else None
        lowest = s.holders.lowest_priority(name)
        if head is not None and lowest is not None and head.priority > lowest:
            return True
    return False


def _preemptor_first(s: Scheduler, members: tuple[str, ...]) -> bool:
    """Whether a queue of the tree puts first a workload that preempted and waits for its
    victims (docs/scheduling.md#requeue-after-a-cycle): withheld, it would come back in
    queue order, not first."""
    now = s.now()
    for name in members:
        pending = s.queues.queue(name)
        head = pending.peek(now) if pending is not None else None
        if (
            head is not None
            and pending is not None
            and pending.order_key(head) != fifo_order_key(head)
        ):
            return True
    return False


def _only_offered_queued(s: Scheduler, tree: _Tree) -> bool:
    """Whether the core's queues of the tree hold nothing but the offered workloads
    (else something this count does not know joined them)."""
    for name in tree.members:
        pending = s.queues.queue(name)
        walk = tree.walks.get(name)
        expected = 1 if walk is not None and walk.offered is not None else 0
        if pending is not None and len(pending) != expected:
            return False
    return True


def abandon(s: Scheduler, tree: _Tree) -> None:
    """Run the tree in full from now on: queue every workload not parked; the parked
    ones stay withheld until the next release (the core's flush would bring them)."""
    tree.state = ABANDONED
    for walk in tree.walks.values():
        if walk.offered is not None:
            walk.remove(walk.offered)  # the core has it, queued or parked
            walk.offered = None
        _queue(s, [key for _, key in walk.items[walk.start :]])
        del walk.items[walk.start :]


def _fits_now(s: Scheduler, name: str, walk: _Walk, item: Item) -> bool:
    quota = s.quota
    if not isinstance(quota, QuotaTree):
        return True
    free = tuple(quota.available(name, fr) for fr in walk.resources)
    return covers(free, walk.shape_of[item[1]])


def _advance(s: Scheduler, tree: _Tree, free: dict[str, Shape]) -> None:
    """Move every walk on by the cycles in which nothing can happen, then queue each
    walk's head of the next cycle: the one that fits, and the others too (a head
    within its queue's nominal quota holds that quota back from the others in its
    cycle)."""
    walks = {name: tree.walks[name] for name in free}
    skipped = [name for name, walk in walks.items() if walk.offered is not None]
    # A skipped walk's head is already offered: only the others look for the next fit.
    fits = (walks[name].distance(free[name]) for name in walks if name not in skipped)
    found = [d for d in fits if d is not None]
    if not skipped and not found:
        for walk in walks.values():
            walk.step(len(walk.items))  # every head left fails
        return
    cycles = min(found) if not skipped else 0
    if skipped and tree.plain:
        others = {name: walk for name, walk in walks.items() if name not in skipped}
        cycles = min(_stalled_cycles(s, tree, walks[name], others) for name in skipped)
        cycles = min(cycles, *found) if found else cycles
    for walk in walks.values():
        if walk.offered is not None:
            continue
        walk.step(cycles)
        if walk.start < len(walk.items):
            walk.offered = walk.items[walk.start]
            _queue(s, [walk.offered[1]])


def _stalled_cycles(s: Scheduler, tree: _Tree, skipped: _Walk, others: dict[str, _Walk]) -> int:
    """The cycles for which a skipped head that still fits surely stays skipped
    (docs/forecasting.md#cost): up to the first where none of the other queues' heads
    keeps it out by itself. The caller takes the smallest over the skipped heads, and
    stops before the first cycle where another queue's head fits: until then no skipped
    head is admitted, since what each one's blocker holds back stays held back whatever
    else the cycle tries."""
    offered = skipped.offered
    assert offered is not None
    alone = tree.memo.get((offered[1],))
    if alone is None:
        alone = tree.admitted_beside(s, offered[1], [])
        tree.memo[(offered[1],)] = alone
    if not alone:
        return 0  # it no longer fits: the next cycle parks it
    split = offered[0]
    clear = [
        walk.clear_distance(split, _blocker(s, tree, offered[1], name, split))
        for name, walk in others.items()
    ]
    return max(clear, default=0)


def _blocker(
    s: Scheduler, tree: _Tree, skipped: str, name: str, split: OrderKey
) -> Callable[[Item], bool]:
    """Whether a head of `name` keeps the skipped head out of a cycle by itself: a dry
    run of that cycle, once per kind of head (its amounts, priority and side of the
    skipped head), remembered until the quota changes."""
    walk = tree.walks[name]

    def blocks(item: Item) -> bool:
        kind = (skipped, name, walk.shape_of[item[1]], item[0][1], item[0] < split)
        found = tree.memo.get(kind)
        if found is None:
            found = not tree.admitted_beside(s, skipped, [item[1]])
            tree.memo[kind] = found
        return found

    return blocks


def _run_end(order: OrderKey, split: OrderKey) -> Item:
    """Where the run of alike heads that `order` starts ends: at the next priority, or at
    the skipped head's place (`split`) for the heads of its priority before it."""
    if order[1] == split[1] and order < split:
        return (split, "")
    return ((order[0], order[1] + 1), "")


def _holders(s: Scheduler, members: tuple[str, ...]) -> int:
    return sum(s.holders.count(name) for name in members)


def _queue(s: Scheduler, keys: list[str]) -> None:
    for key in keys:
        wl = s.workload(key)
        if wl is not None:
            s.sync_workload(wl)


def _eligible(s: Scheduler, hopeless: Hopeless, name: str) -> bool:
    """A queue whose walk may be counted, or that has nothing to walk."""
    info = s.objects.cluster_queues[name]
    bound = hopeless.bounds.get(name)
    return (
        bound is not None
        and info.strategy == "BestEffortFIFO"
        and all(len(g.flavors) == 1 for g in info.groups)
    )


def _plain(s: Scheduler, tree: _Tree) -> bool:
    flavors = s.objects.flavors
    for name in tree.members:
        for group in s.objects.cluster_queues[name].groups:
            for flavor_name in group.flavors:
                flavor = flavors.get(flavor_name)
                if flavor is None or flavor.node_labels or flavor.taints:
                    return False
    return not any(
        ps.limits_exceeded
        for walk in tree.walks.values()
        for _, key in walk.items
        if (wl := s.workload(key)) is not None
        for ps in wl.pod_sets
    )


def _walks_of(s: Scheduler, members: tuple[str, ...]) -> dict[str, _Walk] | None:
    """Each queue's walk, right after a release (every workload is in its queue's
    order then), or None if one of them cannot be counted."""
    walks: dict[str, _Walk] = {}
    for name in members:
        pending = s.queues.queue(name)
        if pending is None or len(pending) == 0:
            continue
        info = s.objects.cluster_queues[name]
        walk = _Walk(tuple((g.flavors[0], r) for g in info.groups for r in g.covered))
        for entry in pending.queued_entries():
            wl = s.workload(entry.key)
            if (
                wl is None
                or wl.requeue_state is not None
                or not s.namespace_matches(name, wl.namespace)
            ):
                return None
            asked = requests_of(wl, info)
            walk.add((fifo_order_key(entry), wl.key), tuple(asked[r] for _, r in walk.resources))
            if len(walk.shapes) > MAX_SHAPES:
                return None
        if len(walk.items) != len(pending) or pending.counts().parked:
            return None  # some parked or being tried: not in the walk's order
        walks[name] = walk
    return walks
