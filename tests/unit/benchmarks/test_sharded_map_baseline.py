"""ShardedMap: an immutable mapping whose next version shares untouched shards."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.sharded_map_baseline import SHARDS, ShardedMap

ops = st.lists(
    st.tuples(st.booleans(), st.integers(0, 300), st.integers()),
    max_size=200,
)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.integers(0, 300), st.integers(), max_size=100), ops)
def test_versions_behave_like_dicts_and_never_change(
    start: dict[int, int], changes: list[tuple[bool, int, int]]
) -> None:
    base = ShardedMap.from_pairs(start)
    editor = base.edit()
    model = dict(start)
    for is_set, key, value in changes:
        if is_set:
            editor.set(key, value)
            model[key] = value
        else:
            editor.delete(key)
            model.pop(key, None)
        assert editor.get(key) == model.get(key)
    after = editor.finish()
    assert dict(after) == model
    assert len(after) == len(model)
    assert all(after.get(k) == v and k in after and after[k] == v for k, v in model.items())
    # The base version is untouched by the edits.
    assert dict(base) == start
    assert len(base) == len(start)


def test_untouched_shards_are_shared_and_missing_keys_behave() -> None:
    base = ShardedMap.from_pairs({i: str(i) for i in range(5 * SHARDS)})
    editor = base.edit()
    editor.set(7, "seven")
    editor.delete(10**9)  # absent: nothing happens
    after = editor.finish()
    shared = sum(a is b for a, b in zip(base._shards, after._shards, strict=True))
    assert shared == SHARDS - 1
    assert after[7] == "seven" and base[7] == "7"
    assert after.get(10**9) is None and after.get(10**9, "x") == "x"
    assert 10**9 not in after
    try:
        after[10**9]
    except KeyError:
        pass
    else:
        raise AssertionError("a missing key must raise KeyError")
    empty: ShardedMap[str, int] = ShardedMap()
    assert len(empty) == 0 and list(empty) == [] and "a" not in empty
