"""Snapshot views: O(limit) pages and positions that agree with the core's order."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.api.decode import load_documents
from scheduler.core.blockers import Blocker
from scheduler.core.visibility import pending_workloads
from scheduler.core.workload import OwnerRef
from scheduler.runtime.capture import EntryCache, capture_snapshot
from scheduler.runtime.pages import ViewBuilder, build_view
from scheduler.runtime.workload_records import PendingEntry, WhyPending
from scheduler.sim.runner import Simulation

SAMPLES = Path(__file__).resolve().parents[3] / "manifests" / "samples"


def _entry(i: int, ns: str, lq: str, priority: int = 0) -> PendingEntry:
    return PendingEntry.make(ns, f"w{i}", 1_000_000 * i, (), priority, lq)


entries_strategy = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["lq1", "lq2", "default"])),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(entries_strategy, st.integers(-5, 70), st.integers(-5, 70), st.integers(1, 8))
def test_pages_are_slices_with_both_positions(
    spec: list[tuple[str, str]], offset: int, limit: int, chunk: int
) -> None:
    entries = [_entry(i, ns, lq) for i, (ns, lq) in enumerate(spec)]
    view = ViewBuilder("cq", entries, chunk=chunk).view
    assert list(view.entries) == entries
    assert len(view.entries) == len(entries)
    assert view.entries[offset:limit] == tuple(entries[offset:limit])
    if entries:
        assert view.entries[-1] is entries[-1]
        assert view.item(len(entries) - 1).entry is entries[-1]
    # The digest is the content's, whatever the chunking.
    assert view.digest == build_view("cq", entries).digest
    expected_lq_pos: list[int] = []
    seen: dict[tuple[str, str], int] = {}
    for e in entries:
        expected_lq_pos.append(seen.get(e.local_queue_key, 0))
        seen[e.local_queue_key] = expected_lq_pos[-1] + 1
    start = max(0, offset)
    want = list(range(len(entries)))[start : start + max(0, limit)]
    page = view.page(offset, limit)
    assert [p.position_in_cluster_queue for p in page] == want
    assert [p.position_in_local_queue for p in page] == [expected_lq_pos[i] for i in want]
    for ns, lq in {(e.namespace, e.local_queue) for e in entries}:
        members = [i for i, e in enumerate(entries) if (e.namespace, e.local_queue) == (ns, lq)]
        lq_page = view.local_queue_page(ns, lq, offset, limit)
        assert [p.position_in_cluster_queue for p in lq_page] == members[
            start : start + max(0, limit)
        ]
        assert [p.position_in_local_queue for p in lq_page] == list(range(len(members)))[
            start : start + max(0, limit)
        ]
        indexes = view.local_queue_indexes(ns, lq)
        assert len(indexes) == view.local_queue_count(ns, lq) == len(members)
        assert list(indexes) == members
        assert indexes[offset:limit] == tuple(members[offset:limit])
        assert indexes[::2] == tuple(members[::2])
        assert indexes[-1] == members[-1]
    for i, e in enumerate(entries):
        found = view.position_of(e.namespace, e.name)
        assert found is not None
        assert found.position_in_cluster_queue == i
        assert found.position_in_local_queue == expected_lq_pos[i]
    assert view.position_of("a", "missing") is None
    assert len(view.local_queue_indexes("a", "missing")) == 0
    assert view.local_queue_page("a", "missing", 0, 10) == []


def test_same_name_local_queues_in_two_namespaces_are_kept_apart() -> None:
    # docs/visibility-api.md#order-and-positions: x (team-a/default) and y (team-b/default) are both
    # at 0.
    view = build_view("cq-a", [_entry(0, "team-a", "default"), _entry(1, "team-b", "default")])
    assert [(p.position_in_cluster_queue, p.position_in_local_queue) for p in view.page(0, 10)] == [
        (0, 0),
        (1, 0),
    ]


def test_digest_identifies_contents_and_order() -> None:
    a, b = _entry(0, "ns", "lq"), _entry(1, "ns", "lq")
    assert build_view("cq", [a, b]).digest == build_view("cq", [a, b]).digest
    assert build_view("cq", [a, b]).digest != build_view("cq", [b, a]).digest
    moved = PendingEntry.make("ns", "w1", b.creation, (), 5, "lq")
    assert build_view("cq", [a, b]).digest != build_view("cq", [a, moved]).digest
    owned = PendingEntry.make(
        "ns", "w1", b.creation, (OwnerRef("batch/v1", "Job", "j", "u"),), 0, "lq"
    )
    assert build_view("cq", [a, b]).digest != build_view("cq", [a, owned]).digest
    view = build_view("cq", [a, b])
    assert view.local_queue_digest("ns", "lq") != view.local_queue_digest("ns", "other")


def test_builder_yields_between_chunks() -> None:
    builder = ViewBuilder("cq", [_entry(i, "ns", "lq") for i in range(25)], chunk=10)
    steps = sum(1 for _ in builder.steps())
    assert steps == 2
    assert len(builder.view) == 25
    assert [len(c) for c in builder.view.chunks] == [10, 10, 5]


def test_out_of_range_reads() -> None:
    view = ViewBuilder("cq", [_entry(i, "ns", "lq") for i in range(5)], chunk=2).view
    for bad in (5, -6):
        with pytest.raises(IndexError):
            view.entries[bad]
        with pytest.raises(IndexError):
            view.local_queue_indexes("ns", "lq")[bad]
    with pytest.raises(IndexError):
        view.item(5)
    assert view.page(5, 10) == [] and view.page(0, 0) == []


def test_snapshot_agrees_with_the_simulator_on_the_samples() -> None:
    sim = Simulation(load_documents([str(SAMPLES)]), cycles=0)
    result = sim.run()
    s = result.scheduler
    snapshot = capture_snapshot(s, EntryCache(), generation=1)
    total = 0
    for cq in sorted(s.objects.cluster_queues):
        want = [
            (i.namespace, i.name, i.position_in_cluster_queue, i.position_in_local_queue)
            for i in pending_workloads(s, cq)
        ]
        view = snapshot.view(cq)
        assert view is not None
        got = [
            (
                p.entry.namespace,
                p.entry.name,
                p.position_in_cluster_queue,
                p.position_in_local_queue,
            )
            for p in view.page(0, 100_000)
        ]
        assert got == want
        total += len(got)
    assert total > 0, "the samples must leave something pending before the first cycle"
    for (ns, lq), cq in snapshot.local_queues.items():
        assert cq in s.objects.cluster_queues
        exists, view = snapshot.local_queue_view(ns, lq)
        assert exists and view is not None


def test_an_entry_gives_back_its_pending_condition() -> None:
    blockers = (Blocker("Other", "no room"),)
    why = WhyPending("Pending", "no room", 5_000_000, blockers)
    entry = PendingEntry.make("ns", "w", 1, (), 0, "lq", why.message, why)
    assert entry.why == why and entry.why is not None
    assert entry.why.blockers is blockers
    assert entry.why_pending == "no room"
    assert entry == PendingEntry.make("ns", "w", 1, (), 0, "lq", why.message, why)
    later = WhyPending("Pending", "no room", 6_000_000, blockers)
    assert entry != PendingEntry.make("ns", "w", 1, (), 0, "lq", later.message, later)
    plain = PendingEntry.make("ns", "w", 1, (), 0, "lq", "a message read elsewhere")
    assert plain.why is None and plain.why_pending == "a message read elsewhere"
