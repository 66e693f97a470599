"""[EXT] `pendingposition` (docs/visibility-api.md#pending-position)."""

from __future__ import annotations

import dataclasses

import pytest

from scheduler.runtime.estimates import ServedForecast
from tests.unit.visibility_server.http.support import (
    ADMIN,
    ALICE,
    BOB,
    CAROL,
    SECOND,
    T0,
    V1,
    V2,
    app_for,
    entry,
    example_snapshot,
    get,
    make_snapshot,
)
from visibility_server.http import NotPending, NotPendingReason


def pos(name: str, namespace: str = "team-a", version: str = V2) -> str:
    return f"{version}/namespaces/{namespace}/workloads/{name}/pendingposition"


async def test_pending_workload_exact_body() -> None:
    snap = make_snapshot(
        {
            "cq-a": [
                entry("team-a", "a-high", "lq-a", 100, T0),
                entry("team-a", "job-train-a-5d2f1", "lq-a", 100, T0 + SECOND, why="quota"),
            ]
        }
    )
    r = await get(app_for(snap), pos("job-train-a-5d2f1"))
    digest = snap.views["cq-a"].digest
    assert r.content == (
        b'{"kind":"PendingWorkloadPosition","apiVersion":"visibility.kueue.x-k8s.io/v1beta2",'
        b'"metadata":{"name":"job-train-a-5d2f1","namespace":"team-a",'
        b'"creationTimestamp":"2026-01-01T00:00:01Z","resourceVersion":"' + digest.encode() + b'"},'
        b'"pending":true,"clusterQueueName":"cq-a","localQueueName":"lq-a","priority":100,'
        b'"positionInClusterQueue":1,"positionInLocalQueue":1,'
        b'"pendingWorkloadsInClusterQueue":2,"pendingWorkloadsInLocalQueue":2,'
        b'"message":"quota"}\n'
    )
    assert "etag" in r.headers


async def test_positions_agree_with_the_summaries() -> None:
    app = app_for()
    cq = (await get(app, f"{V2}/clusterqueues/cq-a/pendingworkloads")).json()
    for item in cq["items"]:
        body = (await get(app, pos(item["metadata"]["name"]))).json()
        assert body["positionInClusterQueue"] == item["positionInClusterQueue"]
        assert body["positionInLocalQueue"] == item["positionInLocalQueue"]
        assert body["pendingWorkloadsInClusterQueue"] == 4
        assert body["pendingWorkloadsInLocalQueue"] == 2
        assert "message" not in body


async def test_unknown_workload_is_404() -> None:
    r = await get(app_for(), pos("nope"))
    assert r.content == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
        b'"workload.visibility.kueue.x-k8s.io \\"nope\\" not found","reason":"NotFound",'
        b'"details":{"name":"nope","group":"visibility.kueue.x-k8s.io","kind":"workload"},'
        b'"code":404}\n'
    )


@pytest.mark.parametrize("reason", list(NotPendingReason))
async def test_not_pending_is_classified_by_the_lookup(reason: NotPendingReason) -> None:
    def lookup(namespace: str, name: str) -> NotPending | None:
        if (namespace, name) == ("team-a", "done"):
            return NotPending(reason, creation=T0, cluster_queue="cq-a", local_queue="lq-a")
        return None

    app = app_for(not_pending=lookup)
    r = await get(app, pos("done", version=V1))
    assert r.status_code == 200
    assert r.json() == {
        "kind": "PendingWorkloadPosition",
        "apiVersion": "visibility.kueue.x-k8s.io/v1beta1",
        "metadata": {
            "name": "done",
            "namespace": "team-a",
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "pending": False,
        "reason": reason.value,
        "clusterQueueName": "cq-a",
        "localQueueName": "lq-a",
    }
    assert "etag" not in r.headers
    assert (await get(app, pos("other"))).status_code == 404


async def test_not_pending_with_unknown_queues_omits_them() -> None:
    app = app_for(not_pending=lambda ns, n: NotPending(NotPendingReason.LOCAL_QUEUE_NOT_FOUND))
    body = (await get(app, pos("x"))).json()
    assert body["reason"] == "LocalQueueNotFound"
    assert "clusterQueueName" not in body and "localQueueName" not in body
    assert body["metadata"] == {"name": "x", "namespace": "team-a"}


async def test_authorization_and_sync() -> None:
    app = app_for()
    assert (await get(app, pos("a-low"), BOB)).status_code == 200  # LocalQueue viewer role
    assert (await get(app, pos("a-low"), ALICE)).status_code == 200
    r = await get(app, pos("a-low", "team-b"), BOB)
    assert r.status_code == 403
    assert r.json()["details"]["kind"] == "workloads"
    assert (await get(app, pos("a-low"), CAROL)).status_code == 403
    assert (await get(app_for(example_snapshot(synced=False)), pos("a-low"))).status_code == 503


async def test_extension_off_is_404_everywhere() -> None:
    app = app_for(extensions=frozenset())
    assert (await get(app, pos("a-low"))).status_code == 404
    assert '"workloads' not in (await get(app, V2)).text
    assert "PendingWorkloadPosition" not in (await get(app, "/openapi/v2")).text


async def test_position_ignores_paging_parameters() -> None:
    r = await get(app_for(), pos("a-low") + "?limit=abc&offset=x")
    assert r.status_code == 200


async def test_estimated_start_is_the_served_forecast_with_its_origin() -> None:
    forecast = ServedForecast(
        method="rate",
        made_at=T0 + 60 * SECOND,
        generation=42,
        p50=T0 + 600 * SECOND,
        low=T0 + 300 * SECOND,
        high=T0 + 1800 * SECOND,
    )
    served = {("team-a", "a-low"): forecast}
    app = app_for(forecasts=lambda ns, n: served.get((ns, n)))
    r = await get(app, pos("a-low"))
    assert r.json()["estimatedStart"] == {
        "p50": "2026-01-01T00:10:00Z",
        "low": "2026-01-01T00:05:00Z",
        "high": "2026-01-01T00:30:00Z",
        "method": "rate",
        "madeAt": "2026-01-01T00:01:00Z",
        "snapshot": 42,
    }
    # A newer forecast is a new body: the ETag moves with it.
    served[("team-a", "a-low")] = dataclasses.replace(forecast, generation=43)
    again = await get(app, pos("a-low"), {**ADMIN, "If-None-Match": r.headers["etag"]})
    assert again.status_code == 200
    assert again.json()["estimatedStart"]["snapshot"] == 43
    # A workload without a forecast has no field.
    assert "estimatedStart" not in (await get(app, pos("a-high"))).json()
