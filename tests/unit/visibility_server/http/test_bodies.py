"""Rendered bodies remembered per view, route, paging and representation (issue 6)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.visibility_server.http.support import (
    ADMIN,
    NOW,
    T0,
    V1,
    V2,
    Holder,
    app_for,
    entry,
    example_entries,
    example_snapshot,
    get,
    make_snapshot,
)
from visibility_server.http import answers
from visibility_server.http.bodies import BodyCache

CQ = f"{V2}/clusterqueues/cq-a/pendingworkloads"
LQ = f"{V2}/namespaces/team-a/localqueues/lq-a/pendingworkloads"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def test_the_least_recently_used_body_goes_first() -> None:
    cache = BodyCache(max_bytes=2, entry_overhead=0)
    cache.put("a", b"1")
    cache.put("b", b"2")
    assert cache.get("a") == b"1"  # now b is the oldest
    cache.put("c", b"3")
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (b"1", None, b"3")
    assert len(cache) == 2


def test_bodies_are_bounded_by_bytes_and_an_oversized_body_is_not_kept() -> None:
    cache = BodyCache(max_bytes=10, entry_overhead=0)
    cache.put("a", b"12345")
    cache.put("b", b"1234")
    cache.put("c", b"123")  # 12 bytes: a goes
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (None, b"1234", b"123")
    assert cache.currsize == 7
    cache.put("d", b"x" * 11)
    assert cache.get("d") is None and cache.currsize == 7
    cache.put("b", b"12")  # replacing an entry counts its new size only
    assert cache.currsize == 5


def test_every_entry_weighs_its_key_too() -> None:
    """Many tiny bodies are bounded as well: each costs the overhead on top of its bytes."""
    cache = BodyCache(max_bytes=3 * 100, entry_overhead=100)
    for key in "abcd":
        cache.put(key, b"")
    assert len(cache) == 3 and cache.get("a") is None
    cache.put("e", b"x" * 201)  # 301 with its overhead: more than the whole cache
    assert cache.get("e") is None and len(cache) == 3


@pytest.fixture
def renders(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts ClusterQueue page renders (one per body actually built)."""
    calls: list[int] = []
    real = answers.cluster_queue_summary

    def counting(*args: Any) -> Any:
        calls.append(args[1].start)  # the offset (args: origin, rows, memo)
        return real(*args)

    monkeypatch.setattr(answers, "cluster_queue_summary", counting)
    return calls


async def test_a_repeated_page_is_rendered_once(renders: list[int]) -> None:
    app = app_for()
    first = await get(app, CQ + "?limit=2")
    again = await get(app, CQ + "?limit=2")
    assert again.content == first.content and again.headers["etag"] == first.headers["etag"]
    assert renders == [0]
    await get(app, CQ + "?limit=2&offset=1")
    await get(app, f"{V1}/clusterqueues/cq-a/pendingworkloads?limit=2")
    assert renders == [0, 1, 0]


@pytest.mark.parametrize(
    "variant",
    [{}, {"accept": "application/yaml"}, {"accept": "application/json"}],
    ids=["default", "yaml", "json"],
)
async def test_representations_of_one_page_are_kept_apart(variant: dict[str, str]) -> None:
    app = app_for()
    plain = await get(app, CQ)
    pretty = await get(app, CQ + "?pretty=true")
    asked = await get(app, CQ, {**ADMIN, **variant})
    asked_pretty = await get(app, CQ + "?pretty=true", {**ADMIN, **variant})
    fresh = app_for()
    assert asked.content == (await get(fresh, CQ, {**ADMIN, **variant})).content
    assert (
        asked_pretty.content
        == (await get(fresh, CQ + "?pretty=true", {**ADMIN, **variant})).content
    )
    assert plain.content != pretty.content


async def test_a_new_snapshot_is_rendered_not_taken_from_the_cache(renders: list[int]) -> None:
    holder = Holder(example_snapshot())
    app = app_for(holder)
    before = (await get(app, CQ)).json()
    holder.current = make_snapshot({"cq-a": example_entries()[1:]}, generation=2)
    after = (await get(app, CQ)).json()
    assert [i["metadata"]["name"] for i in before["items"]] == [
        "a-high",
        "b-high",
        "a-low",
        "b-low",
    ]
    assert [i["metadata"]["name"] for i in after["items"]] == ["b-high", "a-low", "b-low"]
    assert len(renders) == 2


async def test_queues_with_the_same_content_do_not_share_bodies() -> None:
    same = [entry("team-a", "w", "lq-a", 0, T0)]
    app = app_for(make_snapshot({"cq-a": same, "cq-b": same}))
    a = await get(app, CQ)
    b = await get(app, f"{V2}/clusterqueues/cq-b/pendingworkloads")
    lq = await get(app, LQ)
    assert a.json()["items"] == b.json()["items"] == lq.json()["items"]
    tags = {r.json()["metadata"]["resourceVersion"] for r in (a, b, lq)}
    assert len(tags) == 3


async def test_table_bodies_follow_the_clock() -> None:
    now = [NOW]
    app = app_for(clock=lambda: now[0])
    first = await get(app, CQ, {**ADMIN, "accept": TABLE})
    now[0] += 3 * 3600
    later = await get(app, CQ, {**ADMIN, "accept": TABLE})
    assert first.headers["etag"] == later.headers["etag"]
    ages = [[row["cells"][6] for row in r.json()["rows"]] for r in (first, later)]
    assert ages == [["5m", "4m59s", "5m", "4m59s"], ["3h5m", "3h4m", "3h5m", "3h4m"]]
