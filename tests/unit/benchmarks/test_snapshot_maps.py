"""The snapshot-map trial compares like with like: every kind builds and changes to the
same contents."""

from __future__ import annotations

from benchmarks.snapshot_maps import KINDS, run


def test_every_kind_holds_the_same_pairs_after_a_change() -> None:
    pairs = {f"ns/w{i}": f"cq-{i % 3}" for i in range(1000)}
    changes = [("ns/w1", "cq-9"), ("ns/new", "cq-0")]
    expected = {**pairs, **dict(changes)}
    for kind in KINDS:
        base = kind.build(pairs)
        changed = kind.change(base, changes)
        assert dict(changed.items()) == expected, kind.name
        assert dict(base.items()) == pairs, kind.name  # the old version is untouched


def test_a_small_run_reports_every_column() -> None:
    rows = run(2000, [10], rounds=1)
    assert [row[0] for row in rows] == [kind.name for kind in KINDS]
    assert all(len(row) == 6 for row in rows)
