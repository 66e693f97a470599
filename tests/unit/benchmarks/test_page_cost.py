"""The in-process page benchmark's request kinds answer as the benchmark expects.

`page_cost.py --asgi` (CPU time) and `--asgi --instructions` (valgrind's count) both run
these kinds through the real app; a kind that stopped answering 200/304/404 would make
either measure something else.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from benchmarks import page_cost

ROOT = Path(__file__).resolve().parents[3]
DEPTH = 300


def test_every_kind_answers_with_its_status() -> None:
    async def statuses() -> dict[str, int]:
        app = page_cost.bench_app(page_cost.bench_snapshot(DEPTH))
        kinds = await page_cost.request_kinds(app, DEPTH)
        return {
            kind: (await page_cost.call(app, *request(0)))[0] for kind, request in kinds.items()
        }

    got = asyncio.run(statuses())
    assert got == {
        "page, same page again (200)": 200,
        "page, 2000 offsets in turn (200)": 200,
        "If-None-Match (304)": 304,
        "/healthz (200)": 200,
        "unknown path (404)": 404,
    }


def test_the_counted_child_runs_one_kind() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "page_cost.py"),
            "--one-kind",
            "If-None-Match (304)",
            "--depth",
            str(DEPTH),
            "--requests",
            "5",
        ],
        capture_output=True,
        check=False,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
