"""docs/simulate.md#recording-forecasts: `simulate --record-forecasts`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from queuescope.cli import main

SCENARIO = """\
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: f}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: "4"}]}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: ns}
spec: {clusterQueue: cq}
---
apiVersion: simulation.queuescope.io/v1alpha1
kind: Scenario
metadata: {name: s}
spec:
  events:
  - at: 0s
    apply:
      apiVersion: kueue.x-k8s.io/v1beta1
      kind: Workload
      metadata:
        name: a
        namespace: ns
        annotations: {simulation.queuescope.io/runtime: 2m}
      spec:
        queueName: lq
        maximumExecutionTimeSeconds: 300
        podSets:
        - name: main
          count: 3
          template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}
  - at: 10s
    apply:
      apiVersion: kueue.x-k8s.io/v1beta1
      kind: Workload
      metadata:
        name: b
        namespace: ns
        annotations: {simulation.queuescope.io/runtime: "60"}
      spec:
        queueName: lq
        maximumExecutionTimeSeconds: 100
        podSets:
        - name: main
          count: 2
          template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}
  - at: 20s
    apply:
      apiVersion: kueue.x-k8s.io/v1beta1
      kind: Workload
      metadata: {name: never, namespace: ns}
      spec:
        queueName: lq
        podSets:
        - name: main
          count: 8
          template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}
"""


def run(tmp_path: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, str, str]:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    code = main(["simulate", str(path), *flags])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("method", ["forecast", "walltime", "rate"])
def test_one_item_per_workload_pending_after_its_arrival(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], method: str
) -> None:
    code, out, _ = run(tmp_path, capsys, "--record-forecasts", "--forecast-method", method)
    assert code == 0
    items = json.loads(out)["items"]
    kinds = [i["kind"] for i in items]
    # The existing output first, the forecasts after it.
    first = kinds.index("WorkloadForecast")
    assert set(kinds[first:]) == {"WorkloadForecast"}
    assert "PendingWorkloadsSummary" in kinds[:first]
    forecasts = {i["metadata"]["name"]: i for i in items[first:]}
    assert sorted(forecasts) == ["b", "never"]  # a was admitted at its arrival
    b = forecasts["b"]
    assert b["apiVersion"] == "simulation.queuescope.io/v1alpha1"
    assert b["metadata"] == {"namespace": "ns", "name": "b"}
    assert b["madeAt"] == "2026-01-01T00:00:10Z"
    assert b["method"] == method
    band = b["waitSeconds"]
    assert list(band) == ["low", "p50", "high"]
    assert 0 <= band["low"] <= band["p50"] <= band["high"]
    assert b["actualWaitSeconds"] == 110  # a ran 2 minutes from 0 s
    assert forecasts["never"]["actualWaitSeconds"] is None


def test_walltime_waits_for_the_requested_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = run(
        tmp_path, capsys, "--record-forecasts", "--forecast-method", "walltime", "-o", "yaml"
    )
    items = list(yaml.safe_load(out)["items"])
    b = next(i for i in items if i["kind"] == "WorkloadForecast" and i["metadata"]["name"] == "b")
    # No error observed yet: the p50 is the forward run's wait, a's 300 s limit - 10 s.
    assert b["waitSeconds"]["p50"] == 290


def test_without_the_flag_nothing_is_added(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, plain, _ = run(tmp_path, capsys)
    _, recorded, _ = run(tmp_path, capsys, "--record-forecasts")
    plain_items = json.loads(plain)["items"]
    assert all(i["kind"] != "WorkloadForecast" for i in plain_items)
    assert json.loads(recorded)["items"][: len(plain_items)] == plain_items


def test_a_method_without_recording_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(tmp_path, capsys, "--forecast-method", "rate")
    assert code == 2 and out == ""
    assert "--forecast-method" in err and "--record-forecasts" in err
