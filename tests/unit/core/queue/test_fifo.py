"""StrictFIFO / BestEffortFIFO behaviour (docs/scheduling.md#queues)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from scheduler.core.queue.fifo import (
    BEST_EFFORT_FIFO,
    STRICT_FIFO,
    FifoQueue,
    best_effort_fifo,
    strict_fifo,
)
from scheduler.core.queue.interface import QueueCounts, QueueEntry, QueueSettings, RequeueReason
from scheduler.core.queue.ordering import fifo_order_key

GENERIC = RequeueReason.GENERIC
NS_MISMATCH = RequeueReason.NAMESPACE_MISMATCH
AFTER_NOMINATION = RequeueReason.FAILED_AFTER_NOMINATION
PENDING_PREEMPTION = RequeueReason.PENDING_PREEMPTION


def entry(
    name: str,
    *,
    priority: int = 0,
    ts: int = 0,
    uid: str | None = None,
    ns: str = "ns",
    lq: str = "lq",
    revision: int = 0,
    requeued_false: bool = False,
    requeue_at: int | None = None,
) -> QueueEntry:
    return QueueEntry(
        key=f"{ns}/{name}",
        namespace=ns,
        name=name,
        uid=uid if uid is not None else f"uid-{name}",
        local_queue=lq,
        priority=priority,
        timestamp=ts,
        revision=revision,
        requeued_false=requeued_false,
        requeue_at=requeue_at,
    )


def settings_for(strategy: str) -> QueueSettings:
    return QueueSettings(cluster_queue="cq", strategy=strategy)


def strict() -> FifoQueue:
    q = strict_fifo(settings_for(STRICT_FIFO))
    assert isinstance(q, FifoQueue)
    return q


def best_effort() -> FifoQueue:
    q = best_effort_fifo(settings_for(BEST_EFFORT_FIFO))
    assert isinstance(q, FifoQueue)
    return q


def keys(entries: object) -> list[str]:
    assert isinstance(entries, (list, tuple))
    return [e.key for e in entries]


def requeue(q: FifoQueue, e: QueueEntry, reason: RequeueReason, now: int = 0) -> None:
    q.requeue(e, reason, now, has_untried_flavors=False)


def everything(_: str) -> bool:
    return True


# -- order ---------------------------------------------------------------------------
def test_order_priority_then_timestamp_then_uid_then_key() -> None:
    q = best_effort()
    q.push(entry("low", priority=1, ts=0), 0)
    q.push(entry("late", priority=5, ts=20), 0)
    q.push(entry("early", priority=5, ts=10), 0)
    q.push(entry("tie-b", priority=5, ts=20, uid="a"), 0)  # smaller uid than "uid-late"
    q.push(entry("same-uid-b", priority=5, ts=20, uid="a", ns="z"), 0)
    assert keys(q.listing()) == ["ns/early", "ns/tie-b", "z/same-uid-b", "ns/late", "ns/low"]
    popped = [q.pop(0) for _ in range(5)]
    assert [e.key for e in popped if e] == keys(q.listing())
    assert q.pop(0) is None


def test_order_key_shape() -> None:
    e = entry("a", priority=3, ts=7)
    assert fifo_order_key(e) == (True, -3, 7, "uid-a", "ns/a")
    assert fifo_order_key(e, sticky=True) < fifo_order_key(entry("b", priority=99))
    assert best_effort().order_key(e) == fifo_order_key(e)


# -- push (docs/scheduling.md#queue-structures) ----------------------------------------------------
@pytest.mark.parametrize(
    ("requeued_false", "requeue_at", "may_back_off"),
    [(False, None, False), (True, None, True), (False, 5, True), (True, 5, True)],
)
def test_only_an_entry_that_may_back_off_ever_waits(
    requeued_false: bool, requeue_at: int | None, may_back_off: bool
) -> None:
    e = entry("a", requeued_false=requeued_false, requeue_at=requeue_at)
    assert e.may_back_off is may_back_off
    waits_at = [now for now in (-(10**12), 0, 4, 5, 10**12) if not e.backoff_expired(now)]
    assert (waits_at != []) is may_back_off


def test_push_new_entry_with_unexpired_backoff_is_parked() -> None:
    q = best_effort()
    q.push(entry("a", requeue_at=100), 50)
    q.push(entry("b", requeued_false=True), 50)
    assert q.counts() == QueueCounts(active=0, parked=2, in_flight=0)
    assert q.pop(50) is None
    q.push(entry("c", requeue_at=100), 100)  # now >= requeueAt: expired
    assert q.counts().active == 1


def test_parked_update_with_same_revision_stays_parked_in_place() -> None:
    q = best_effort()
    q.push(entry("a", revision=1), 0)
    assert q.pop(0) is not None
    requeue(q, entry("a", revision=1), GENERIC)
    assert q.is_parked("ns/a")
    updated = entry("a", revision=1, lq="lq")
    q.push(updated, 0)
    assert q.is_parked("ns/a")
    assert q.get("ns/a") is updated
    assert q.counts() == QueueCounts(active=0, parked=1, in_flight=0)


def test_parked_update_with_new_revision_goes_to_heap_unless_backoff() -> None:
    q = best_effort()
    for name in ("a", "b"):
        q.push(entry(name), 0)
    for _ in range(2):
        head = q.pop(0)
        assert head is not None
        requeue(q, head, GENERIC)
    assert q.counts().parked == 2
    q.push(entry("a", revision=2), 0)
    assert q.in_heap("ns/a")
    q.push(entry("b", revision=2, requeue_at=10), 0)  # changed but still backing off
    assert q.is_parked("ns/b")
    assert q.get("ns/b") == entry("b", revision=2, requeue_at=10)


def test_update_in_heap_is_rekeyed_in_place() -> None:
    q = best_effort()
    q.push(entry("a", priority=1), 0)
    q.push(entry("b", priority=2), 0)
    assert keys(q.listing()) == ["ns/b", "ns/a"]
    # Already in the heap: stays there even if the new entry would be gated
    # (docs/scheduling.md#queue-structures).
    q.push(entry("a", priority=3, revision=1, requeue_at=99), 0)
    assert keys(q.listing()) == ["ns/a", "ns/b"]
    assert q.counts() == QueueCounts(active=2, parked=0, in_flight=0)
    head = q.pop(0)
    assert head is not None and head.priority == 3


def test_update_of_in_flight_entry_only_replaces_data() -> None:
    q = best_effort()
    q.push(entry("a"), 0)
    q.push(entry("b", ts=1), 0)
    assert q.pop(0) == entry("a")
    newer = entry("a", revision=5, priority=10)
    q.push(newer, 0)
    assert q.in_flight_keys() == {"ns/a"}
    assert q.get("ns/a") is newer
    assert q.pop(0) == entry("b", ts=1)  # the in-flight head is not returned again
    assert q.pop(0) is None


# -- pop and StrictFIFO ------------------------------------------------------------
def test_strict_fifo_head_blocks_the_queue() -> None:
    q = strict()
    q.push(entry("a", ts=1), 0)
    q.push(entry("b", ts=2), 0)
    for _ in range(3):
        head = q.pop(0)
        assert head is not None and head.key == "ns/a"
        q.requeue(head, GENERIC, 0, has_untried_flavors=False)
        assert q.in_heap("ns/a")
    assert q.counts() == QueueCounts(active=2, parked=0, in_flight=0)


def test_strict_fifo_namespace_mismatch_parks() -> None:
    q = strict()
    q.push(entry("a", ts=1), 0)
    q.push(entry("b", ts=2), 0)
    head = q.pop(0)
    assert head is not None
    requeue(q, head, NS_MISMATCH)
    assert q.is_parked("ns/a")
    nxt = q.pop(0)
    assert nxt is not None and nxt.key == "ns/b"


def test_strict_fifo_still_honours_backoff() -> None:
    q = strict()
    q.push(entry("a"), 0)
    head = q.pop(0)
    assert head is not None
    requeue(q, entry("a", revision=1, requeue_at=50), GENERIC, now=10)
    assert q.is_parked("ns/a")
    assert q.pop(10) is None


# -- BestEffortFIFO -------------------------------------------------------------------
def test_best_effort_parks_generic_failures_and_tries_the_next() -> None:
    q = best_effort()
    q.push(entry("a", ts=1), 0)
    q.push(entry("b", ts=2), 0)
    head = q.pop(0)
    assert head is not None and head.key == "ns/a"
    requeue(q, head, GENERIC)
    assert q.is_parked("ns/a")
    nxt = q.pop(0)
    assert nxt is not None and nxt.key == "ns/b"
    # The parked workload is still pending, and listed in order.
    assert keys(q.listing()) == ["ns/a", "ns/b"]
    assert q.counts() == QueueCounts(active=0, parked=1, in_flight=1)


@pytest.mark.parametrize(
    "reason",
    [AFTER_NOMINATION, PENDING_PREEMPTION, RequeueReason.PREEMPTION_FAILED],
)
def test_best_effort_immediate_reasons(reason: RequeueReason) -> None:
    q = best_effort()
    q.push(entry("a"), 0)
    head = q.pop(0)
    assert head is not None
    requeue(q, head, reason)
    assert q.in_heap("ns/a")


@pytest.mark.parametrize("reason", [GENERIC, NS_MISMATCH])
def test_best_effort_parking_reasons(reason: RequeueReason) -> None:
    q = best_effort()
    q.push(entry("a"), 0)
    head = q.pop(0)
    assert head is not None
    requeue(q, head, reason)
    assert q.is_parked("ns/a")


def test_flush_moves_matching_expired_parked_workloads() -> None:
    q = best_effort()
    q.push(entry("a", ns="x"), 0)
    q.push(entry("b", ns="y", ts=1), 0)
    q.push(entry("c", ns="x", ts=2), 0)
    for _ in range(3):
        head = q.pop(0)
        assert head is not None
        # c comes back backing off until 100.
        back = entry("c", ns="x", ts=2, requeue_at=100) if head.name == "c" else head
        requeue(q, back, GENERIC)
    assert q.counts().parked == 3
    q.flush(50, lambda ns: ns == "x")
    assert q.in_heap("x/a")
    assert q.is_parked("y/b")  # namespace no longer matches
    assert q.is_parked("x/c")  # backoff not expired
    q.flush(100, everything)
    assert q.counts() == QueueCounts(active=3, parked=0, in_flight=0)


def test_a_workload_both_refused_and_backing_off_stays_parked_once() -> None:
    q = best_effort()
    q.push(entry("gated", ns="y", requeue_at=100), 0)
    for i in range(5):
        q.push(entry(f"w{i}", ns="x", ts=i), 0)
    while (head := q.pop(0)) is not None:
        requeue(q, head, GENERIC)
    assert q.counts() == QueueCounts(active=0, parked=6, in_flight=0)
    q.flush(50, lambda ns: ns == "x")
    assert q.counts() == QueueCounts(active=5, parked=1, in_flight=0)
    assert q.is_parked("y/gated")
    q.flush(100, everything)
    assert q.counts() == QueueCounts(active=6, parked=0, in_flight=0)


def test_a_flush_asks_each_namespace_once_and_pops_in_queue_order() -> None:
    """docs/benchmarks.md, "The flush of a deep BestEffortFIFO queue": the selector is
    matched once per namespace, however many of its workloads are parked, and the
    workloads come back in queue order, wherever they were parked from."""
    q = best_effort()
    names = [f"w{i}" for i in range(12)]
    for i, name in enumerate(names):
        q.push(entry(name, ns=f"ns{i % 3}", ts=i, priority=i % 2), 0)
    while (head := q.pop(0)) is not None:
        requeue(q, head, GENERIC)
    assert q.counts().parked == 12
    asked: list[str] = []

    def matches(namespace: str) -> bool:
        asked.append(namespace)
        return namespace != "ns2"

    q.flush(0, matches)
    assert sorted(asked) == ["ns0", "ns1", "ns2"]
    assert q.counts() == QueueCounts(active=8, parked=4, in_flight=0)
    popped = []
    while (head := q.pop(0)) is not None:
        popped.append(head.name)
    # priority 1 first, then by timestamp; ns2's stay parked
    expected = [n for n in names if int(n[1:]) % 3 != 2]
    expected.sort(key=lambda n: (-(int(n[1:]) % 2), int(n[1:])))
    assert popped == expected


class _Counted:
    """A part of an order key that counts how often it is compared."""

    comparisons = 0

    def __init__(self, value: int) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        _Counted.comparisons += 1
        return isinstance(other, _Counted) and self.value == other.value

    def __lt__(self, other: _Counted) -> bool:
        _Counted.comparisons += 1
        return self.value < other.value

    __hash__ = None  # type: ignore[assignment]


class _CountingQueue(FifoQueue):
    def order_key(self, entry: QueueEntry) -> tuple[object, ...]:
        return (_Counted(entry.timestamp), entry.key)


def test_a_flush_of_a_queue_waiting_for_quota_compares_nothing() -> None:
    """docs/scheduling.md#flush-cost: when every workload is parked and all go back, the
    flush hands them to the heap as they are, in order, without sorting them again."""
    q = _CountingQueue(settings_for(BEST_EFFORT_FIFO))
    for i in range(500):
        q.push(entry(f"w{i}", ts=(i * 7919) % 500, ns=f"ns{i % 4}"), 0)
    while (head := q.pop(0)) is not None:
        requeue(q, head, GENERIC)
    assert q.counts() == QueueCounts(active=0, parked=500, in_flight=0)
    _Counted.comparisons = 0
    q.flush(0, everything)
    assert _Counted.comparisons == 0
    assert q.counts() == QueueCounts(active=500, parked=0, in_flight=0)
    popped = []
    while (head := q.pop(0)) is not None:
        popped.append(head.timestamp)
    assert popped == list(range(500))


def test_a_flush_half_way_through_a_walk_compares_nothing() -> None:
    """docs/scheduling.md#flush-cost: quota released while half of a deep queue is parked
    and half still in the heap: the parked half joins the heap as a run of its own, and
    the pops still come in queue order across both."""
    q = _CountingQueue(settings_for(BEST_EFFORT_FIFO))
    total = 3000
    for i in range(total):
        q.push(entry(f"w{i}", ts=(i * 7919) % total), 0)
    for _ in range(total // 2):
        head = q.pop(0)
        assert head is not None
        requeue(q, head, GENERIC)
    assert q.counts() == QueueCounts(active=total // 2, parked=total // 2, in_flight=0)
    _Counted.comparisons = 0
    q.flush(0, everything)
    assert _Counted.comparisons == 0
    assert q.counts() == QueueCounts(active=total, parked=0, in_flight=0)
    popped = []
    while (head := q.pop(0)) is not None:
        popped.append(head.timestamp)
    assert popped == list(range(total))


def test_flush_never_releases_requeued_false() -> None:
    q = best_effort()
    q.push(entry("a", requeued_false=True), 0)
    q.flush(10**9, everything)
    assert q.is_parked("ns/a")
    # Backoff finished: the workload is re-pushed with a new revision (docs/scheduling.md#flush).
    q.push(entry("a", revision=1), 10**9)
    assert q.in_heap("ns/a")


def test_flush_after_last_pop_sends_generic_requeue_to_heap() -> None:
    q = best_effort()
    q.push(entry("a"), 0)
    head = q.pop(0)
    assert head is not None and not q.flushed_since_pop
    q.flush(0, everything)
    requeue(q, head, GENERIC)
    assert q.in_heap("ns/a")


def test_flush_before_the_pop_does_not_count() -> None:
    q = best_effort()
    q.push(entry("a"), 0)
    q.flush(0, everything)
    head = q.pop(0)
    assert head is not None
    requeue(q, head, GENERIC)
    assert q.is_parked("ns/a")


def test_flush_exception_still_respects_backoff() -> None:
    q = best_effort()
    q.push(entry("a"), 0)
    head = q.pop(0)
    assert head is not None
    q.flush(0, everything)
    requeue(q, entry("a", revision=1, requeue_at=10), GENERIC, now=5)
    assert q.is_parked("ns/a")


def test_untried_flavors_send_generic_requeue_to_heap() -> None:
    for q in (best_effort(), strict()):
        q.push(entry("a"), 0)
        head = q.pop(0)
        assert head is not None
        q.requeue(head, NS_MISMATCH, 0, has_untried_flavors=True)
        assert q.in_heap("ns/a")


def test_backoff_gate_on_requeue() -> None:
    q = best_effort()
    q.push(entry("a"), 0)
    head = q.pop(0)
    assert head is not None
    requeue(q, entry("a", revision=1, requeued_false=True), AFTER_NOMINATION, now=10)
    assert q.is_parked("ns/a")
    q.flush(10**6, everything)
    assert q.is_parked("ns/a")
    q.push(entry("a", revision=2, requeue_at=20), 10)
    assert q.is_parked("ns/a")
    q.flush(19, everything)
    assert q.is_parked("ns/a")
    q.flush(20, everything)
    assert q.in_heap("ns/a")


# -- sticky ------------------------------------------------------------------------------
def test_pending_preemption_makes_the_workload_sticky_under_best_effort() -> None:
    q = best_effort()
    q.push(entry("preemptor", priority=0), 0)
    head = q.pop(0)
    assert head is not None
    q.push(entry("urgent", priority=100), 0)
    requeue(q, head, PENDING_PREEMPTION)
    assert q.sticky_key == "ns/preemptor"
    assert keys(q.listing()) == ["ns/preemptor", "ns/urgent"]
    assert q.position("ns/preemptor") == 0
    # Stays sticky across other requeues and updates until it leaves the queue.
    for _ in range(2):
        again = q.pop(0)
        assert again is not None and again.key == "ns/preemptor"
        requeue(q, again, GENERIC)
        q.flush(0, everything)
    q.push(entry("preemptor", priority=0, revision=9), 0)
    assert q.position("ns/preemptor") == 0
    again = q.pop(0)
    assert again is not None and again.key == "ns/preemptor"
    assert q.release_in_flight("ns/preemptor") == entry("preemptor", priority=0, revision=9)
    assert q.sticky_key is None
    nxt = q.pop(0)
    assert nxt is not None and nxt.key == "ns/urgent"


def test_a_new_sticky_replaces_the_previous_one() -> None:
    q = best_effort()
    q.push(entry("a", priority=1), 0)
    q.push(entry("b", priority=0), 0)
    first = q.pop(0)
    assert first is not None and first.key == "ns/a"
    requeue(q, first, PENDING_PREEMPTION)
    assert q.sticky_key == "ns/a"
    again = q.pop(0)
    assert again is not None and again.key == "ns/a"
    requeue(q, again, GENERIC)  # parked, still sticky
    assert q.is_parked("ns/a") and q.sticky_key == "ns/a"
    second = q.pop(0)
    assert second is not None and second.key == "ns/b"
    requeue(q, second, PENDING_PREEMPTION)
    assert q.sticky_key == "ns/b"
    assert keys(q.listing()) == ["ns/b", "ns/a"]
    a = q.get("ns/a")
    assert a is not None and q.order_key(a) == fifo_order_key(a)
    head = q.pop(0)
    assert head is not None and head.key == "ns/b"


def test_strict_fifo_has_no_sticky() -> None:
    q = strict()
    q.push(entry("a"), 0)
    head = q.pop(0)
    assert head is not None
    requeue(q, head, PENDING_PREEMPTION)
    assert q.sticky_key is None
    assert q.in_heap("ns/a")


def test_switching_to_strict_clears_sticky() -> None:
    q = FifoQueue(settings_for(BEST_EFFORT_FIFO))
    q.push(entry("a", priority=0), 0)
    q.push(entry("b", priority=5), 0)
    head = q.pop(0)
    assert head is not None
    requeue(q, head, PENDING_PREEMPTION)
    assert q.sticky_key == "ns/b"
    q.update_settings(settings_for(STRICT_FIFO))
    assert q.strict and q.sticky_key is None
    assert keys(q.listing()) == ["ns/b", "ns/a"]


# -- idempotence and other paths ---------------------------------------------------------
def test_requeue_is_idempotent() -> None:
    q = best_effort()
    q.push(entry("a"), 0)
    head = q.pop(0)
    assert head is not None
    requeue(q, head, GENERIC)
    requeue(q, head, GENERIC)
    assert q.counts() == QueueCounts(active=0, parked=1, in_flight=0)
    # A parked workload requeued immediately moves to the heap, once.
    requeue(q, head, AFTER_NOMINATION)
    requeue(q, head, AFTER_NOMINATION)
    assert q.counts() == QueueCounts(active=1, parked=0, in_flight=0)
    # A workload in the heap is never parked by a requeue.
    requeue(q, head, GENERIC)
    assert q.counts() == QueueCounts(active=1, parked=0, in_flight=0)
    assert len(q.listing()) == 1


def test_requeue_uses_the_newer_entry_and_inserts_unknown_keys() -> None:
    q = best_effort()
    q.push(entry("a"), 0)
    head = q.pop(0)
    assert head is not None
    newer = entry("a", revision=3)
    requeue(q, newer, AFTER_NOMINATION)
    assert q.get("ns/a") is newer
    stranger = entry("z")
    requeue(q, stranger, AFTER_NOMINATION)
    assert q.in_heap("ns/z")


def test_delete_and_release() -> None:
    q = best_effort()
    for i, name in enumerate("abc"):
        q.push(entry(name, ts=i), 0)
    head = q.pop(0)
    assert head is not None
    nxt = q.pop(0)
    assert nxt is not None
    requeue(q, nxt, GENERIC)  # b parked, a in-flight, c in heap
    assert q.release_in_flight("ns/b") is None  # not in flight: untouched
    assert q.is_parked("ns/b")
    assert q.delete("ns/b") == entry("b", ts=1)
    assert q.delete("ns/c") == entry("c", ts=2)
    assert q.delete("ns/c") is None
    assert q.release_in_flight("ns/a") == entry("a", ts=0)
    assert len(q) == 0 and q.listing() == ()
    assert "ns/a" not in q


def test_local_queue_counts_exclude_in_flight_and_separate_namespaces() -> None:
    q = best_effort()
    q.push(entry("a", ns="x", lq="main"), 0)
    q.push(entry("b", ns="x", lq="main", ts=1), 0)
    q.push(entry("c", ns="y", lq="main", ts=2), 0)
    q.push(entry("d", ns="y", lq="other", ts=3, requeue_at=10), 0)
    assert q.local_queue_counts() == {"x/main": 2, "y/main": 1, "y/other": 1}
    assert q.pop(0) is not None  # x/a in flight
    assert q.local_queue_counts() == {"x/main": 1, "y/main": 1, "y/other": 1}
    q.delete("y/c")
    assert q.local_queue_counts() == {"x/main": 1, "y/other": 1}
    assert [e.key for e in q.queued_entries()] == ["x/b", "y/d"]


def test_listing_is_a_snapshot_and_views_agree() -> None:
    q = best_effort()
    for i in range(5):
        q.push(entry(f"w{i}", ts=10 - i), 0)
    snap = q.listing()
    q.delete("ns/w0")
    q.push(entry("late", ts=100), 0)
    assert keys(snap) == ["ns/w4", "ns/w3", "ns/w2", "ns/w1", "ns/w0"]
    now = q.listing()
    assert list(q.iter_ordered(2)) == list(now[2:])
    assert list(q.iter_ordered(len(now) + 3)) == []
    assert [q.position(e.key) for e in now] == list(range(len(now)))
    assert q.position("ns/w0") is None
    with pytest.raises(ValueError):
        q.iter_ordered(-1)


# -- properties -------------------------------------------------------------------------
KEYS = [f"w{i}" for i in range(6)]
NAMESPACES = ["x", "y"]


class FifoMachine(RuleBasedStateMachine):
    """Random operation sequences never lose, duplicate or mis-order a workload."""

    def __init__(self) -> None:
        super().__init__()
        self.q = best_effort()
        self.now = 0
        self.expected: set[str] = set()
        self.in_flight: set[str] = set()

    @initialize(strategy=st.sampled_from([STRICT_FIFO, BEST_EFFORT_FIFO]))
    def choose_strategy(self, strategy: str) -> None:
        self.q = FifoQueue(settings_for(strategy))

    def _entry(self, name: str, ns: str, prio: int, ts: int, rev: int, gate: int) -> QueueEntry:
        return entry(
            name,
            ns=ns,
            lq=f"lq{prio % 2}",
            priority=prio,
            ts=ts,
            revision=rev,
            requeued_false=gate == 1,
            requeue_at=self.now + 5 if gate == 2 else None,
        )

    entries = st.tuples(
        st.sampled_from(KEYS),
        st.sampled_from(NAMESPACES),
        st.integers(0, 3),
        st.integers(0, 4),
        st.integers(0, 2),
        st.integers(0, 2),
    )

    @rule(data=entries)
    def push(self, data: tuple[str, str, int, int, int, int]) -> None:
        e = self._entry(*data)
        # A key lives in one namespace in this model, so keys stay comparable.
        other = "y" if e.namespace == "x" else "x"
        self.q.delete(f"{other}/{e.name}")
        self.expected.discard(f"{other}/{e.name}")
        self.in_flight.discard(f"{other}/{e.name}")
        self.q.push(e, self.now)
        self.expected.add(e.key)

    @rule()
    def pop(self) -> None:
        active = [e for k in self.expected if self.q.in_heap(k) and (e := self.q.get(k))]
        head = self.q.pop(self.now)
        if head is not None:
            assert head.key not in self.in_flight
            # The head is the first of the heap in queue order, whichever way its
            # workloads reached the heap (pushes, requeues, flushes).
            assert head == min(active, key=self.q.order_key)
            self.in_flight.add(head.key)
        else:
            assert active == []

    @rule(
        reason=st.sampled_from(list(RequeueReason)),
        untried=st.booleans(),
        pick=st.integers(0, 10),
    )
    def requeue_in_flight(self, reason: RequeueReason, untried: bool, pick: int) -> None:
        if not self.in_flight:
            return
        key = sorted(self.in_flight)[pick % len(self.in_flight)]
        e = self.q.get(key)
        assert e is not None
        self.q.requeue(e, reason, self.now, has_untried_flavors=untried)
        self.in_flight.discard(key)

    @rule(reason=st.sampled_from(list(RequeueReason)), data=entries)
    def requeue_anything(
        self, reason: RequeueReason, data: tuple[str, str, int, int, int, int]
    ) -> None:
        e = self._entry(*data)
        if f"{'y' if e.namespace == 'x' else 'x'}/{e.name}" in self.expected:
            return
        self.q.requeue(e, reason, self.now, has_untried_flavors=False)
        self.expected.add(e.key)
        self.in_flight.discard(e.key)

    @rule(ns=st.sampled_from([*NAMESPACES, None]))
    def flush(self, ns: str | None) -> None:
        before = {k: (self.q.is_parked(k), self.q.in_heap(k)) for k in self.expected}
        self.q.flush(self.now, lambda n: ns is None or n == ns)
        # docs/scheduling.md#flush: exactly the parked workloads of a matching namespace
        # whose backoff is over reach the heap; nothing else moves.
        for key, (parked, in_heap) in before.items():
            e = self.q.get(key)
            assert e is not None
            moves = parked and (ns is None or e.namespace == ns) and e.backoff_expired(self.now)
            assert self.q.in_heap(key) == (in_heap or moves)
            assert self.q.is_parked(key) == (parked and not moves)

    @rule(key=st.sampled_from([f"{ns}/{k}" for ns in NAMESPACES for k in KEYS]))
    def delete(self, key: str) -> None:
        removed = self.q.delete(key)
        assert (removed is not None) == (key in self.expected)
        self.expected.discard(key)
        self.in_flight.discard(key)

    @rule(pick=st.integers(0, 10))
    def release(self, pick: int) -> None:
        if not self.in_flight:
            return
        key = sorted(self.in_flight)[pick % len(self.in_flight)]
        assert self.q.release_in_flight(key) is not None
        self.expected.discard(key)
        self.in_flight.discard(key)

    @rule(step=st.integers(1, 6))
    def advance(self, step: int) -> None:
        self.now += step

    @invariant()
    def consistent(self) -> None:
        listing = self.q.listing()
        listed = [e.key for e in listing]
        assert len(listed) == len(set(listed))
        assert set(listed) == self.expected
        assert self.q.in_flight_keys() == self.in_flight
        counts = self.q.counts()
        assert counts.active + counts.parked + counts.in_flight == len(listed)
        assert counts.active == sum(self.q.in_heap(k) for k in listed)
        assert counts.parked == sum(self.q.is_parked(k) for k in listed)
        assert counts.in_flight == len(self.in_flight)
        assert [self.q.position(k) for k in listed] == list(range(len(listed)))
        order = [self.q.order_key(e) for e in listing]
        assert order == sorted(order)
        for k in (0, 1, len(listing) // 2, len(listing)):
            assert list(self.q.iter_ordered(k)) == list(listing[k:])
        assert sum(self.q.local_queue_counts().values()) == counts.active + counts.parked
        if isinstance(self.q, FifoQueue) and self.q.sticky_key is not None:
            assert self.q.sticky_key in self.expected
            assert listed[0] == self.q.sticky_key


TestFifoMachine = FifoMachine.TestCase
TestFifoMachine.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_ordered_runs_are_the_listing_and_a_change_rewrites_one_run() -> None:
    q = strict()
    for i in range(5000):
        q.push(entry(f"w{i:05d}", ts=i), now=0)
    runs = q.ordered_runs()
    assert len(runs) > 2
    assert [e for run in runs for e in run] == list(q.listing())
    copies = [list(run) for run in runs]
    q.push(entry("late", ts=10_000), now=0)  # the newest: lands in the last run
    after = q.ordered_runs()
    same = [
        a == b and all(x is y for x, y in zip(a, b, strict=True))
        for a, b in zip(after, copies, strict=False)
    ]
    assert same[:-1] == [True] * (len(same) - 1) and not same[-1]
    assert [e for run in after for e in run] == list(q.listing())


def _item_ids(q: FifoQueue) -> list[int]:
    return [id(e) for run in q.ordered_runs() for e in run]


def test_pop_requeue_and_flush_of_the_same_entry_keep_its_item_in_place() -> None:
    q = best_effort()
    for i in range(3):
        q.push(entry(f"w{i}", ts=i), now=0)
    items = _item_ids(q)
    head = q.pop(0)
    assert head is not None and head.key == "ns/w0"
    assert q.counts() == QueueCounts(active=2, parked=0, in_flight=1)
    assert q.local_queue_counts() == {"ns/lq": 2}
    requeue(q, head, GENERIC)  # parked: a pop came after the last flush
    assert q.is_parked("ns/w0") and q.local_queue_counts() == {"ns/lq": 3}
    q.flush(0, everything)
    assert q.in_heap("ns/w0")
    assert _item_ids(q) == items
    assert keys(q.listing()) == ["ns/w0", "ns/w1", "ns/w2"]
    again = q.pop(0)
    assert again is head


def test_requeue_of_the_popped_entry_as_sticky_moves_it_to_the_front() -> None:
    q = best_effort()
    q.push(entry("urgent", priority=5), 0)
    q.push(entry("low", priority=0), 0)
    q.pop(0)  # urgent, in flight
    requeue(q, entry("urgent", priority=5), GENERIC)  # parked
    low = q.pop(0)
    assert low is not None and low.key == "ns/low"
    requeue(q, low, PENDING_PREEMPTION)  # the very popped object, now sticky
    assert keys(q.listing()) == ["ns/low", "ns/urgent"]
    assert q.position("ns/low") == 0
    q.flush(0, everything)
    nxt = q.pop(0)
    assert nxt is low


def test_settings_change_with_an_unchanged_order_keeps_every_item() -> None:
    q = best_effort()
    for i in range(4):
        q.push(entry(f"w{i}", ts=i), now=0)
    items = _item_ids(q)
    q.update_settings(
        QueueSettings(cluster_queue="cq", strategy=BEST_EFFORT_FIFO, options=(("a", "b"),))
    )
    assert _item_ids(q) == items
