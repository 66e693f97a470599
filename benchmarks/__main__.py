"""`python -m benchmarks NAME [sizes]` runs one benchmark; `all` runs every one.

Each prints its figures and, last, its headline as `NAME: VALUE UNIT`. With `--write`
(always on for `all`) the results are merged into docs/benchmarks.json and the
generated region of docs/benchmarks.md, and the latency plot is redrawn.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import report
from benchmarks.harness import machine
from benchmarks.result import Result
from benchmarks.suite import BENCHMARKS, Benchmark

DOCS = Path(__file__).resolve().parent.parent / "docs"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="name", required=True, metavar="NAME")
    for bench in [*BENCHMARKS.values()]:
        help_text = bench.summary + (
            f" [not available: {bench.unavailable}]" if bench.unavailable else ""
        )
        sp = sub.add_parser(bench.name, help=help_text, description=help_text)
        _common(sp)
        bench.add_arguments(sp)
    every = sub.add_parser("all", help="every available benchmark, then write the docs")
    _common(every)
    return p


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help="small sizes: under a minute each")
    p.add_argument(
        "--write", action="store_true", help="update docs/benchmarks.{md,json} and the plot"
    )
    p.add_argument(
        "--docs", type=Path, default=DOCS, help="folder of benchmarks.md (default: docs/)"
    )


def print_result(result: Result) -> None:
    print(f"\n== {result.name}: {result.command}")
    print("  " + " | ".join(result.columns))
    for row in result.rows:
        print("  " + " | ".join(row))
    for t in result.targets:
        print(f"  target {t.what}: {t.relation} {t.limit:g} {t.unit} -> {t.verdict}")
    print(result.headline_line(), flush=True)


def run(names: Sequence[str], args: argparse.Namespace) -> list[tuple[Result, dict[str, Any]]]:
    """Run the benchmarks; each result with the machine as it was when it started."""
    results = []
    for name in names:
        bench: Benchmark = BENCHMARKS[name]
        if bench.run is None:
            print(f"{name}: not available: {bench.unavailable}", flush=True)
            continue
        resolved = bench.resolve(args)
        info = machine()
        result = bench.run(resolved)
        print_result(result)
        results.append((result, info))
    return results


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.name == "all":
        names = list(BENCHMARKS)
        args.write = True
    else:
        names = [args.name]
        if BENCHMARKS[args.name].run is None:
            print(f"{args.name}: not available: {BENCHMARKS[args.name].unavailable}")
            return 2
    results = run(names, args)
    if args.write and results:
        docs: Path = args.docs
        json_path = docs / "benchmarks.json"
        document = report.load(json_path)
        date = datetime.date.today().isoformat()
        for result, info in results:
            report.merge(document, result, date=date, machine=info)
        pending = {b.name: b.unavailable for b in BENCHMARKS.values() if b.run is None}
        report.write(
            document, json_path, docs / "benchmarks.md", docs / "benchmarks-latency.png", pending
        )
        print(f"wrote {docs / 'benchmarks.md'} and {json_path}", file=sys.stderr)
    if args.name == "all" and results:
        # `all` ends with every headline, one per line, so the last lines stay greppable.
        for result, _ in results:
            print(result.headline_line())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
