"""kubectl pending's gathering and output, against a fake API (real servers: the
integration and e2e tests)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from queuescope.kubectl_pending import (
    PluginError,
    gather,
    local_queue_names,
    render,
)
from scheduler.kubeapi.errors import KubeError

V = "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/team-a"
NOW = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)


def summary(*names: str) -> dict[str, Any]:
    return {
        "items": [
            {
                "metadata": {
                    "name": name,
                    "namespace": "team-a",
                    "creationTimestamp": "2026-01-01T00:00:00Z",
                },
                "priority": 10,
                "localQueueName": "main",
                "positionInClusterQueue": 2 * i + 1,
                "positionInLocalQueue": i,
            }
            for i, name in enumerate(names)
        ]
    }


class FakeApi:
    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    async def __call__(self, path: str) -> dict[str, Any]:
        self.asked.append(path)
        answer = self.answers.get(path, KubeError(404, "Not Found"))
        if isinstance(answer, KubeError):
            raise answer
        return dict(answer)


def position(wait: int | None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "pending": True,
        "clusterQueueName": "cq",
        "whyPending": {
            "reason": "Pending",
            "message": "m",
            "blockers": [{"kind": "Quota", "flavor": "f", "resource": "cpu", "amount": "2"}],
        },
    }
    if wait is not None:
        doc["estimatedWait"] = {"seconds": wait, "lowSeconds": wait // 2, "highSeconds": 2 * wait}
    return doc


async def test_gather_folds_the_lookup_in_and_tolerates_refusals() -> None:
    api = FakeApi(
        {
            f"{V}/localqueues/main/pendingworkloads?limit=5": summary("w1", "w2", "w3"),
            f"{V}/workloads/w1/pendingposition": position(90),
            f"{V}/workloads/w2/pendingposition": KubeError(403, "Forbidden"),
            # w3 was admitted meanwhile: 404, kept with what the summary said
        }
    )
    rows = await gather(api, "team-a", ["main"], "v1beta2", 5)
    assert [r["name"] for r in rows] == ["w1", "w2", "w3"]
    assert rows[0]["estimatedWait"]["seconds"] == 90
    assert "whyPending" not in rows[1] and "clusterQueue" not in rows[1]
    table = render("wide", "team-a", rows, NOW)
    lines = table.splitlines()
    assert lines[1].split()[:7] == ["w1", "main", "cq", "0", "1", "10", "10m"]
    assert "~1m (45s-3m)" in lines[1] and "Pending: cpu in f: 2 more needed" in lines[1]
    assert lines[2].rstrip().endswith("<unknown>")
    assert json.loads(render("json", "team-a", rows, NOW))["items"][0]["name"] == "w1"
    assert yaml.safe_load(render("yaml", "team-a", rows, NOW))["namespace"] == "team-a"
    assert render("table", "team-a", [], NOW) == "No pending workloads in namespace team-a."


async def test_server_errors_stop_with_the_message() -> None:
    api = FakeApi(
        {
            f"{V}/localqueues/main/pendingworkloads?limit=5": summary("w1"),
            f"{V}/workloads/w1/pendingposition": KubeError(500, "Internal Server Error"),
        }
    )
    with pytest.raises(PluginError, match="w1: 500"):
        await gather(api, "team-a", ["main"], "v1beta2", 5)
    with pytest.raises(PluginError, match="LocalQueue team-a/other"):
        await gather(FakeApi({}), "team-a", ["other"], "v1beta2", 5)


async def test_a_queue_unknown_to_the_server_is_skipped_among_others() -> None:
    api = FakeApi({f"{V}/localqueues/b/pendingworkloads?limit=5": summary("w")})
    rows = await gather(api, "team-a", ["a", "b"], "v1beta2", 5)
    assert [r["name"] for r in rows] == ["w"]


async def test_local_queues_from_kueue_then_from_the_embedded_server() -> None:
    kueue = "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/localqueues"
    listed = FakeApi({kueue: {"items": [{"metadata": {"name": "z"}}, {"metadata": {"name": "a"}}]}})
    assert await local_queue_names(listed, "team-a") == ["a", "z"]
    overview = {
        "localQueues": [
            {"namespace": "team-a", "name": "main"},
            {"namespace": "team-b", "name": "other"},
        ]
    }
    embedded = FakeApi(
        {
            kueue: KubeError(403, "Forbidden"),
            "/dashboard/api/v1/overview?namespace=team-a": overview,
        }
    )
    assert await local_queue_names(embedded, "team-a") == ["main"]
    with pytest.raises(PluginError, match="name them with --localqueue"):
        await local_queue_names(FakeApi({kueue: KubeError(403, "Forbidden")}), "team-a")
    with pytest.raises(PluginError, match="500"):
        await local_queue_names(FakeApi({kueue: KubeError(500, "boom")}), "team-a")


async def test_the_start_column_counts_from_now_and_says_how_old_the_forecast_is() -> None:
    ahead = position(90)
    ahead["estimatedStart"] = {
        "p50": "2026-01-01T00:15:00Z",
        "low": "2026-01-01T00:12:00Z",
        "high": "2026-01-01T00:40:00Z",
        "method": "rate",
        "madeAt": "2026-01-01T00:09:30Z",
        "snapshot": 12,
    }
    overdue = position(None)
    overdue["estimatedStart"] = {
        "p50": "2026-01-01T00:05:00Z",
        "low": "2026-01-01T00:01:00Z",
        "high": "2026-01-01T00:20:00Z",
        "method": "rate",
        "madeAt": "2026-01-01T00:00:00Z",
        "snapshot": 3,
    }
    api = FakeApi(
        {
            f"{V}/localqueues/main/pendingworkloads?limit=5": summary("w1", "w2", "w3"),
            f"{V}/workloads/w1/pendingposition": ahead,
            f"{V}/workloads/w2/pendingposition": overdue,
            f"{V}/workloads/w3/pendingposition": position(None),
        }
    )
    rows = await gather(api, "team-a", ["main"], "v1beta2", 5)
    assert rows[0]["estimatedStart"]["snapshot"] == 12
    lines = render("table", "team-a", rows, NOW).splitlines()
    assert lines[0].split() == [
        "NAME",
        "LOCALQUEUE",
        "POS(LQ)",
        "POS(CQ)",
        "PRIORITY",
        "AGE",
        "WAIT",
        "START",
        "REASON",
    ]
    assert lines[1].split()[6:8] == ["~1m", "~5m"]
    assert lines[2].split()[6:8] == ["<unknown>", "due"]
    assert lines[3].split()[6:8] == ["<unknown>", "<unknown>"]
    wide = render("wide", "team-a", rows, NOW).splitlines()
    assert "~5m (2m-30m, 30s old)" in wide[1]
    assert "due (0s-10m, 10m old)" in wide[2]
    assert (
        json.loads(render("json", "team-a", rows, NOW))["items"][1]["estimatedStart"]
        == (overdue["estimatedStart"])
    )
