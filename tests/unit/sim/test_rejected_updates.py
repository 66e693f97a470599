"""docs/scheduling.md#invalid-input: a scenario update that breaks an immutability rule is rejected
and reported; the stored object stays as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from queuescope.cli import main

BASE = """\
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: "4"}]}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: other}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: "4"}]}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: ns}
spec: {clusterQueue: cq}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: wl, namespace: ns}
spec:
  queueName: lq
  podSets:
  - name: main
    count: 1
    template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}
---
apiVersion: simulation.queuescope.io/v1alpha1
kind: Scenario
metadata: {name: s}
spec:
  events:
  - at: 1m
    apply:
      apiVersion: kueue.x-k8s.io/v1beta1
      kind: LocalQueue
      metadata: {name: lq, namespace: ns}
      spec: {clusterQueue: other}
  - at: 2m
    apply:
      apiVersion: kueue.x-k8s.io/v1beta1
      kind: Workload
      metadata: {name: wl, namespace: ns}
      spec:
        queueName: lq
        podSets:
        - name: main
          count: 3
          template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}
"""


def test_immutable_updates_are_rejected_and_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(BASE)
    assert main(["simulate", str(path)]) == 0
    out = capsys.readouterr()
    assert "spec.clusterQueue" in out.err
    assert "spec.podSets: field is immutable" in out.err
    items = json.loads(out.out)["items"]
    lq = next(i for i in items if i["kind"] == "LocalQueue")
    assert lq["spec"]["clusterQueue"] == "cq"
    wl = next(i for i in items if i["kind"] == "Workload")
    assert wl["spec"]["podSets"][0]["count"] == 1
    assert wl["status"]["admission"]["podSetAssignments"][0]["count"] == 1
