"""The forecast-accuracy benchmark: metrics on synthetic WorkloadForecast items, the
replay driver against a stand-in simulator, the plots, the missing-forecaster message."""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks import forecast_accuracy as fa
from benchmarks.forecast_metrics import (
    Forecast,
    ForecastParseError,
    accuracy,
    error_ratio,
    log_ratio,
    parse_forecasts,
)


def item(name: str, low: float, p50: float, high: float, actual: float | None) -> dict[str, Any]:
    return {
        "apiVersion": "simulation.queuescope.io/v1alpha1",
        "kind": "WorkloadForecast",
        "metadata": {"namespace": "user-1", "name": name},
        "madeAt": "1996-09-30T10:38:01Z",
        "method": "forecast",
        "waitSeconds": {"low": low, "p50": p50, "high": high},
        "actualWaitSeconds": actual,
    }


ITEMS = [
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload", "metadata": {"name": "w"}},
    item("a", 0, 10, 100, 50),  # inside, error 40
    item("b", 0, 10, 20, 30),  # above, error 20
    item("c", 100, 200, 300, 50),  # below, error 150
    item("d", 0, 0, 0, 0),  # inside, exact
    item("e", 0, 60, 600, None),  # never started: counted, not scored
]


def test_parse_keeps_only_forecasts_in_order() -> None:
    forecasts = parse_forecasts(ITEMS)
    assert [f.name for f in forecasts] == ["a", "b", "c", "d", "e"]
    assert forecasts[0] == Forecast(
        "user-1", "a", "1996-09-30T10:38:01Z", "forecast", 0.0, 10.0, 100.0, 50.0
    )
    assert forecasts[-1].actual is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"apiVersion": "v1"}, r"items\[0\].apiVersion: expected simulation.queuescope.io"),
        ({"waitSeconds": None}, r"items\[0\].waitSeconds: expected \{low, p50, high\}"),
        ({"waitSeconds": {"low": 0, "p50": "1", "high": 2}}, r"waitSeconds.p50: expected a number"),
        ({"waitSeconds": {"low": 5, "p50": 1, "high": 2}}, "expected low <= p50 <= high"),
        ({"actualWaitSeconds": -3}, r"items\[0\].actualWaitSeconds: negative wait"),
        ({"metadata": {}}, r"items\[0\].metadata: expected namespace and name"),
    ],
)
def test_parse_names_the_bad_field(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ForecastParseError, match=message):
        parse_forecasts([{**item("a", 0, 1, 2, 1), **change}])


def test_a_missing_actual_is_an_error_not_a_null() -> None:
    bad = item("a", 0, 1, 2, 1)
    del bad["actualWaitSeconds"]
    with pytest.raises(ForecastParseError, match="actualWaitSeconds: missing"):
        parse_forecasts([bad])


def test_accuracy_figures() -> None:
    acc = accuracy(parse_forecasts(ITEMS))
    assert (acc.forecasts, acc.resolved) == (5, 4)
    assert acc.coverage == 0.5
    assert (acc.below_band, acc.above_band) == (0.25, 0.25)
    assert acc.p50_abs_error == 30.0  # median of 40, 20, 150, 0
    ratios = sorted([log_ratio(10, 50), log_ratio(10, 30), log_ratio(200, 50), 0.0])
    assert acc.p50_log_ratio == pytest.approx((ratios[1] + ratios[2]) / 2)
    assert acc.band_width == 100.0  # median of 100, 20, 200, 0, 600
    # share of actuals at or below low, p50, high: {c, d} / {c, d} / {a, c, d}
    assert acc.calibration == ((0.05, 0.5), (0.5, 0.5), (0.95, 0.75))
    assert acc.to_json()["p50_abs_error_seconds"] == 30.0


def test_no_forecasts_or_none_resolved_gives_no_figures() -> None:
    empty = accuracy([])
    assert (empty.forecasts, empty.coverage, empty.p50_abs_error, empty.band_width) == (
        0,
        None,
        None,
        None,
    )
    assert empty.calibration == ()
    pending = accuracy(parse_forecasts([item("e", 0, 1, 2, None)]))
    assert (pending.resolved, pending.coverage, pending.band_width) == (0, None, 2.0)


def test_log_ratio_and_error_ratio() -> None:
    assert log_ratio(0, 0) == 0
    assert log_ratio(1, 3) == pytest.approx(math.log(2))
    assert log_ratio(3, 1) == log_ratio(1, 3)
    good = accuracy(parse_forecasts([item("a", 0, 10, 20, 17)]))
    bad = accuracy(parse_forecasts([item("a", 0, 0, 20, 10)]))
    assert error_ratio(good, bad) == pytest.approx(0.7)
    exact = accuracy(parse_forecasts([item("a", 0, 5, 20, 5)]))
    assert error_ratio(good, exact) == math.inf
    assert error_ratio(exact, exact) == 1.0
    assert error_ratio(accuracy([]), good) is None


@given(
    st.lists(
        st.tuples(
            st.floats(0, 1e6), st.floats(0, 1e6), st.floats(0, 1e6), st.none() | st.floats(0, 1e6)
        ),
        max_size=40,
    )
)
def test_figures_stay_in_range(rows: list[tuple[float, float, float, float | None]]) -> None:
    items = [item(str(i), *sorted(r[:3]), r[3]) for i, r in enumerate(rows)]
    acc = accuracy(parse_forecasts(items))
    assert acc.resolved == sum(1 for r in rows if r[3] is not None)
    for share in (acc.coverage, acc.below_band, acc.above_band):
        assert share is None or 0 <= share <= 1
    if acc.coverage is not None:
        assert acc.coverage + (acc.below_band or 0) + (acc.above_band or 0) == pytest.approx(1)
        shares = [s for _, s in acc.calibration]
        assert shares == sorted(shares)  # low <= p50 <= high


def test_missing_forecaster_is_a_clear_message() -> None:
    assert not fa.supports_forecasts("usage: queuescope simulate PATH [--cycles N]")
    assert fa.supports_forecasts("--record-forecasts ... --forecast-method {forecast,rate}")
    with pytest.raises(fa.ForecastsUnavailableError, match="no --record-forecasts"):
        fa.require_forecasts("usage: queuescope simulate PATH")


def test_benchmark_stops_with_the_reason_when_simulate_cannot_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fa, "_simulate_help", lambda: "usage: queuescope simulate PATH")
    args = argparse.Namespace(
        traces=["kth-sp2"], methods=["forecast"], limit=10, traces_dir="/nowhere", docs="docs"
    )
    with pytest.raises(SystemExit, match=r"forecast-accuracy: .*the forecaster.* is not merged"):
        fa.forecast_accuracy(args)
    args.methods = ["psychic"]
    with pytest.raises(SystemExit, match="unknown method psychic"):
        fa.forecast_accuracy(args)


STAND_IN = """
import json, sys
method = sys.argv[sys.argv.index("--forecast-method") + 1]
items = [{"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload", "metadata": {"name": "w"}}]
items += ITEMS
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
"""


def _stand_in(tmp_path: Path) -> list[str]:
    """A `queuescope` that answers `simulate` with the synthetic items above."""
    script = tmp_path / "fake_queuescope.py"
    script.write_text(f"ITEMS = {json.dumps(ITEMS[1:])!s}\n".replace("null", "None") + STAND_IN)
    return [sys.executable, str(script)]


def test_replay_runs_a_process_and_scores_its_output(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text("")
    r = fa.replay("t", scenario, "walltime", tmp_path, _stand_in(tmp_path))
    assert (r.trace, r.method, r.workloads) == ("t", "walltime", 1)
    assert [f.name for f in r.forecasts] == ["a", "b", "c", "d", "e"]
    assert r.wall_s > 0 and r.cpu_s > 0 and r.max_rss_mib > 0
    failing = [sys.executable, "-c", "import sys; sys.exit('boom')"]
    with pytest.raises(RuntimeError, match="exited 1: boom"):
        fa.replay("t", scenario, "walltime", tmp_path, failing)


def test_targets_and_plots(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text("")
    results = {}
    for method in ("forecast", "walltime"):
        r = fa.replay("kth-sp2", scenario, method, tmp_path, _stand_in(tmp_path))
        results[("kth-sp2", method)] = (r, accuracy(r.forecasts))
    targets = {(t.what, t.relation): t for t in fa._targets(results, limit=0)}
    coverage = targets[("kth-sp2: 90% band coverage", ">=")]
    assert coverage.value == 50.0 and coverage.met is False
    assert targets[("kth-sp2: p50 median error / walltime method's", "<=")].value == 1.0
    replay_time = targets[("kth-sp2 full replay with forecasts", "<")]
    assert replay_time.met is True
    limited = {(t.what, t.relation): t for t in fa._targets(results, limit=100)}
    assert limited[("kth-sp2 full replay with forecasts", "<")].value is None
    written = fa.plot(results, tmp_path)
    assert written == [fa.SCATTER_PLOT, fa.CALIBRATION_PLOT]
    for name in written:
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_trace_without_scored_forecasts_still_plots(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text("")
    r = fa.replay("wagap-2013", scenario, "forecast", tmp_path, _stand_in(tmp_path))
    r.forecasts = [f for f in r.forecasts if f.actual is None]
    results = {("wagap-2013", "forecast"): (r, accuracy(r.forecasts))}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. matplotlib's "no artists with labels"
        assert fa.plot(results, tmp_path) == [fa.SCATTER_PLOT, fa.CALIBRATION_PLOT]


@pytest.mark.skipif(not fa.TRACES_DIR.is_dir(), reason=f"no traces folder {fa.TRACES_DIR}")
def test_the_whole_benchmark_on_the_first_jobs_of_the_real_traces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Import through the real command line, replay with the stand-in simulator."""
    monkeypatch.setattr(fa, "_simulate_help", lambda: "--record-forecasts --forecast-method")
    stand_in = _stand_in(tmp_path)
    real_replay = fa.replay
    scenarios: list[Path] = []

    def replay(trace: str, scenario: Path, method: str, workdir: Path) -> fa.Replay:
        scenarios.append(scenario)
        assert scenario.read_text().count("\n  - {") == 20  # --limit 20 arrivals
        return real_replay(trace, scenario, method, workdir, stand_in)

    monkeypatch.setattr(fa, "replay", replay)
    args = argparse.Namespace(
        traces=["kth-sp2", "wagap-2013"],
        methods=["forecast", "walltime"],
        limit=20,
        traces_dir=str(fa.TRACES_DIR),
        docs=str(tmp_path),
        write=True,
        quick=False,
    )
    result = fa.forecast_accuracy(args)
    assert len(scenarios) == 4
    assert [row[:2] for row in result.rows] == [
        ["kth-sp2", "forecast"],
        ["kth-sp2", "walltime"],
        ["wagap-2013", "forecast"],
        ["wagap-2013", "walltime"],
    ]
    assert result.rows[0][2:4] == ["5 (4 started)", "50.0%"]
    assert result.headline == 50.0
    assert result.command.startswith("python -m benchmarks forecast-accuracy --limit 20")
    assert "kth-sp2: 20 workloads imported in" in result.notes[0]
    assert f"![benchmarks-forecast-scatter]({fa.SCATTER_PLOT})" in result.notes
    assert (tmp_path / fa.CALIBRATION_PLOT).is_file()
    assert result.figures["wagap-2013/walltime"]["coverage"] == 0.5
