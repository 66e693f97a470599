"""`resources.quotaCheckStrategy` (docs/scheduling.md#configuration-in-v1beta2): a resource
no resource group of the ClusterQueue covers blocks the pod set (BlockUndeclared, the
default) or is left out of flavors, quota and the admission (IgnoreUndeclared)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.unit.sim.test_api_versions import setup, simulate

CONFIG = """\
---
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
featureGates: {{DisableWaitForPodsReady: true}}
resources: {{quotaCheckStrategy: {strategy}}}
"""
WORKLOAD = """\
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: gadgets, namespace: ns}
spec:
  queueName: lq
  podSets:
  - name: main
    count: 2
    template:
      spec:
        containers:
        - {name: c, image: x, resources: {requests: {cpu: '1', example.com/gadget: '3'}}}
"""


def run(tmp_path: Path, capsys: pytest.CaptureFixture[str], strategy: str) -> dict[str, Any]:
    text = setup("v1beta2") + CONFIG.format(strategy=strategy) + WORKLOAD
    code, out, err = simulate(tmp_path, capsys, text)
    assert code == 0, err
    return {item["kind"]: item for item in json.loads(out)["items"]}


def test_block_undeclared(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = run(tmp_path, capsys, "BlockUndeclared")
    status = items["Workload"]["status"]
    assert "admission" not in status
    reserved = {c["type"]: c for c in status["conditions"]}["QuotaReserved"]
    assert reserved["status"] == "False"
    assert "resource example.com/gadget unavailable in ClusterQueue" in reserved["message"]
    (requests,) = status["resourceRequests"]
    assert requests["resources"] == {"cpu": "2", "example.com/gadget": "6"}


def test_ignore_undeclared(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = run(tmp_path, capsys, "IgnoreUndeclared")
    workload = items["Workload"]
    (assignment,) = workload["status"]["admission"]["podSetAssignments"]
    assert assignment["flavors"] == {"cpu": "default"}
    assert assignment["resourceUsage"] == {"cpu": "2"}
    usage = items["ClusterQueue"]["status"]["flavorsUsage"]
    assert usage == [
        {"name": "default", "resources": [{"name": "cpu", "total": "2", "borrowed": "0"}]}
    ]
