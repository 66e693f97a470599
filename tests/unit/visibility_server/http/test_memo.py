"""The render memo's bounds: heads by a budget of heads, least recently used chunks first;
fragments by a budget all views share (docs/visibility-api.md#what-the-server-remembers)."""

from __future__ import annotations

import gc

import orjson

from scheduler.runtime.pages import ClusterQueueView, ViewBuilder
from tests.unit.visibility_server.http.support import (
    SECOND,
    T0,
    Holder,
    app_for,
    entry,
    get,
    make_snapshot,
)
from visibility_server.http.memo import RenderMemo
from visibility_server.http.render import fragments, item_object

CQ = "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cq-a/pendingworkloads"


def view_of(n: int, chunk: int = 2) -> ClusterQueueView:
    entries = [entry("ns", f"w{i:05d}", "lq", 0, T0 + i * SECOND) for i in range(n)]
    return ViewBuilder("cq-a", entries, chunk=chunk).view


def expected(view: ClusterQueueView, start: int, stop: int) -> list[bytes]:
    return [orjson.dumps(item_object(view.item(i))) for i in range(start, stop)]


def test_heads_past_the_budget_forget_the_least_recently_used_chunk() -> None:
    view = view_of(10)  # five chunks of two
    memo = RenderMemo(head_budget=4, fragment_budget=0)
    assert fragments(memo, view, 0, 2) == expected(view, 0, 2)  # chunk 0
    first = memo.head(view, 0)
    assert fragments(memo, view, 2, 4) == expected(view, 2, 4)  # chunk 1
    assert memo.head(view, 0) is first  # chunk 0 is now the most recently used
    assert (len(memo.chunks), memo.chunks.size) == (2, 4)
    assert fragments(memo, view, 4, 6) == expected(view, 4, 6)  # chunk 2 evicts chunk 1
    assert (len(memo.chunks), memo.chunks.size) == (2, 4)
    assert memo.head(view, 0) is first
    assert memo.head(view, 4) is not None
    # Chunk 1 was forgotten: asking for its heads starts it again, empty.
    assert memo.head(view, 2) is None
    assert memo.chunks.size == 4


def test_a_chunk_larger_than_the_budget_is_kept_alone() -> None:
    view = view_of(6, chunk=3)
    memo = RenderMemo(head_budget=2)
    assert fragments(memo, view, 0, 6) == expected(view, 0, 6)
    assert (len(memo.chunks), memo.chunks.size) == (1, 3)


def test_a_dropped_chunk_returns_its_share_of_the_head_budget() -> None:
    memo = RenderMemo(head_budget=100)
    view = view_of(6, chunk=3)
    fragments(memo, view, 0, 6)
    assert memo.chunks.size == 6
    del view
    gc.collect()
    assert (len(memo.chunks), memo.chunks.size) == (0, 0)


def test_fragments_past_the_budget_are_rendered_but_not_kept() -> None:
    memo = RenderMemo(fragment_budget=3)
    view = view_of(5)
    assert fragments(memo, view, 0, 5) == expected(view, 0, 5)
    assert sorted(memo.fragments_of(view)) == [0, 1, 2]
    assert memo.fragment_budget.left == 0
    assert fragments(memo, view, 0, 5) == expected(view, 0, 5)  # again, the same bytes
    other = view_of(4)
    assert fragments(memo, other, 0, 4) == expected(other, 0, 4)
    assert memo.fragments_of(other) == {}
    # The first view goes: its three fragments go back to the budget, and the other
    # view's are kept from then on.
    del view
    gc.collect()
    assert memo.fragment_budget.left == 3
    fragments(memo, other, 0, 4)
    assert sorted(memo.fragments_of(other)) == [0, 1, 2]
    assert memo.fragment_budget.left == 0


async def test_pages_are_the_same_bytes_whatever_the_memo_keeps() -> None:
    """A server whose budgets are spent answers what an unbounded one answers."""
    entries = [entry("ns", f"w{i:05d}", "lq", 0, T0 + i * SECOND) for i in range(40)]
    holder = Holder(make_snapshot({"cq-a": entries}))
    roomy, tight = app_for(holder), app_for(holder)
    tight.state.visibility_server.answers.memo = RenderMemo(head_budget=1, fragment_budget=2)
    for query in ("?limit=7", "?offset=5&limit=20", "?offset=33", "?limit=7"):
        assert (await get(tight, CQ + query)).content == (await get(roomy, CQ + query)).content
    assert tight.state.visibility_server.memo.fragment_budget.left == 0
