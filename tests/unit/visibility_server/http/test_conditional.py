"""ETags, 304, the [EXT] long-poll and the in-flight and waiter limits
(docs/visibility-api.md#snapshots-identity-and-cost, #long-poll)."""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from typing import Any

import pytest

from tests.unit.visibility_server.http.support import (
    ADMIN,
    ADMIN_RAW,
    SECOND,
    T0,
    V1,
    V2,
    Holder,
    Notifier,
    app_for,
    call_raw,
    client,
    entry,
    example_entries,
    example_snapshot,
    get,
    make_snapshot,
)

CQ = f"{V2}/clusterqueues/cq-a/pendingworkloads"
LQ = f"{V2}/namespaces/team-a/localqueues/lq-a/pendingworkloads"
POS = f"{V2}/namespaces/team-a/workloads/a-low/pendingposition"


async def test_data_headers() -> None:
    r = await get(app_for(), CQ)
    assert r.headers["cache-control"] == "private, no-cache"
    assert r.headers["vary"] == "Accept"
    etag = r.headers["etag"]
    assert len(etag) == 18 and etag[0] == etag[-1] == '"'


@pytest.mark.parametrize("path", [CQ, LQ, POS])
async def test_304_flow(path: str) -> None:
    app = app_for()
    etag = (await get(app, path)).headers["etag"]
    for header in (etag, f'"other", {etag}', f"W/{etag}", "*"):
        r = await get(app, path, {**ADMIN, "if-none-match": header})
        assert r.status_code == 304, header
        assert r.content == b""
        assert r.headers["etag"] == etag
        assert r.headers["cache-control"] == "private, no-cache"
        assert "location" not in r.headers and "content-type" not in r.headers
    assert (await get(app, path, {**ADMIN, "if-none-match": '"nope"'})).status_code == 200


async def test_etag_covers_everything_that_changes_bytes() -> None:
    app = app_for()
    variants = [
        CQ,
        CQ + "?limit=2",
        CQ + "?offset=1",
        CQ + "?pretty=1",
        f"{V1}/clusterqueues/cq-a/pendingworkloads",
    ]
    tags = [(await get(app, path)).headers["etag"] for path in variants]
    tags.append((await get(app, CQ, {**ADMIN, "accept": "application/yaml"})).headers["etag"])
    assert len(set(tags)) == len(tags)
    # Equivalent queries (clamped to the same effective paging) share a tag.
    same = [(await get(app, CQ + q)).headers["etag"] for q in ("", "?limit=0", "?offset=-4")]
    assert len(set(same)) == 1


async def test_etag_is_content_derived_across_replicas() -> None:
    one = await get(app_for(example_snapshot(generation=1)), CQ)
    other = await get(app_for(example_snapshot(generation=99)), CQ)
    assert one.headers["etag"] == other.headers["etag"]
    assert one.json()["metadata"] == other.json()["metadata"]


async def test_a_change_changes_the_etag_and_304_stops() -> None:
    holder = Holder(example_snapshot())
    app = app_for(holder)
    etag = (await get(app, CQ)).headers["etag"]
    holder.current = make_snapshot({"cq-a": example_entries()[:3]})
    r = await get(app, CQ, {**ADMIN, "if-none-match": etag})
    assert r.status_code == 200 and r.headers["etag"] != etag


async def test_errors_win_over_304() -> None:
    holder = Holder(example_snapshot())
    app = app_for(holder)
    assert (await get(app, CQ)).status_code == 200
    holder.current = make_snapshot({})
    r = await get(app, CQ, {**ADMIN, "if-none-match": "*"})
    assert r.status_code == 404 and "etag" not in r.headers


# -- [EXT] long-poll ---------------------------------------------------------------


async def _wait_until(predicate: Any) -> None:
    for _ in range(1000):
        if predicate():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("condition never became true")


async def test_long_poll_answers_200_when_the_view_changes() -> None:
    holder = Holder(example_snapshot())
    notifier = Notifier()
    app = app_for(holder, change_notifier=notifier)
    server = app.state.visibility_server
    etag = (await get(app, CQ)).headers["etag"]

    async with client(app) as c:
        task = asyncio.create_task(
            c.get(CQ + "?waitSeconds=30", headers={**ADMIN, "if-none-match": etag})
        )
        await _wait_until(lambda: server.waiters == 1)
        assert server.inflight == 0  # waiters do not hold an in-flight slot
        # A publish that does not touch this view: keeps waiting.
        holder.current = make_snapshot(
            {"cq-a": example_entries(), "cq-empty": [entry("x", "y", "z", 0, T0)]},
            {("team-a", "lq-orphan"): "cq-missing", ("team-a", "lq-idle"): "cq-a"},
        )
        notifier.publish()
        await _wait_until(lambda: notifier.waits == 2)
        assert not task.done()
        # This one does.
        holder.current = make_snapshot({"cq-a": [entry("team-a", "new", "lq-a", 7, T0 + SECOND)]})
        notifier.publish()
        r = await asyncio.wait_for(task, 5)
    assert r.status_code == 200
    assert r.headers["etag"] != etag
    assert [i["metadata"]["name"] for i in r.json()["items"]] == ["new"]
    assert server.waiters == 0 and server.inflight == 0


async def test_long_poll_times_out_with_304() -> None:
    notifier = Notifier()
    app = app_for(change_notifier=notifier)
    etag = (await get(app, CQ)).headers["etag"]
    loop = asyncio.get_running_loop()
    started = loop.time()
    r = await get(app, CQ + "?waitSeconds=0", {**ADMIN, "if-none-match": etag})  # clamped to 1
    assert r.status_code == 304
    assert loop.time() - started >= 0.9
    assert r.headers["etag"] == etag


async def test_long_poll_differing_etag_answers_at_once() -> None:
    notifier = Notifier()
    app = app_for(change_notifier=notifier)
    r = await get(app, CQ + "?waitSeconds=50", {**ADMIN, "if-none-match": '"old"'})
    assert r.status_code == 200
    r = await get(app, CQ + "?waitSeconds=50")  # no If-None-Match: nothing to wait for
    assert r.status_code == 200
    assert notifier.waits == 0


async def test_long_poll_returns_the_error_when_the_queue_goes_away() -> None:
    holder = Holder(example_snapshot())
    notifier = Notifier()
    app = app_for(holder, change_notifier=notifier)
    etag = (await get(app, CQ)).headers["etag"]
    async with client(app) as c:
        task = asyncio.create_task(
            c.get(CQ + "?waitSeconds=30", headers={**ADMIN, "if-none-match": etag})
        )
        await _wait_until(lambda: notifier.waits == 1)
        holder.current = make_snapshot({})
        notifier.publish()
        r = await asyncio.wait_for(task, 5)
    assert r.status_code == 404


async def test_waiters_beyond_the_cap_get_429() -> None:
    app = app_for(change_notifier=Notifier(), max_waiters=0)
    etag = (await get(app, CQ)).headers["etag"]
    r = await get(app, CQ + "?waitSeconds=5", {**ADMIN, "if-none-match": etag})
    assert r.status_code == 429
    assert r.headers["retry-after"] == "1"
    assert app.state.visibility_server.inflight == 0


async def test_a_client_that_leaves_frees_its_waiter_slot() -> None:
    notifier = Notifier()
    app = app_for(change_notifier=notifier)
    server = app.state.visibility_server
    etag = (await get(app, CQ)).headers["etag"]
    gone = asyncio.Event()
    first = True

    async def receive() -> dict[str, Any]:
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": b"", "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    headers = [*ADMIN_RAW, (b"if-none-match", etag.encode())]
    task = asyncio.create_task(call_raw(app, CQ, headers, query=b"waitSeconds=50", receive=receive))
    await _wait_until(lambda: server.waiters == 1)
    gone.set()
    await asyncio.wait_for(task, 5)
    assert server.waiters == 0 and server.inflight == 0


async def test_wait_seconds_validation_and_extension_off() -> None:
    app = app_for(change_notifier=Notifier())
    assert (await get(app, CQ + "?waitSeconds=1.5")).status_code == 400
    off = app_for(extensions=frozenset({"pendingposition"}), change_notifier=Notifier())
    etag = (await get(off, CQ)).headers["etag"]
    assert (await get(off, CQ + "?waitSeconds=abc")).status_code == 200  # unknown: ignored
    r = await get(off, CQ + "?waitSeconds=30", {**ADMIN, "if-none-match": etag})
    assert r.status_code == 304


# -- in-flight limit -------------------------------------------------------------------


async def test_in_flight_limit_429_with_a_blocking_client() -> None:
    app = app_for(max_inflight=1)
    server = app.state.visibility_server
    release = asyncio.Event()

    async def blocking_send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            await release.wait()

    slow = asyncio.create_task(call_raw(app, CQ, ADMIN_RAW, on_send=blocking_send))
    await _wait_until(lambda: server.inflight == 1)

    r = await call_raw(app, CQ, ADMIN_RAW)
    assert r.status == 429
    assert r.headers["retry-after"] == "1"
    assert r.body == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
        b'"too many requests, please try again later","reason":"TooManyRequests",'
        b'"details":{"retryAfterSeconds":1},"code":429}\n'
    )
    # Non-data requests are not limited.
    for path in ("/apis", V2, "/healthz", "/version", "/openapi/v2", "/metrics"):
        assert (await call_raw(app, path, ADMIN_RAW)).status == 200, path
    # Errors before the limit (400, 406) are still reported as such.
    assert (await call_raw(app, CQ, ADMIN_RAW, query=b"limit=x")).status == 400

    release.set()
    assert (await slow).status == 200
    assert server.inflight == 0
    assert (await call_raw(app, CQ, ADMIN_RAW)).status == 200


async def test_the_slot_is_freed_after_errors() -> None:
    app = app_for(max_inflight=1)
    for _ in range(3):
        assert (await get(app, f"{V2}/clusterqueues/nope/pendingworkloads")).status_code == 404
    assert app.state.visibility_server.inflight == 0
    assert (await get(app, CQ)).status_code == 200
