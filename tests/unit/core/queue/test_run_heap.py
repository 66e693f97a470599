"""The FIFO queue's active heap as a few sorted lists (docs/scheduling.md#flush-cost)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sortedcontainers import SortedList

from scheduler.core.queue.run_heap import RunHeap

# add a new item / remove one / pop the first / absorb a batch of new items
operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 10**6)),
        st.tuples(st.just("remove"), st.integers(0, 10**6)),
        st.tuples(st.just("pop"), st.just(0)),
        st.tuples(st.just("absorb"), st.integers(0, 12)),
    ),
    max_size=120,
)


@given(operations, st.integers(0, 3), st.integers(2, 4))
def test_it_behaves_as_one_sorted_list(
    ops: list[tuple[str, int]], small: int, max_runs: int
) -> None:
    heap: RunHeap[tuple[int, int]] = RunHeap(small=small, max_runs=max_runs)
    model: SortedList[tuple[int, int]] = SortedList()
    serials = iter(range(10**9))  # items are unique by their serial; keys interleave

    for op, value in ops:
        if op == "add":
            item = (value, next(serials))
            heap.add(item)
            model.add(item)
        elif op == "remove" and model:
            item = model[value % len(model)]
            heap.remove(item)
            model.remove(item)
        elif op == "pop":
            if model:
                assert heap.pop_first() == model.pop(0)
            else:
                with pytest.raises(IndexError):
                    heap.pop_first()
        elif op == "absorb":
            batch = SortedList(((i * 7919) % 10**6, next(serials)) for i in range(value))
            model.update(batch)
            heap.absorb(batch)
        assert len(heap) == len(model)
        assert bool(heap) == bool(model)
        assert heap.runs <= max_runs
        if model:
            assert heap.first() == model[0]


def test_a_large_batch_becomes_a_run_of_its_own() -> None:
    heap: RunHeap[int] = RunHeap(small=2)
    for i in range(0, 100, 2):
        heap.add(i)
    odd = SortedList(range(1, 100, 2))
    heap.absorb(odd)
    assert heap.runs == 2  # not merged: nothing was compared or moved
    assert [heap.pop_first() for _ in range(100)] == list(range(100))
    assert heap.runs == 0


def test_a_small_batch_joins_the_first_run() -> None:
    heap: RunHeap[int] = RunHeap(small=2)
    heap.absorb(SortedList(range(10)))
    heap.absorb(SortedList([20, 30]))
    assert heap.runs == 1 and len(heap) == 12


def test_removing_what_is_not_there_is_an_error() -> None:
    heap: RunHeap[int] = RunHeap()
    heap.add(1)
    with pytest.raises(ValueError, match="not in the heap"):
        heap.remove(2)
    with pytest.raises(IndexError):
        RunHeap[int]().first()
    with pytest.raises(ValueError):
        RunHeap[int](max_runs=1)
