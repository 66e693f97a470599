"""The snapshot's lookup maps: `ShardedMap` against `immutables.Map` (a HAMT in C) and a
copied dict, on the operations a publish and a request make (docs/benchmarks.md,
"Snapshot maps: ShardedMap or immutables.Map").

    python -m benchmarks.snapshot_maps [--entries N] [--changes K ...] [--rounds R]

Per map kind, with N entries (workload key -> ClusterQueue name, as the snapshot holds):

* build: the map from N pairs (the first publish);
* version: the next version after K changes (a publish after K arrivals), CPU per version;
* young pass: a generation-0 collection right after that version was made, with the
  older versions frozen as `serve` freezes long-lived data (what the loop pays when the
  collector runs between steps);
* get: one look-up of a present key (a position request);
* memory: traced bytes per entry of one version.

CPU is `time.process_time`, the median of R rounds; the machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import immutables

from benchmarks.sharded_map_baseline import ShardedMap

Pairs = dict[str, str]


@dataclass(frozen=True)
class MapKind:
    name: str
    build: Callable[[Pairs], Any]
    change: Callable[[Any, Sequence[tuple[str, str]]], Any]


def _sharded_change(m: ShardedMap[str, str], changes: Sequence[tuple[str, str]]) -> Any:
    editor = m.edit()
    for key, value in changes:
        editor.set(key, value)
    return editor.finish()


def _hamt_change(m: immutables.Map[str, str], changes: Sequence[tuple[str, str]]) -> Any:
    with m.mutate() as mutation:
        for key, value in changes:
            mutation[key] = value
        return mutation.finish()


def _dict_change(m: dict[str, str], changes: Sequence[tuple[str, str]]) -> Any:
    copy = dict(m)
    copy.update(changes)
    return copy


KINDS = (
    MapKind("ShardedMap", ShardedMap.from_pairs, _sharded_change),
    MapKind("immutables.Map", immutables.Map, _hamt_change),
    MapKind("dict copy", dict, _dict_change),
)


def _cpu(fn: Callable[[], Any], rounds: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(rounds):
        start = time.process_time()
        out = fn()
        times.append(time.process_time() - start)
    return statistics.median(times), out


def _young_pass(kind: MapKind, base: Any, changes: Sequence[tuple[str, str]]) -> float:
    gc.collect()
    gc.freeze()
    try:
        kind.change(base, changes)  # a version kept alive by nothing: the young objects
        newer = kind.change(base, changes)
        start = time.process_time()
        gc.collect(0)
        spent = time.process_time() - start
        del newer
        return spent
    finally:
        gc.unfreeze()


def _memory(kind: MapKind, pairs: Pairs) -> float:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = kind.build(pairs)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    return (after - before) / len(pairs)


def run(entries: int, change_counts: Sequence[int], rounds: int) -> list[list[str]]:
    rng = random.Random(1)
    keys = [f"team-{i % 97}/workload-{i:07d}" for i in range(entries)]
    pairs = {key: f"cq-{rng.randrange(20)}" for key in keys}
    probes = [rng.choice(keys) for _ in range(100_000)]
    return [_row(kind, pairs, probes, change_counts, rounds) for kind in KINDS]


def _row(
    kind: MapKind, pairs: Pairs, probes: list[str], change_counts: Sequence[int], rounds: int
) -> list[str]:
    build_cpu, base = _cpu(partial(kind.build, pairs), rounds)
    row = [kind.name, f"{build_cpu * 1e3:.1f} ms"]
    for k in change_counts:
        changes = [(f"team-x/new-{i:07d}", "cq-0") for i in range(k)]
        version_cpu, _ = _cpu(partial(kind.change, base, changes), rounds)
        young = statistics.median(_young_pass(kind, base, changes) for _ in range(rounds))
        row += [f"{version_cpu * 1e3:.2f} ms", f"{young * 1e3:.2f} ms"]
    get_cpu, _ = _cpu(partial(_get_all, base, probes), rounds)
    row += [f"{get_cpu / len(probes) * 1e9:.0f} ns", f"{_memory(kind, pairs):.0f} B"]
    return row


def _get_all(m: Any, probes: list[str]) -> list[Any]:
    return [m.get(p) for p in probes]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.snapshot_maps", description=__doc__)
    p.add_argument("--entries", type=int, default=100_000)
    p.add_argument("--changes", type=int, nargs="+", default=[100, 1000])
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args(argv)
    header = ["map", f"build {args.entries:,}"]
    for k in args.changes:
        header += [f"version after {k:,} changes", f"young pass after {k:,}"]
    header += ["get", "memory per entry"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in run(args.entries, args.changes, args.rounds):
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
