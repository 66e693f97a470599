"""The pending-workloads endpoints: order, positions, paging, body shape
(docs/visibility-api.md#pending-workloads-endpoints)."""

from __future__ import annotations

import gc
import json
from types import MappingProxyType
from typing import Any

import orjson
import pytest
from fastapi import FastAPI

from scheduler.core.workload import OwnerRef
from scheduler.runtime.pages import ClusterQueueView, ViewAssembly, ViewBuilder, ViewChunk
from scheduler.runtime.snapshot import Snapshot
from scheduler.runtime.workload_records import PendingEntry
from tests.unit.visibility_server.http.support import (
    ADMIN,
    SECOND,
    T0,
    V1,
    V2,
    Holder,
    app_for,
    entry,
    example_snapshot,
    get,
    make_snapshot,
)
from visibility_server.http.memo import RenderMemo
from visibility_server.http.render import fragments, item_fragment
from visibility_server.http.timestamps import rfc3339_seconds

CQ = f"{V2}/clusterqueues/cq-a/pendingworkloads"


def lq(name: str, namespace: str = "team-a", version: str = V2) -> str:
    return f"{version}/namespaces/{namespace}/localqueues/{name}/pendingworkloads"


def positions(body: dict[str, Any]) -> list[tuple[str, int, int]]:
    return [
        (i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"])
        for i in body["items"]
    ]


async def test_worked_example_cluster_queue() -> None:
    r = await get(app_for(), CQ)
    assert r.status_code == 200
    assert positions(r.json()) == [
        ("a-high", 0, 0),
        ("b-high", 1, 0),
        ("a-low", 2, 1),
        ("b-low", 3, 1),
    ]


async def test_worked_example_local_queues() -> None:
    app = app_for()
    assert positions((await get(app, lq("lq-a"))).json()) == [("a-high", 0, 0), ("a-low", 2, 1)]
    assert positions((await get(app, lq("lq-b"))).json()) == [("b-high", 1, 0), ("b-low", 3, 1)]
    assert positions((await get(app, lq("lq-b") + "?offset=1")).json()) == [("b-low", 3, 1)]


async def test_same_named_local_queues_in_two_namespaces() -> None:
    snap = make_snapshot(
        {
            "cq-a": [
                entry("team-a", "x", "default", 0, T0),
                entry("team-b", "y", "default", 0, T0 + SECOND),
            ]
        }
    )
    app = app_for(snap)
    cq = (await get(app, CQ)).json()
    assert positions(cq) == [("x", 0, 0), ("y", 1, 0)]
    assert positions((await get(app, lq("default", "team-a"))).json()) == [("x", 0, 0)]
    assert positions((await get(app, lq("default", "team-b"))).json()) == [("y", 1, 0)]


def _many(n: int) -> list[PendingEntry]:
    return [entry("ns", f"w{i:05d}", "lq", 0, T0 + i * SECOND) for i in range(n)]


@pytest.mark.parametrize(
    ("query", "first", "count"),
    [
        ("", 0, 1000),
        ("?limit=0", 0, 1000),
        ("?offset=5", 5, 1000),
        ("?limit=-1", 0, 0),
        ("?offset=-3&limit=2", 0, 2),
        ("?limit=%2B7", 0, 7),
        ("?limit=+7", 0, 7),
        ("?limit=5&limit=9", 0, 5),
        ("?offset=1500", 1500, 500),
        ("?offset=2000", 0, 0),
        ("?offset=99999999999", 0, 0),
        ("?limit=3&resourceVersion=7&fieldSelector=x&continue=abc&watch=true", 0, 3),
    ],
)
async def test_query_table(query: str, first: int, count: int) -> None:
    app = app_for(make_snapshot({"cq-a": _many(2000)}))
    body = (await get(app, CQ + query)).json()
    assert len(body["items"]) == count
    if count:
        assert body["items"][0]["positionInClusterQueue"] == first


async def test_limit_is_capped_at_100000() -> None:
    app = app_for(make_snapshot({"cq-a": _many(100_005)}))
    r = await get(app, CQ + "?limit=2000000000")
    body = orjson.loads(r.content)
    assert len(body["items"]) == 100_000
    assert body["items"][-1]["positionInClusterQueue"] == 99_999


@pytest.mark.parametrize(
    ("query", "value", "parameter"),
    [
        ("limit=abc", "abc", "limit"),
        ("limit=", "", "limit"),
        ("limit", "", "limit"),
        ("limit=1.5", "1.5", "limit"),
        ("limit=1e3", "1e3", "limit"),
        ("limit=0x10", "0x10", "limit"),
        ("limit=1_000", "1_000", "limit"),
        ("limit=%201", " 1", "limit"),
        ("limit=%D9%A1", "\u0661", "limit"),
        ("offset=9223372036854775808", "9223372036854775808", "offset"),
        ("offset=-9223372036854775809", "-9223372036854775809", "offset"),
        ("offset=x&limit=y", "x", "offset"),
        ("limit=5&waitSeconds=soon", "soon", "waitSeconds"),
    ],
)
async def test_bad_integers_are_400(query: str, value: str, parameter: str) -> None:
    r = await get(app_for(), f"{CQ}?{query}")
    assert r.status_code == 400
    assert r.json()["message"] == (
        f"invalid value {json.dumps(value, ensure_ascii=False)} for query parameter "
        f'"{parameter}": must be a base-10 integer'
    )


async def test_int64_bounds_are_accepted() -> None:
    app = app_for()
    assert (await get(app, CQ + "?offset=9223372036854775807")).status_code == 200
    assert (await get(app, CQ + "?offset=-9223372036854775808&limit=-0")).status_code == 200


async def test_bad_limit_on_local_queue_endpoint_too() -> None:
    r = await get(app_for(), lq("lq-a") + "?limit=abc")
    assert r.content == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
        b'"invalid value \\"abc\\" for query parameter \\"limit\\": must be a base-10 integer",'
        b'"reason":"BadRequest","code":400}\n'
    )


async def test_exact_body_field_order_and_rendering() -> None:
    owners = (
        OwnerRef("batch/v1", "Job", "train-a", "0b6f3c52-8a55-4b8e-9d57-1c2a3e4f5a6b"),
        OwnerRef("v1", "Pod", "p", "u2"),
    )
    snap = make_snapshot(
        {"cq-a": [entry("team-a", "job-train-a-5d2f1", "lq-a", 100, T0 + 999_999, owners)]}
    )
    r = await get(app_for(snap), CQ)
    view = snap.views["cq-a"]
    assert r.content == (
        b'{"kind":"PendingWorkloadsSummary","apiVersion":"visibility.kueue.x-k8s.io/v1beta2",'
        b'"metadata":{"resourceVersion":"' + view.digest.encode() + b'"},"items":[{"metadata":'
        b'{"name":"job-train-a-5d2f1","namespace":"team-a","creationTimestamp":"2026-01-01T00:00:00Z",'
        b'"ownerReferences":[{"apiVersion":"batch/v1","kind":"Job","name":"train-a",'
        b'"uid":"0b6f3c52-8a55-4b8e-9d57-1c2a3e4f5a6b"},{"apiVersion":"v1","kind":"Pod","name":"p",'
        b'"uid":"u2"}]},"priority":100,"localQueueName":"lq-a","positionInClusterQueue":0,'
        b'"positionInLocalQueue":0}]}\n'
    )
    assert r.headers["content-type"] == "application/json"


async def test_no_owner_references_key_without_owners() -> None:
    body = (await get(app_for(), CQ)).json()
    assert "ownerReferences" not in body["items"][0]["metadata"]
    assert set(body["items"][0]) == {
        "metadata",
        "priority",
        "localQueueName",
        "positionInClusterQueue",
        "positionInLocalQueue",
    }


async def test_v1beta1_differs_only_in_api_version() -> None:
    app = app_for()
    v2 = (await get(app, CQ)).json()
    v1 = (await get(app, f"{V1}/clusterqueues/cq-a/pendingworkloads")).json()
    assert v1["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta1"
    assert {**v1, "apiVersion": v2["apiVersion"]} == v2


async def test_resource_versions_are_view_digests() -> None:
    snap = example_snapshot()
    app = app_for(snap)
    view = snap.views["cq-a"]
    cq = (await get(app, CQ)).json()
    assert cq["metadata"] == {"resourceVersion": view.digest}
    lq_a = (await get(app, lq("lq-a"))).json()
    assert lq_a["metadata"] == {"resourceVersion": view.local_queue_digest("team-a", "lq-a")}


@pytest.mark.parametrize(
    ("path", "message", "kind"),
    [
        (f"{V2}/clusterqueues/nope/pendingworkloads", "clusterqueue", "clusterqueue"),
        (lq("nope"), "localqueue", "localqueue"),
        (lq("lq-a", "team-z"), "localqueue", "localqueue"),
    ],
)
async def test_unknown_queues_are_404(path: str, message: str, kind: str) -> None:
    r = await get(app_for(), path)
    assert r.status_code == 404
    name = path.split("/")[-2]
    assert r.json()["details"] == {"name": name, "group": "visibility.kueue.x-k8s.io", "kind": kind}


async def test_local_queue_whose_cluster_queue_is_missing_is_200_empty() -> None:
    r = await get(app_for(), lq("lq-orphan"))
    assert r.status_code == 200
    body = r.json()
    assert body["items"] == []
    assert len(body["metadata"]["resourceVersion"]) == 16
    assert "etag" in r.headers


async def test_empty_cluster_queue_and_idle_local_queue() -> None:
    app = app_for()
    r = await get(app, f"{V2}/clusterqueues/cq-empty/pendingworkloads")
    assert r.status_code == 200
    assert r.content.endswith(b'"items":[]}\n')
    assert (await get(app, lq("lq-idle"))).json()["items"] == []


def _memo(app: FastAPI) -> RenderMemo:
    memo = app.state.visibility_server.memo
    assert isinstance(memo, RenderMemo)
    return memo


def _memoized(memo: RenderMemo, view: ClusterQueueView) -> list[int]:
    return [i for i in range(len(view)) if memo.head(view, i) is not None]


async def test_items_are_memoized_by_their_chunks() -> None:
    snap = example_snapshot()
    app = app_for(snap)
    memo = _memo(app)
    first = await get(app, CQ + "?limit=2")
    view = snap.views["cq-a"]
    assert _memoized(memo, view) == [0, 1]
    head = memo.head(view, 0)
    assert head is not None and head.startswith(b'{"metadata":{"name":"a-high"')
    assert head.endswith(b',"positionInClusterQueue":')
    assert sorted(memo.fragments_of(view)) == [0, 1]
    # The LocalQueue endpoint reuses the same fragments and heads (lq-a: indexes 0 and 2).
    second = await get(app, lq("lq-a"))
    assert _memoized(memo, view) == [0, 1, 2]
    assert sorted(memo.fragments_of(view)) == [0, 1, 2]
    assert memo.head(view, 0) is head
    assert first.json()["items"][0] == second.json()["items"][0]


def _published(view: ClusterQueueView, generation: int) -> Snapshot:
    return Snapshot(
        generation=generation,
        synced=True,
        views=MappingProxyType({view.name: view}),
        local_queues=MappingProxyType({("ns", "lq"): view.name}),
        workloads=MappingProxyType({e.key: view.name for e in view.entries}),
    )


async def test_a_publish_reuses_the_heads_of_unchanged_chunks() -> None:
    """Positions move with every publish; the rendering of an unchanged chunk does not."""
    entries = _many(5)
    before = ViewBuilder("cq-a", entries, chunk=2).view  # chunks: 0-1, 2-3, 4
    holder = Holder(_published(before, 1))
    app = app_for(holder)
    memo = _memo(app)
    await get(app, CQ)
    heads = [memo.head(before, i) for i in range(5)]
    assert all(h is not None for h in heads)
    # The head of the queue leaves: its chunk is rebuilt, the other two are shared.
    chunks = [ViewChunk(entries[1:2], 0), *before.chunks[1:]]
    after = ViewAssembly("cq-a", chunks, before.cells).view
    holder.current = _published(after, 2)
    body = (await get(app, CQ)).json()
    assert [memo.head(after, i) for i in range(1, 4)] == heads[2:]
    assert all(memo.head(after, i) is heads[i + 1] for i in range(1, 4))
    assert [i["positionInClusterQueue"] for i in body["items"]] == [0, 1, 2, 3]
    assert [i["metadata"]["name"] for i in body["items"]] == [e.name for e in entries[1:]]


async def test_memos_go_with_the_objects_they_describe() -> None:
    """Runtime objects are never written to; the server forgets what the runtime drops."""
    holder = Holder(make_snapshot({"cq-a": _many(3)}))
    app = app_for(holder)
    memo = _memo(app)
    await get(app, CQ)
    assert (len(memo.chunks), len(memo.views)) == (1, 1)
    holder.current = make_snapshot({"cq-a": _many(2)}, generation=2)
    gc.collect()
    assert (len(memo.chunks), len(memo.views)) == (0, 0)
    await get(app, CQ)
    assert (len(memo.chunks), len(memo.views)) == (1, 1)


async def test_large_page_streams_the_same_bytes() -> None:
    snap = make_snapshot({"cq-a": _many(12_345)})
    app = app_for(snap)
    r = await get(app, CQ + "?limit=100000")
    assert "content-length" not in r.headers  # streamed
    body = orjson.loads(r.content)
    assert len(body["items"]) == 12_345
    assert r.content.endswith(b"]}\n") and r.content.count(b"\n") == 1
    small = await get(app, CQ + "?limit=3")
    assert small.headers["content-length"] == str(len(small.content))


async def test_head_is_get_without_body() -> None:
    app = app_for()
    full = await get(app, CQ)
    head = await get(app, CQ, method="HEAD")
    assert head.status_code == 200
    assert head.content == b""
    assert head.headers == full.headers


async def test_pages_do_not_touch_the_whole_view() -> None:
    """A page reads O(limit) entries: rendering touches only the requested indexes."""
    snap = make_snapshot({"cq-a": _many(50_000)})
    app = app_for(snap)
    await get(app, CQ + "?offset=40000&limit=10", ADMIN)
    assert _memoized(_memo(app), snap.views["cq-a"]) == list(range(40_000, 40_010))


@pytest.mark.parametrize(
    ("micros", "text"),
    [
        (T0, "2026-01-01T00:00:00Z"),
        (T0 + 999_999, "2026-01-01T00:00:00Z"),
        (T0 - 1, "2025-12-31T23:59:59Z"),
        (0, "1970-01-01T00:00:00Z"),
        (-1, "1969-12-31T23:59:59Z"),
        (-30_610_224_000 * SECOND, "1000-01-01T00:00:00Z"),
        (-30_610_224_001 * SECOND, "0999-12-31T23:59:59Z"),
        (253_402_300_799 * SECOND, "9999-12-31T23:59:59Z"),
        (253_402_300_800 * SECOND, "9999-12-31T23:59:59Z"),
        (-(10**18), "0001-01-01T00:00:00Z"),
    ],
)
def test_creation_timestamp_rendering(micros: int, text: str) -> None:
    assert rfc3339_seconds(micros) == text


def test_a_view_memoizes_whole_fragments_by_index() -> None:
    view = make_snapshot({"cq-a": _many(10)}).views["cq-a"]
    memo = RenderMemo()
    first = fragments(memo, view, 2, 5)
    assert sorted(memo.fragments_of(view)) == [2, 3, 4]
    assert first[0].endswith(b'"positionInClusterQueue":2,"positionInLocalQueue":2}')
    memo.fragments_of(view)[3] = b"memo"  # proves the next call reads the memo, not the entry
    again = fragments(memo, view, 1, 6)
    assert again[2] == b"memo"
    assert again[0] == item_fragment(memo, view, view.item(1))
    assert sorted(memo.fragments_of(view)) == [1, 2, 3, 4, 5]
    other = make_snapshot({"cq-a": _many(10)}).views["cq-a"]
    assert memo.fragments_of(other) == {}  # another view, even of equal content
