"""Runs that never settle (docs/simulate.md#runs-that-never-settle): with waitForPodsReady
on and requeues unlimited, a workload that can never become ready is evicted and readmitted
forever; `simulate` says so and names it, instead of cycling until its cycle limit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scheduler.sim.endless import ENDLESS_TIMEOUTS
from tests.unit.sim.test_api_versions import setup, simulate

V1BETA2_CONFIG = """\
---
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
"""
SCENARIO = """\
---
apiVersion: simulation.queuescope.io/v1alpha1
kind: Scenario
metadata: {{name: s}}
spec:
  startTime: '2026-01-01T00:00:00Z'
  events: [{events}]
"""
WORKLOAD = """\
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {{name: {name}, namespace: ns{annotations}}}
spec:
  queueName: lq
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers: [{{name: c, image: x, resources: {{requests: {{cpu: '1'}}}}}}]
"""


def workload(name: str, annotations: str = "") -> str:
    return WORKLOAD.format(name=name, annotations=annotations)


def scenario(*events: str) -> str:
    return SCENARIO.format(events=", ".join(events))


def conditions(out: str, name: str) -> dict[str, Any]:
    for item in json.loads(out)["items"]:
        if item["kind"] == "Workload" and item["metadata"]["name"] == name:
            return {c["type"]: c for c in item["status"].get("conditions", [])}
    raise AssertionError(name)


def test_a_workload_that_never_becomes_ready_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = setup("v1beta2") + V1BETA2_CONFIG + workload("ready", "") + workload("stuck")
    text += scenario("{at: 1m, podsReady: ns/ready}")
    code, out, err = simulate(tmp_path, capsys, text)
    assert (code, out) == (1, "")
    assert err.startswith("error: the run does not settle: workload ns/stuck never becomes ready")
    assert f"has evicted it {ENDLESS_TIMEOUTS} times since the scenario's last event" in err
    assert "internal error" not in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("config", "extra"),
    [
        # A requeue limit ends the loop in a deactivation.
        ("waitForPodsReady: {requeuingStrategy: {backoffLimitCount: 2}}", ""),
        # Kueue's gate turns waitForPodsReady off.
        ("featureGates: {DisableWaitForPodsReady: true}", ""),
        # Ready at admission, then finished.
        ("", "runtime"),
        # Ready before its timeout.
        ("", "event"),
    ],
)
def test_runs_that_settle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str, extra: str
) -> None:
    annotations = (
        ", annotations: {simulation.queuescope.io/runtime: 1h}" if extra == "runtime" else ""
    )
    events = ["{at: 10m, podsReady: ns/stuck}"] if extra == "event" else []
    text = setup("v1beta2") + V1BETA2_CONFIG + config + "\n" + workload("stuck", annotations)
    text += scenario(*events)
    code, out, err = simulate(tmp_path, capsys, text)
    assert code == 0, err
    stuck = conditions(out, "stuck")
    if "backoffLimitCount" in config:
        assert stuck["Evicted"]["reason"] == "DeactivatedDueToRequeuingLimitExceeded"
    elif extra == "runtime":
        assert stuck["Finished"]["status"] == "True"
    else:
        assert "Evicted" not in stuck and stuck["Admitted"]["status"] == "True"


def test_a_bounded_run_is_not_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = setup("v1beta2") + V1BETA2_CONFIG + workload("stuck") + scenario()
    code, _, err = simulate(tmp_path, capsys, text, "--cycles", "3")
    assert code == 0, err
