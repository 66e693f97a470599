"""docs/simulate.md#runtime-annotation: true runtimes relative to admission."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from queuescope.cli import main
from scheduler.api.decode import ApiError
from scheduler.core.clock import MICROS_PER_SECOND, instant_from_datetime
from scheduler.core.workload import FINISHED, PODS_READY, QUOTA_RESERVED
from scheduler.sim.runner import Simulation
from scheduler.sim.runtimes import parse_runtime
from tests.unit.forecast.support import START, Job, scenario

T0 = instant_from_datetime(datetime.fromisoformat(START))


def seconds(at: int) -> float:
    return (at - T0) / MICROS_PER_SECOND


@pytest.mark.parametrize(
    ("text", "micros"),
    [("3600", 3600 * MICROS_PER_SECOND), ("12.5", 12_500_000), ("1h30m", 5400 * MICROS_PER_SECOND)],
)
def test_seconds_or_a_go_duration(text: str, micros: int) -> None:
    assert parse_runtime(text) == micros


@pytest.mark.parametrize("text", ["", " 10", "-5", "0", "0s", "ten", "10 s", "1e3", "-1h"])
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="invalid runtime"):
        parse_runtime(text)


def test_a_bad_annotation_names_file_document_and_field() -> None:
    docs = scenario(4, [Job("a", 0, 1, runtime=None, annotation="soon")])
    with pytest.raises(ApiError) as err:
        Simulation(docs)
    text = str(err.value)
    assert "test.yaml" in text and "document 4" in text
    assert "spec.events[0].apply.metadata.annotations[simulation.queuescope.io/runtime]" in text
    assert "soon" in text


def test_a_bad_annotation_exits_2_from_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "wl.yaml"
    path.write_text(
        """\
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata:
  name: w
  namespace: ns
  annotations: {simulation.queuescope.io/runtime: "5 minutes"}
spec:
  queueName: lq
  podSets: [{name: main, count: 1, template: {spec: {containers: [{name: c}]}}}]
"""
    )
    assert main(["simulate", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: document 0" in err
    assert "metadata.annotations[simulation.queuescope.io/runtime]" in err


def test_runs_its_runtime_after_admission_with_pods_ready() -> None:
    # b waits for a (3 of 4 cpu) to finish at 100 s, then runs 50 s.
    sim = Simulation(scenario(4, [Job("a", 0, 3, runtime=100), Job("b", 10, 2, runtime=50)]))
    s = sim.run().scheduler
    a, b = s.objects.workloads["ns/a"], s.objects.workloads["ns/b"]
    assert a.conditions.is_true(PODS_READY) and b.conditions.is_true(PODS_READY)
    assert seconds(a.conditions.get(FINISHED).last_transition) == 100  # type: ignore[union-attr]
    assert seconds(b.conditions.get(QUOTA_RESERVED).last_transition) == 100  # type: ignore[union-attr]
    assert seconds(b.conditions.get(FINISHED).last_transition) == 150  # type: ignore[union-attr]
    assert b.conditions.get(FINISHED).reason == "Succeeded"  # type: ignore[union-attr]


def test_an_eviction_restarts_the_clock() -> None:
    # low runs from 0; high (higher priority) preempts it at 30 s and runs 40 s;
    # low is admitted again at 70 s and runs its full 100 s from there.
    jobs = [Job("low", 0, 4, runtime=100), Job("high", 30, 4, runtime=40, priority=10)]
    s = Simulation(scenario(4, jobs)).run().scheduler
    low = s.objects.workloads["ns/low"]
    assert seconds(s.objects.workloads["ns/high"].conditions.get(FINISHED).last_transition) == 70  # type: ignore[union-attr]
    assert seconds(low.conditions.get(QUOTA_RESERVED).last_transition) == 70  # type: ignore[union-attr]
    assert seconds(low.conditions.get(FINISHED).last_transition) == 170  # type: ignore[union-attr]


def test_a_workload_without_the_annotation_never_finishes_by_itself() -> None:
    s = Simulation(scenario(4, [Job("a", 0, 1, runtime=None)])).run().scheduler
    assert not s.objects.workloads["ns/a"].finished
    assert s.objects.workloads["ns/a"].conditions.get(PODS_READY) is None
