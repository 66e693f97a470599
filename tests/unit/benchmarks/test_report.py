from __future__ import annotations

import json
from pathlib import Path

from benchmarks import report
from benchmarks.result import Result, Target

MACHINE = {
    "cpu_model": "Test CPU",
    "cpus": 2,
    "memory_gib": 4.0,
    "python": "3.11.7",
    "load_average_1m": 3.5,
}


def _latency(figures: dict[str, object]) -> Result:
    return Result(
        name="visibility-latency",
        headline=50.0,
        unit="x",
        headline_label="baseline/ours",
        command="python -m benchmarks visibility-latency --depths 1000,100000",
        columns=["pending (N)", "ours p99"],
        rows=[["1,000", "1 ms"], ["100,000", "2 ms"]],
        targets=[
            Target("our p99 at N=100k", 2.0, "<", 5.0, "ms"),
            Target("growth", None, "<", 2.0, "x"),
        ],
        notes=["a note"],
        figures=figures,
    )


def _figures() -> dict[str, object]:
    def side(p50: float, p99: float) -> dict[str, object]:
        return {"latency_ms": {"count": 10, "p50": p50, "p99": p99}}

    return {
        "100000": {"ours": side(1.5, 2.0), "baseline": side(75.0, 90.0)},
        "1000": {"ours": side(1.0, 1.2), "baseline": side(2.0, 3.0)},
    }


def test_replace_region_keeps_the_hand_written_text() -> None:
    page = f"# Title\n\nintro\n\n{report.BEGIN}\nold\n{report.END}\n\n## What we tried\n\nkept\n"
    out = report.replace_region(page, "new table\n")
    assert out.startswith("# Title\n\nintro\n\n")
    assert "old" not in out
    assert "new table" in out
    assert out.endswith("## What we tried\n\nkept\n")
    assert report.replace_region(out, "newer\n").count(report.BEGIN) == 1


def test_replace_region_appends_markers_when_absent() -> None:
    out = report.replace_region("# Title\n", "table\n")
    assert (
        out.index("# Title") < out.index(report.BEGIN) < out.index("table") < out.index(report.END)
    )


def test_render_lists_targets_machine_date_command_and_pending_benchmarks() -> None:
    document: dict[str, object] = {}
    report.merge(document, _latency(_figures()), date="2026-11-22", machine=MACHINE)
    text = report.render(document["results"], {"cluster-sync": "needs the kube store"}, "plot.png")  # type: ignore[arg-type]
    assert "| visibility-latency | our p99 at N=100k | < 5.00 ms | 2.00 ms | met |" in text
    assert "| visibility-latency | growth | < 2.00 x | n/a | not measured |" in text
    assert "cluster-sync" in text and "needs the kube store" in text
    assert "2026-11-22" in text and "Test CPU" in text
    assert "load average 3.5 at the start" in text
    assert "`python -m benchmarks visibility-latency --depths 1000,100000`" in text
    assert "**visibility-latency: 50.0 x**" in text
    assert "![p50 and p99 latency" in text and "(plot.png)" in text


def test_latency_series_is_sorted_by_depth() -> None:
    document: dict[str, object] = {}
    report.merge(document, _latency(_figures()), date="d", machine=MACHINE)
    series = report.latency_series(document)
    assert series["ours"] == [(1000, 1.0, 1.2), (100_000, 1.5, 2.0)]
    assert series["baseline"] == [(1000, 2.0, 3.0), (100_000, 75.0, 90.0)]


def test_write_merges_results_and_keeps_other_benchmarks(tmp_path: Path) -> None:
    page = tmp_path / "benchmarks.md"
    page.write_text(f"# B\n\n{report.BEGIN}\n{report.END}\n\n## Tried\n")
    json_path = tmp_path / "benchmarks.json"
    document = report.load(json_path)
    other = Result("memory", 1.0, "KiB/workload", "m", "cmd", ["a"], [["b"]], [], [], {})
    report.merge(document, other, date="d1", machine=MACHINE)
    report.merge(document, _latency(_figures()), date="d2", machine=MACHINE)
    report.write(document, json_path, page, tmp_path / "benchmarks-latency.png", {})
    saved = json.loads(json_path.read_text())
    assert set(saved["results"]) == {"memory", "visibility-latency"}
    text = page.read_text()
    assert text.endswith("## Tried\n")
    assert "## `memory`" in text and "## `visibility-latency`" in text
    assert (tmp_path / "benchmarks-latency.png").read_bytes().startswith(b"\x89PNG")
