"""A custom queue implementation named in a ClusterQueue annotation is loaded and used,
with no change to the project (KEP-2779); a name that does not load is bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from queuescope.cli import main
from scheduler.core.queue.loader import clear_cache

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"

CLUSTER = """\
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {{name: default}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: cq
{annotations}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{{name: cpu, nominalQuota: "1"}}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {{name: lq, namespace: ns}}
spec: {{clusterQueue: cq}}
"""

WORKLOAD = """\
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {{name: {name}, namespace: ns}}
spec:
  queueName: lq
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers:
        - name: c
          resources: {{requests: {{cpu: "2"}}}}
"""


def _write(tmp_path: Path, annotations: str) -> Path:
    text = CLUSTER.format(annotations=annotations)
    # Three workloads, each too big to admit, so all stay pending in document order.
    text += "".join(WORKLOAD.format(name=n) for n in ("first", "second", "third"))
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return path


def _pending_order(capsys: pytest.CaptureFixture[str], path: Path) -> list[str]:
    assert main(["simulate", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    summary = next(i for i in doc["items"] if i["kind"] == "PendingWorkloadsSummary")
    return [i["metadata"]["name"] for i in summary["items"]]


@pytest.fixture(autouse=True)
def _examples_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    clear_cache()


def test_builtin_order_is_oldest_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _pending_order(capsys, _write(tmp_path, "")) == ["first", "second", "third"]


def test_plugin_from_annotation_changes_the_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    annotations = (
        "  annotations:\n"
        '    queuescope.io/queue-plugin: "shortest_first_queue:ShortestWaitFirstQueue"'
    )
    assert _pending_order(capsys, _write(tmp_path, annotations)) == ["third", "second", "first"]


def test_unloadable_plugin_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    annotations = "  annotations:\n    queuescope.io/queue-plugin: no_such_module:Queue"
    path = _write(tmp_path, annotations)
    assert main(["simulate", str(path)]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert str(path) in out.err
    assert "queuescope.io/queue-plugin" in out.err
    assert "no_such_module" in out.err
