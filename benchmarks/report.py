"""docs/benchmarks.md's generated region, the raw figures (JSON) and the latency plot.

The page keeps its hand-written sections; only the text between the two markers is
replaced. Results accumulate in the JSON file by benchmark name, so running one
benchmark with `--write` updates its part and leaves the others as they were.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmarks.result import Result, format_number

BEGIN = "<!-- BEGIN GENERATED: python -m benchmarks (do not edit by hand) -->"
END = "<!-- END GENERATED -->"


def _table(columns: list[str], rows: list[list[str]]) -> list[str]:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return [line(columns), "|" + "---|" * len(columns), *(line(r) for r in rows)]


def render(runs: Mapping[str, Any], pending: Mapping[str, str], plot: str | None) -> str:
    """Markdown for the generated region from the JSON document's `results`."""
    out: list[str] = []
    results = {name: Result.from_json(r["result"]) for name, r in runs.items()}
    summary_rows = []
    for name, result in results.items():
        for t in result.targets:
            value = "n/a" if t.value is None else f"{format_number(t.value)} {t.unit}".strip()
            limit = f"{t.relation} {format_number(t.limit)} {t.unit}".strip()
            summary_rows.append([name, t.what, limit, value, t.verdict])
    for name, why in pending.items():
        summary_rows.append(
            [name, "all", "see docs/performance.md", "not run", f"not built yet: {why}"]
        )
    out += ["## Targets: met or missed", ""]
    out += _table(["benchmark", "figure", "target", "measured", "verdict"], summary_rows)
    out.append("")
    for name, result in results.items():
        run = runs[name]
        m = run["machine"]
        out += [f"## `{name}`", ""]
        out.append(
            f"Headline: **{result.headline_line()}** ({result.headline_label}). "
            f"Measured {run['date']} on {m['cpu_model']}, {m['cpus']} CPUs, "
            f"{m['memory_gib']} GiB, Python {m['python']}, load average "
            f"{m.get('load_average_1m', 'n/a')} at the start. Command: `{result.command}`."
        )
        out.append("")
        out += _table(result.columns, result.rows)
        out.append("")
        out += [note + "\n" for note in result.notes]
        if name == "visibility-latency" and plot:
            out += [f"![p50 and p99 latency against queue depth, ours and baseline]({plot})", ""]
    return "\n".join(out).rstrip() + "\n"


def replace_region(page: str, generated: str) -> str:
    """The page with the text between the markers replaced (markers appended if absent)."""
    block = f"{BEGIN}\n\n{generated}\n{END}"
    start, end = page.find(BEGIN), page.find(END)
    if start == -1 or end == -1 or end < start:
        return page.rstrip() + "\n\n" + block + "\n"
    return page[:start] + block + page[end + len(END) :]


def load(path: Path) -> dict[str, Any]:
    if path.exists():
        data: dict[str, Any] = json.loads(path.read_text())
        return data
    return {"results": {}}


def merge(document: dict[str, Any], result: Result, *, date: str, machine: dict[str, Any]) -> None:
    document.setdefault("results", {})[result.name] = {
        "date": date,
        "machine": machine,
        "result": result.to_json(),
    }


def latency_series(document: Mapping[str, Any]) -> dict[str, list[tuple[int, float, float]]]:
    """{side: [(depth, p50, p99), ...]} from a visibility-latency result."""
    run = document.get("results", {}).get("visibility-latency")
    series: dict[str, list[tuple[int, float, float]]] = {"ours": [], "baseline": []}
    if run is None:
        return series
    for depth, f in sorted(run["result"]["figures"].items(), key=lambda kv: int(kv[0])):
        for side, points in series.items():
            lat = f[side]["latency_ms"]
            if lat.get("count"):
                points.append((int(depth), float(lat["p50"]), float(lat["p99"])))
    return series


def plot_latency(document: Mapping[str, Any], path: Path) -> bool:
    """Write the latency plot (PNG); False when matplotlib or the data is missing."""
    series = latency_series(document)
    if not series["ours"]:
        return False
    try:
        import matplotlib  # noqa: PLC0415 (optional: the bench extra)

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    styles = {"ours": ("tab:blue", "queuescope"), "baseline": ("tab:red", "upstream-equivalent")}
    for side, points in series.items():
        if not points:
            continue
        color, label = styles[side]
        xs = [p[0] for p in points]
        ax.plot(xs, [p[1] for p in points], "o-", color=color, label=f"{label} p50")
        ax.plot(xs, [p[2] for p in points], "s--", color=color, alpha=0.6, label=f"{label} p99")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("pending workloads in the ClusterQueue")
    ax.set_ylabel("latency of a 100-item page (ms)")
    ax.set_title("visibility-latency: HTTPS, keep-alive, random offsets")
    ax.axhline(5.0, color="gray", linewidth=0.8, linestyle=":", label="p99 target (5 ms)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return True


def write(
    document: dict[str, Any],
    json_path: Path,
    page_path: Path,
    plot_path: Path,
    pending: Mapping[str, str],
) -> None:
    json_path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    plotted = plot_latency(document, plot_path)
    relative = plot_path.name if plot_path.parent == page_path.parent else str(plot_path)
    generated = render(document.get("results", {}), pending, relative if plotted else None)
    page = page_path.read_text() if page_path.exists() else "# Benchmarks\n"
    page_path.write_text(replace_region(page, generated))
