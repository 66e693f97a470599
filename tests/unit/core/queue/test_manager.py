"""QueueManager: one queue per ClusterQueue, LocalQueue mapping, cycle helpers."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler.core.queue import loader
from scheduler.core.queue.fifo import FifoQueue
from scheduler.core.queue.interface import QueueCounts, QueueEntry, QueueSettings, RequeueReason
from scheduler.core.queue.loader import QueuePluginError
from scheduler.core.queue.manager import QueueManager

EXAMPLES = Path(__file__).resolve().parents[4] / "docs" / "examples"
PLUGIN = "shortest_first_queue:ShortestWaitFirstQueue"


def entry(
    name: str,
    *,
    ts: int = 0,
    ns: str = "ns",
    lq: str = "lq",
    revision: int = 0,
    requeue_at: int | None = None,
) -> QueueEntry:
    return QueueEntry(
        key=f"{ns}/{name}",
        namespace=ns,
        name=name,
        uid=f"uid-{name}",
        local_queue=lq,
        priority=0,
        timestamp=ts,
        revision=revision,
        requeued_false=False,
        requeue_at=requeue_at,
    )


def cq_settings(name: str, strategy: str = "BestEffortFIFO") -> QueueSettings:
    return QueueSettings(cluster_queue=name, strategy=strategy)


def manager(*names: str) -> QueueManager:
    m = QueueManager()
    for name in names:
        m.set_cluster_queue(cq_settings(name))
    return m


def all_active(_: str) -> bool:
    return True


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    loader.clear_cache()
    yield
    loader.clear_cache()


def test_cluster_queue_lifecycle() -> None:
    m = manager("b", "a")
    assert m.cluster_queues() == ["a", "b"]
    q = m.queue("a")
    assert isinstance(q, FifoQueue) and not q.strict
    assert m.queue("zzz") is None
    # Same implementation: the queue object and its contents are kept.
    m.push("a", entry("w"), 0)
    m.set_cluster_queue(QueueSettings("a", "BestEffortFIFO", (("k", "v"),)))
    assert m.queue("a") is q and q.settings.options == (("k", "v"),)
    assert m.locate("ns/w") == "a"


def test_strategy_change_moves_heap_and_parked_but_not_in_flight() -> None:
    m = manager("cq")
    for i, name in enumerate(["a", "b", "c", "d"]):
        m.push("cq", entry(name, ts=i), 0)
    old = m.queue("cq")
    assert old is not None
    head = old.pop(0)  # a in flight
    assert head is not None
    parked = old.pop(0)  # b parked
    assert parked is not None
    old.requeue(parked, RequeueReason.GENERIC, 0, has_untried_flavors=False)
    m.set_cluster_queue(cq_settings("cq", "StrictFIFO"), now=0)
    new = m.queue("cq")
    assert isinstance(new, FifoQueue) and new is not old and new.strict
    assert [e.name for e in new.listing()] == ["b", "c", "d"]
    assert new.counts() == QueueCounts(active=3, parked=0, in_flight=0)
    # The cycle's requeue of the in-flight head lands in the new queue.
    assert m.requeue("cq", head, RequeueReason.GENERIC, 0, has_untried_flavors=False)
    assert [e.name for e in new.listing()] == ["a", "b", "c", "d"]


def test_swap_without_now_keeps_backing_off_workloads_parked() -> None:
    m = manager("cq")
    m.push("cq", entry("gated", requeue_at=5), 10)  # expired at 10: in the heap
    m.push("cq", entry("free", ts=1), 10)
    m.set_cluster_queue(cq_settings("cq", "StrictFIFO"))
    q = m.queue("cq")
    assert isinstance(q, FifoQueue)
    assert q.is_parked("ns/gated") and q.in_heap("ns/free")
    m.flush(["cq"], 10, lambda cq, ns: True)
    assert q.in_heap("ns/gated")


def test_plugin_overrides_strategy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.delitem(sys.modules, "shortest_first_queue", raising=False)
    m = manager("cq")
    for i, name in enumerate(["old", "new"]):
        m.push("cq", entry(name, ts=i), 0)
    m.set_cluster_queue(cq_settings("cq"), PLUGIN, now=0)
    q = m.queue("cq")
    assert type(q).__name__ == "ShortestWaitFirstQueue"
    assert [(cq, e.name) for cq, e in m.heads(0, all_active)] == [("cq", "new")]
    # Back to the built-in: entries follow again (the in-flight head is the cycle's).
    m.set_cluster_queue(cq_settings("cq"), None, now=0)
    assert type(m.queue("cq")) is FifoQueue


def test_unknown_plugin_keeps_the_old_queue() -> None:
    m = manager("cq")
    m.push("cq", entry("w"), 0)
    q = m.queue("cq")
    with pytest.raises(QueuePluginError):
        m.set_cluster_queue(cq_settings("cq"), "qs_nowhere:Queue")
    assert m.queue("cq") is q and m.locate("ns/w") == "cq"


def test_delete_cluster_queue_returns_orphans() -> None:
    m = manager("a", "b")
    m.push("a", entry("x"), 0)
    m.push("a", entry("y", ts=1), 0)
    m.push("b", entry("z"), 0)
    assert m.heads(0, all_active)  # x and z in flight
    orphans = m.delete_cluster_queue("a")
    assert [e.name for e in orphans] == ["x", "y"]
    assert m.locate("ns/x") is None and m.locate("ns/y") is None
    assert m.locate("ns/z") == "b"
    assert m.delete_cluster_queue("a") == []
    assert m.cluster_queues() == ["b"]


def test_push_moves_a_workload_between_cluster_queues() -> None:
    m = manager("a", "b")
    m.push("a", entry("w"), 0)
    m.push("b", entry("w", revision=1), 0)
    assert m.locate("ns/w") == "b"
    qa, qb = m.queue("a"), m.queue("b")
    assert qa is not None and qb is not None
    assert len(qa) == 0 and len(qb) == 1
    assert m.delete("ns/w") == entry("w", revision=1)
    assert m.delete("ns/w") is None
    assert m.locate("ns/w") is None
    with pytest.raises(KeyError):
        m.push("nope", entry("w"), 0)


def test_heads_pop_one_per_active_queue_in_name_order() -> None:
    m = manager("c", "a", "b", "empty")
    for cq in ("c", "a", "b"):
        for i in range(2):
            m.push(cq, entry(f"{cq}{i}", ts=i), 0)
    heads = m.heads(0, lambda cq: cq != "b")
    assert [(cq, e.name) for cq, e in heads] == [("a", "a0"), ("c", "c0")]
    qa = m.queue("a")
    assert qa is not None and qa.counts().in_flight == 1


def test_requeue_and_release_through_the_manager() -> None:
    m = manager("a", "b")
    m.push("a", entry("w"), 0)
    ((cq, head),) = m.heads(0, all_active)
    # While in flight the workload moved to another ClusterQueue: the old requeue is void.
    m.push("b", head, 0)
    assert not m.requeue("a", head, RequeueReason.GENERIC, 0, has_untried_flavors=False)
    assert m.locate("ns/w") == "b"
    assert not m.requeue("gone", head, RequeueReason.GENERIC, 0, has_untried_flavors=False)
    ((cq, head),) = m.heads(0, all_active)
    assert cq == "b"
    assert m.release_in_flight("a", "ns/w") is None
    assert m.release_in_flight("b", "ns/w") == head
    assert m.locate("ns/w") is None
    assert m.release_in_flight("gone", "ns/w") is None


def test_locate_notices_a_release_done_on_the_queue() -> None:
    m = manager("a")
    m.push("a", entry("w"), 0)
    q = m.queue("a")
    assert q is not None and q.pop(0) is not None
    q.release_in_flight("ns/w")
    assert m.locate("ns/w") is None


def test_flush_binds_each_cluster_queue() -> None:
    m = manager("a", "b", "c")
    for cq in ("a", "b", "c"):
        m.push(cq, entry(f"w{cq}", ns=cq), 0)
    for cq, head in m.heads(0, all_active):
        queue = m.queue(cq)
        assert queue is not None
        queue.requeue(head, RequeueReason.GENERIC, 0, has_untried_flavors=False)
    seen: list[tuple[str, str]] = []

    def matches(cq: str, ns: str) -> bool:
        seen.append((cq, ns))
        return cq == ns and cq != "b"

    m.flush(["c", "b", "a", "a", "unknown"], 0, matches)
    assert seen == [("a", "a"), ("b", "b"), ("c", "c")]
    counts = {cq: q.counts() for cq in m.cluster_queues() if (q := m.queue(cq)) is not None}
    assert counts["a"].active == 1 and counts["c"].active == 1
    assert counts["b"].parked == 1


def test_local_queue_mapping_moves_workloads() -> None:
    m = manager("a", "b")
    m.set_local_queue("ns", "lq", "a", now=0)
    m.set_local_queue("ns", "other", "a", now=0)
    assert m.cluster_queue_of("ns", "lq") == "a"
    m.push("a", entry("x", lq="lq"), 0)
    m.push("a", entry("y", lq="lq", ts=1), 0)
    m.push("a", entry("z", lq="other", ts=2), 0)
    ((_, head),) = m.heads(0, all_active)  # x in flight
    m.set_local_queue("ns", "lq", "b", now=0)
    assert m.locate("ns/x") == "b" and m.locate("ns/y") == "b"
    assert m.locate("ns/z") == "a"
    assert not m.requeue("a", head, RequeueReason.GENERIC, 0, has_untried_flavors=False)
    qb = m.queue("b")
    assert qb is not None and qb.local_queue_counts() == {"ns/lq": 2}
    # Pointing to a ClusterQueue that does not exist: its workloads are not queued.
    m.set_local_queue("ns", "lq", "missing", now=0)
    assert m.locate("ns/x") is None and len(qb) == 0
    orphans = m.delete_local_queue("ns", "other")
    assert [e.name for e in orphans] == ["z"]
    assert m.cluster_queue_of("ns", "other") is None
    assert m.delete_local_queue("ns", "other") == []
