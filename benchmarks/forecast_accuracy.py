"""`python -m benchmarks forecast-accuracy`: how right start-time forecasts are on real
traces (docs/benchmarks.md#forecast-accuracy-how-it-is-measured).

Each trace of the traces folder beside the checkout (docs/simulate.md, "Importing
traces") is imported (`queuescope trace import`) and replayed with
`queuescope simulate --record-forecasts` once per method, one process at a time
(one core each); the WorkloadForecast items of each replay are scored by
benchmarks/forecast_metrics.py. The traces are third-party data: read where they lie,
never copied into the repository.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.forecast_metrics import (
    BAND_QUANTILES,
    Accuracy,
    Forecast,
    accuracy,
    error_ratio,
    parse_forecasts,
)
from benchmarks.result import Result, Target, format_number

ROOT = Path(__file__).resolve().parent.parent
TRACES_DIR = ROOT.parent / "shared" / "traces"
METHODS = ("forecast", "walltime", "rate")
SCATTER_PLOT = "benchmarks-forecast-scatter.png"
CALIBRATION_PLOT = "benchmarks-forecast-calibration.png"
# The `queuescope` command, run as a module of this checkout's interpreter.
QUEUESCOPE = (sys.executable, "-m", "queuescope.cli")
KTH_REPLAY_LIMIT_S = 600.0  # issue 15: KTH-SP2 replayed with forecasts in under 10 minutes


@dataclass(frozen=True, slots=True)
class TraceSpec:
    name: str
    format: str  # `queuescope trace import` format
    path: str  # relative to the traces folder


TRACES = {
    "kth-sp2": TraceSpec("kth-sp2", "swf", "pwa-kth-sp2/KTH-SP2-1996-2.1-cln.swf.gz"),
    "wagap-2013": TraceSpec("wagap-2013", "swf", "metacentrum-wagap-2013/wagap-2013.swf.gz"),
}


def names(value: str) -> list[str]:
    """A comma-separated list of names (traces or methods)."""
    out = [part.strip() for part in value.split(",") if part.strip()]
    if not out:
        raise argparse.ArgumentTypeError(f"no names in {value!r}")
    return out


def forecaster_present() -> bool:
    """Whether this checkout has the forecaster at all (cheap: no process started)."""
    return importlib.util.find_spec("scheduler.forecast") is not None


class ForecastsUnavailableError(RuntimeError):
    """The simulator of this checkout cannot record forecasts (the forecaster is absent)."""


def supports_forecasts(simulate_help: str) -> bool:
    return "--record-forecasts" in simulate_help and "--forecast-method" in simulate_help


def _simulate_help() -> str:
    done = subprocess.run(
        [*QUEUESCOPE, "simulate", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout


def require_forecasts(simulate_help: str) -> None:
    if not supports_forecasts(simulate_help):
        raise ForecastsUnavailableError(
            "`queuescope simulate` of this checkout has no --record-forecasts/--forecast-method "
            "(issue 15 part 1, the forecaster, is not merged): nothing to measure"
        )


@dataclass(slots=True)
class Replay:
    trace: str
    method: str
    workloads: int
    forecasts: list[Forecast]
    wall_s: float
    cpu_s: float
    max_rss_mib: float


Results = dict[tuple[str, str], tuple[Replay, Accuracy]]  # (trace, method) -> figures


def import_trace(spec: TraceSpec, traces_dir: Path, limit: int, out: Path) -> tuple[int, float]:
    """Write the trace's scenario to `out`; (workloads, seconds) of the import."""
    args = ["trace", "import", spec.format, str(traces_dir / spec.path), "--name", spec.name]
    args += ["-o", str(out)]
    if limit:
        args += ["--limit", str(limit)]
    started = time.perf_counter()
    done = subprocess.run([*QUEUESCOPE, *args], capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"import of {spec.name} failed: {done.stderr.strip()}")
    print(done.stderr.strip(), flush=True)
    workloads = sum(1 for line in out.read_text().splitlines() if line.startswith("  - {"))
    return workloads, elapsed


def replay(
    trace: str, scenario: Path, method: str, workdir: Path, queuescope: Sequence[str] = QUEUESCOPE
) -> Replay:
    """One `simulate --record-forecasts` process: its forecasts, wall and CPU time."""
    output = workdir / f"{trace}-{method}.json"
    command = [*queuescope, "simulate", str(scenario)]
    command += ["--record-forecasts", "--forecast-method", method, "-o", "json"]
    started = time.perf_counter()
    with output.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.PIPE)
        assert process.stderr is not None
        errors = process.stderr.read()
        _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(
            f"simulate {trace} --forecast-method {method} exited {process.returncode}: "
            f"{errors.decode(errors='replace').strip()[-2000:]}"
        )
    items = json.loads(output.read_bytes()).get("items", [])
    forecasts = parse_forecasts(items)
    workloads = sum(1 for i in items if i.get("kind") == "Workload")
    return Replay(
        trace,
        method,
        workloads,
        forecasts,
        wall,
        usage.ru_utime + usage.ru_stime,
        usage.ru_maxrss / 1024,
    )


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _s(value: float | None) -> str:
    return "n/a" if value is None else f"{format_number(value)} s"


def _row(r: Replay, a: Accuracy) -> list[str]:
    return [
        r.trace,
        r.method,
        f"{a.forecasts:,} ({a.resolved:,} started)",
        _pct(a.coverage),
        _s(a.p50_abs_error),
        "n/a" if a.p50_log_ratio is None else f"{a.p50_log_ratio:.2f}",
        _s(a.band_width),
        f"{format_number(r.wall_s)} s",
        f"{format_number(r.cpu_s)} s",
        f"{r.max_rss_mib:,.0f} MiB",
    ]


def _targets(results: Results, limit: int) -> list[Target]:
    targets: list[Target] = []
    for trace in sorted({t for t, _ in results}):
        forecast = results.get((trace, "forecast"))
        walltime = results.get((trace, "walltime"))
        coverage = forecast[1].coverage if forecast else None
        value = None if coverage is None else 100 * coverage
        targets.append(Target(f"{trace}: 90% band coverage", value, ">=", 85, "%"))
        targets.append(Target(f"{trace}: 90% band coverage", value, "<=", 95, "%"))
        ratio = error_ratio(forecast[1], walltime[1]) if forecast and walltime else None
        targets.append(
            Target(f"{trace}: p50 median error / walltime method's", ratio, "<=", 0.7, "")
        )
    kth = results.get(("kth-sp2", "forecast"))
    wall = kth[0].wall_s if kth and not limit else None
    targets.append(Target("kth-sp2 full replay with forecasts", wall, "<", KTH_REPLAY_LIMIT_S, "s"))
    return targets


COLORS = {"forecast": "tab:blue", "walltime": "tab:red", "rate": "tab:green"}
NOTHING_SCORED = "no forecast with an actual wait:\nevery workload started on arrival"


def _of(results: Results, trace: str) -> list[tuple[str, Replay, Accuracy]]:
    return [(m, r, a) for (t, m), (r, a) in sorted(results.items()) if t == trace]


def _scatter_panel(ax: Any, trace: str, results: Results) -> None:
    drawn = False
    for method, replay_, _ in _of(results, trace):
        points = [(f.actual + 1, f.p50 + 1) for f in replay_.forecasts if f.actual is not None]
        if points:
            xs, ys = zip(*points, strict=True)
            ax.scatter(xs, ys, s=3, alpha=0.3, color=COLORS.get(method), label=method)
            drawn = True
    ax.set_xscale("log")
    ax.set_yscale("log")
    lo, hi = ax.get_xlim()
    ax.plot([lo, hi], [lo, hi], color="gray", linewidth=0.8, linestyle=":")
    ax.set_xlabel("actual wait + 1 (s)")
    ax.set_ylabel("predicted p50 + 1 (s)")
    ax.set_title(f"{trace}: predicted against actual wait")
    if drawn:
        ax.legend(fontsize=8, markerscale=4)
    else:
        ax.text(0.5, 0.5, NOTHING_SCORED, ha="center", va="center", transform=ax.transAxes)


def _calibration_panel(ax: Any, trace: str, results: Results) -> None:
    drawn = False
    for method, _, acc in _of(results, trace):
        if acc.calibration:
            qs, shares = zip(*acc.calibration, strict=True)
            ax.plot(qs, shares, "o-", color=COLORS.get(method), label=method)
            drawn = True
    ax.plot([0, 1], [0, 1], color="gray", linewidth=0.8, linestyle=":", label="calibrated")
    ax.set_xticks(BAND_QUANTILES)
    ax.set_xlabel("predicted quantile (low, p50, high)")
    ax.set_ylabel("share of actual waits at or below it")
    ax.set_title(f"{trace}: calibration")
    ax.legend(fontsize=8)
    if not drawn:
        ax.text(0.5, 0.5, NOTHING_SCORED, ha="center", va="center", transform=ax.transAxes)


def plot(results: Results, docs: Path) -> list[str]:
    """The scatter (p50 against actual) and calibration plots; the file names written."""
    try:
        import matplotlib  # noqa: PLC0415 (optional: the bench extra)

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return []
    traces = sorted({t for t, _ in results})
    if not traces:
        return []
    for name, panel, width in (
        (SCATTER_PLOT, _scatter_panel, 6),
        (CALIBRATION_PLOT, _calibration_panel, 5),
    ):
        fig, axes = plt.subplots(
            1, len(traces), figsize=(width * len(traces), 4.8), dpi=100, squeeze=False
        )
        for ax, trace in zip(axes[0], traces, strict=True):
            panel(ax, trace, results)
        fig.tight_layout()
        fig.savefig(docs / name)
        plt.close(fig)
    return [SCATTER_PLOT, CALIBRATION_PLOT]


def _check_names(given: Sequence[str], known: Sequence[str], what: str) -> None:
    unknown = [n for n in given if n not in known]
    if unknown:
        raise SystemExit(
            f"forecast-accuracy: unknown {what} {', '.join(unknown)}; known: {', '.join(known)}"
        )


def forecast_accuracy(args: argparse.Namespace) -> Result:
    _check_names(args.traces, list(TRACES), "trace")
    _check_names(args.methods, METHODS, "method")
    try:
        require_forecasts(_simulate_help())
    except ForecastsUnavailableError as err:
        raise SystemExit(f"forecast-accuracy: {err}") from None
    traces_dir = Path(args.traces_dir)
    if not traces_dir.is_dir():
        raise SystemExit(f"forecast-accuracy: no traces folder {traces_dir} (see --traces-dir)")
    results: Results = {}
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="forecast-accuracy-") as tmp:
        workdir = Path(tmp)
        for trace in args.traces:
            scenario = workdir / f"{trace}.yaml"
            workloads, seconds = import_trace(TRACES[trace], traces_dir, args.limit, scenario)
            notes.append(f"{trace}: {workloads:,} workloads imported in {seconds:.1f} s.")
            for method in args.methods:
                print(f"replaying {trace} with --forecast-method {method}", flush=True)
                r = replay(trace, scenario, method, workdir)
                results[(trace, method)] = (r, accuracy(r.forecasts))
    rows = [_row(r, a) for r, a in results.values()]
    written = plot(results, Path(args.docs)) if getattr(args, "write", False) else []
    notes += [f"![{name.removesuffix('.png')}]({name})" for name in written]
    targets = _targets(results, args.limit)
    head = results.get((args.traces[0], "forecast"))
    coverage = head[1].coverage if head else None
    return Result(
        name="forecast-accuracy",
        headline=float("nan") if coverage is None else 100 * coverage,
        unit="%",
        headline_label=f"90% band coverage of the forecast method on {args.traces[0]}",
        command=_command(args),
        columns=[
            "trace",
            "method",
            "forecasts",
            "band coverage",
            "p50 median |error|",
            "p50 median |log ratio|",
            "median band width",
            "replay wall",
            "replay CPU",
            "peak RSS",
        ],
        rows=rows,
        targets=targets,
        notes=notes,
        figures={
            f"{t}/{m}": {
                **a.to_json(),
                "workloads": r.workloads,
                "wall_s": r.wall_s,
                "cpu_s": r.cpu_s,
                "max_rss_mib": r.max_rss_mib,
            }
            for (t, m), (r, a) in results.items()
        },
    )


def _command(args: argparse.Namespace) -> str:
    from benchmarks.suite import BENCHMARKS  # noqa: PLC0415 (the registry imports this module)

    return BENCHMARKS["forecast-accuracy"].command(args)
