"""SortedRuns: a sorted sequence stored as runs, checked against a plain sorted list."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.queue.runs import SortedRuns

# (add?, key): small keys so removals often hit present ones; a small load so runs
# split and merge many times in one example.
_OPS = st.lists(st.tuples(st.booleans(), st.integers(0, 60)), max_size=300)


@settings(max_examples=200, deadline=None)
@given(ops=_OPS, load=st.integers(2, 6))
def test_agrees_with_a_sorted_list(ops: list[tuple[bool, int]], load: int) -> None:
    runs: SortedRuns[int, str] = SortedRuns(load)
    expected: list[int] = []
    for add, key in ops:
        if add and key not in expected:
            runs.add(key, f"v{key}")
            expected.append(key)
            expected.sort()
        elif not add and key in expected:
            assert runs.remove(key) == f"v{key}"
            expected.remove(key)
        elif not add:
            with pytest.raises(ValueError):
                runs.remove(key)
        values = [f"v{k}" for k in expected]
        assert list(runs) == values and len(runs) == len(values)
        stored = runs.runs()
        assert [v for run in stored for v in run] == values
        assert all(load // 2 <= len(run) <= 2 * load for run in stored[:-1] if len(stored) > 1)
        assert all(run for run in stored)
        for position, k in enumerate(expected):
            assert runs.index(k) == position
        for offset in (0, 1, len(values) // 2, len(values), len(values) + 2):
            assert list(runs.islice(offset)) == values[offset:]


def test_a_change_rewrites_only_the_run_it_lands_in() -> None:
    runs: SortedRuns[int, object] = SortedRuns(load=10)
    values = {k: object() for k in range(0, 400, 2)}
    for k, v in values.items():
        runs.add(k, v)
    before = [list(run) for run in runs.runs()]
    runs.add(201, object())
    after = runs.runs()
    changed = [
        i
        for i, run in enumerate(after)
        if i >= len(before)
        or len(run) != len(before[i])
        or any(a is not b for a, b in zip(run, before[i], strict=False))
    ]
    assert len(changed) == 1
    runs.remove(201)
    assert [list(run) for run in runs.runs()] == before


def test_a_missing_key_and_a_bad_load_are_refused() -> None:
    runs: SortedRuns[int, int] = SortedRuns(load=4)
    with pytest.raises(ValueError, match="not present"):
        runs.index(3)
    with pytest.raises(ValueError, match="load"):
        SortedRuns(load=1)
