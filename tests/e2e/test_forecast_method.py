"""`serve --forecast-method forecast` through kube-apiserver (docs/forecasting.md#serving):
the worker runs the scheduler forward on what the published snapshot carries, and the
position lookup serves its band."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.aggregated import GROUP, Aggregated, aggregated_server
from tests.e2e.cluster import ClusterModeServer, cpu_queue
from tests.e2e.harness import ControlPlane, wait_for

LIMIT_SECONDS = 600

WORKLOAD = """\
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {{name: {name}, namespace: team-g}}
spec:
  queueName: lq-g
  maximumExecutionTimeSeconds: {limit}
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers:
        - name: c
          resources: {{requests: {{cpu: "1"}}}}
"""


@dataclass
class ForecastingServer(ClusterModeServer):
    extra_args: list[str] = field(
        default_factory=lambda: ["--forecast-method", "forecast", "--forecast-interval", "1"]
    )


@pytest.fixture(scope="module")
def forecasting(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Aggregated]:
    root: Path = tmp_path_factory.mktemp("forecasting")
    with aggregated_server(control_plane, root, ForecastingServer) as env:
        yield env


def _raw(env: Aggregated, path: str) -> dict[str, Any]:
    return dict(json.loads(env.plane.kubectl("get", "--raw", path).stdout))


def _instant(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_the_forward_run_forecasts_from_the_holders_limits(forecasting: Aggregated) -> None:
    """Three of five one-cpu workloads run on 3 cpu with a 600 s limit and no runtime
    history: the forecaster expects each to hold its quota for the limit, so the two
    left pending start 600 s after the three were admitted."""
    workloads = "".join(WORKLOAD.format(name=f"g{i}", limit=LIMIT_SECONDS) for i in range(5))
    forecasting.server.apply_objects(
        "forecast-g", cpu_queue("team-g", "default", "cq-g", "lq-g", "3") + "\n" + workloads
    )

    def admitted() -> list[float] | None:
        doc = _raw(forecasting, "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-g/workloads")
        found = []
        for item in doc["items"]:
            for condition in item.get("status", {}).get("conditions", []):
                if condition["type"] == "QuotaReserved" and condition["status"] == "True":
                    found.append(_instant(condition["lastTransitionTime"]))
        return found if len(found) == 3 else None

    starts = wait_for(admitted, timeout=90, what="three of five admitted in cq-g")

    def published_pending() -> list[str] | None:
        # The admissions reach the API before the next snapshot is published: until then
        # the visibility API may not know cq-g yet (404) or still list all five.
        path = f"/apis/{GROUP}/v1beta2/clusterqueues/cq-g/pendingworkloads"
        names = [item["metadata"]["name"] for item in _raw(forecasting, path)["items"]]
        return names if len(names) == 2 else None

    pending = wait_for(published_pending, timeout=60, what="two pending in cq-g's snapshot")

    def forecast() -> dict[str, Any] | None:
        path = f"/apis/{GROUP}/v1beta2/namespaces/team-g/workloads/{pending[0]}/pendingposition"
        doc = _raw(forecasting, path)
        return doc if "estimatedStart" in doc else None

    doc = wait_for(forecast, timeout=90, what="an estimatedStart from the forward run")
    start = doc["estimatedStart"]
    assert start["method"] == "forecast"
    assert start["madeAt"] <= start["low"] <= start["p50"] <= start["high"]
    # The prior calibration keeps the forward run's wait as the median; instants are
    # to the second, and the three admissions may be a second or two apart.
    p50 = _instant(start["p50"])
    assert min(starts) + LIMIT_SECONDS - 2 <= p50 <= max(starts) + LIMIT_SECONDS + 2
