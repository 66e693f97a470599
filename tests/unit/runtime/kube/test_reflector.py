"""The reflector on the in-memory API server: paged lists, list->cache diffs, watches
with bookmarks, 410 -> relist, transient errors -> backoff on an injected sleep."""

from __future__ import annotations

import asyncio
import itertools
import random

import pytest

from scheduler.kubeapi.client import WatchEvent
from scheduler.kubeapi.errors import Json, KubeError
from scheduler.runtime.kube.records import Cached, WorkloadRecord, cached_key, cached_version
from scheduler.runtime.kube.reflector import MAX_BACKOFF, Gone, Reflector, ReflectorSettings
from scheduler.runtime.kube.resources import (
    NAMESPACES,
    PODS,
    WORKLOADS,
    Resource,
    object_key,
    resource_version,
)
from tests.unit.runtime.kube.fakes import FakeKube, status_error, until

Event = tuple[str, str, str, str | None]  # (upsert|delete, key, rv, old rv)


class Recorder:
    """A reflector handler that records what it is told."""

    def __init__(self, fail_on: str = "") -> None:
        self.events: list[Event] = []
        self.fail_on = fail_on
        self.objects: list[Json] = []

    def upsert(self, resource: Resource, obj: Json, old: Cached | None) -> None:
        self.objects.append(obj)
        key = object_key(obj)
        self.events.append(
            ("upsert", key, resource_version(obj), cached_version(old) if old else None)
        )
        if key == self.fail_on:
            raise RuntimeError("handler bug")

    def delete(self, resource: Resource, obj: Cached) -> None:
        self.events.append(("delete", cached_key(obj), cached_version(obj), None))

    def take(self) -> list[Event]:
        events, self.events = self.events, []
        return events


class NoJitter(random.Random):
    def random(self) -> float:
        return 0.0

    def randint(self, a: int, b: int) -> int:
        return a


class Stop(Exception):  # noqa: N818
    """Raised by the injected sleep to end a `run()` loop."""


class Sleeps:
    def __init__(self, stop_after: int = 100) -> None:
        self.delays: list[float] = []
        self.stop_after = stop_after

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        if len(self.delays) >= self.stop_after:
            raise Stop
        await asyncio.sleep(0)


def ns(name: str, **labels: str) -> Json:
    return {"metadata": {"name": name, "labels": labels}}


def wl(name: str, rv: str) -> Json:
    return {"metadata": {"name": name, "namespace": "team", "resourceVersion": rv}}


def reflector(
    fake: FakeKube,
    resource: Resource = NAMESPACES,
    handler: Recorder | None = None,
    *,
    sleep: Sleeps | None = None,
    page_size: int = 500,
) -> Reflector:
    return Reflector(
        fake.rest,
        resource,
        handler or Recorder(),
        settings=ReflectorSettings(
            page_size=page_size, watch_seconds=(240, 360), sleep=sleep or Sleeps(), rng=NoJitter()
        ),
    )


def paged_namespaces(count: int, page_size: int) -> tuple[FakeKube, Recorder, Reflector]:
    """A server with Namespaces n0..n{count-1} and a reflector listing them page_size a page."""
    fake = FakeKube()
    for i in range(count):
        fake.seed(NAMESPACES, ns(f"n{i}"))
    handler = Recorder()
    return fake, handler, reflector(fake, handler=handler, page_size=page_size)


# -- lists ----------------------------------------------------------------------------
async def test_list_follows_continue_tokens_and_sets_the_resume_point() -> None:
    fake, handler, r = paged_namespaces(5, page_size=2)
    await r.list_all()
    assert [q for _, q in fake.list_queries] == [
        {"limit": "2"},
        {"limit": "2", "continue": "2"},
        {"limit": "2", "continue": "4"},
    ]
    assert sorted(r.cache) == [f"n{i}" for i in range(5)]
    assert r.resource_version == str(fake.rv)
    assert r.synced
    assert r.stats.lists == 1
    assert [e[:2] for e in handler.events] == [("upsert", f"n{i}") for i in range(5)]
    # List items come without kind/apiVersion; the reflector restores them.
    assert {(o["kind"], o["apiVersion"]) for o in handler.objects} == {("Namespace", "v1")}


async def test_relist_diffs_against_the_cache() -> None:
    fake = FakeKube()
    for name in ("same", "changed", "gone"):
        fake.seed(NAMESPACES, ns(name))
    handler = Recorder()
    r = reflector(fake, handler=handler)
    await r.list_all()
    old_changed_rv = cached_version(r.cache["changed"])
    handler.take()
    fake.server_update(NAMESPACES, "changed", {"metadata": {"labels": {"a": "b"}}})
    fake.server_delete(NAMESPACES, "gone")
    fake.seed(NAMESPACES, ns("new"))
    await r.list_all()
    events = handler.take()
    assert sorted(events) == sorted(
        [
            ("upsert", "changed", cached_version(r.cache["changed"]), old_changed_rv),
            ("upsert", "new", cached_version(r.cache["new"]), None),
            ("delete", "gone", events[-1][2], None),
        ]
    )
    assert events[-1][:2] == ("delete", "gone")  # deletions after upserts
    assert sorted(r.cache) == ["changed", "new", "same"]
    assert r.cache["changed"] == fake.stored(NAMESPACES, "changed")


async def test_a_large_list_is_dispatched_with_turns_of_the_loop_between_objects() -> None:
    fake = FakeKube()
    for i in range(20):
        fake.seed(NAMESPACES, ns(f"n{i:02d}"))
    ticks = 0
    seen: list[int] = []

    class Ticking(Recorder):
        def upsert(self, resource: Resource, obj: Json, old: Cached | None) -> None:
            seen.append(ticks)
            super().upsert(resource, obj, old)

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    handler = Ticking()
    r = Reflector(
        fake.rest,
        NAMESPACES,
        handler,
        settings=ReflectorSettings(sleep=Sleeps(), rng=NoJitter(), dispatch_budget=0),
    )
    task = asyncio.get_running_loop().create_task(ticker())
    try:
        await r.list_all()
    finally:
        task.cancel()
    assert len(seen) == 20
    # Another task ran between every two objects (budget 0: a yield after each).
    assert all(b > a for a, b in itertools.pairwise(seen))
    assert [e[:2] for e in handler.events] == [("upsert", f"n{i:02d}") for i in range(20)]


async def test_a_failed_page_leaves_the_cache_as_it_was() -> None:
    fake = FakeKube()
    for i in range(3):
        fake.seed(NAMESPACES, ns(f"n{i}"))
    r = reflector(fake, page_size=1)
    await r.list_all()
    before = dict(r.cache)
    fake.server_delete(NAMESPACES, "n2")
    page_2 = f"{NAMESPACES.collection()}?limit=1&continue=1"
    fake.fail("GET", page_2, status_error(500, "etcd is busy", "InternalError"))
    with pytest.raises(KubeError):
        await r.list_all()
    assert r.cache == before
    await r.list_all()  # a list that starts again from the first page
    assert sorted(r.cache) == ["n0", "n1"]


async def test_each_page_is_handed_over_as_it_arrives_in_list_order() -> None:
    # One page is parsed and handed over while (at most) the next is being read: the
    # list is never held whole. The sync point stays at the end of the list.
    fake = FakeKube()
    for i in range(7):
        fake.seed(NAMESPACES, ns(f"n{i}"))
    requested_at_upsert: list[int] = []
    synced_at_upsert: list[bool] = []

    class Watching(Recorder):
        def upsert(self, resource: Resource, obj: Json, old: Cached | None) -> None:
            requested_at_upsert.append(len(fake.list_queries))
            synced_at_upsert.append(r.synced)
            super().upsert(resource, obj, old)

    handler = Watching()
    r = reflector(fake, handler=handler, page_size=2)
    await r.list_all()
    assert [e[:2] for e in handler.events] == [("upsert", f"n{i}") for i in range(7)]
    # Object i is on page i // 2 (0-based); when it is handed over no more than that
    # page and the one after it have been asked for.
    assert all(asked <= i // 2 + 2 for i, asked in enumerate(requested_at_upsert))
    assert requested_at_upsert[0] <= 2 < len(fake.list_queries) == 4
    assert not any(synced_at_upsert)
    assert r.synced
    assert sorted(r.cache) == [f"n{i}" for i in range(7)]
    assert r.resource_version == str(fake.rv)


async def test_an_expired_continuation_starts_the_list_again_skipping_what_is_cached() -> None:
    # kube-apiserver answers 410 Expired to a continue token whose resourceVersion was
    # compacted. The first page was handed over already; the list starts again from
    # its first page, hands over only what is new or changed, and deletes what vanished
    # meanwhile: nothing is lost or doubled.
    fake = FakeKube()
    for i in range(4):
        fake.seed(NAMESPACES, ns(f"n{i}"))
    page_2 = f"{NAMESPACES.collection()}?limit=2&continue=2"
    fake.fail("GET", page_2, status_error(410, "continue token expired", "Expired"))

    class ChangingServer(Recorder):
        def upsert(self, resource: Resource, obj: Json, old: Cached | None) -> None:
            super().upsert(resource, obj, old)
            if object_key(obj) == "n1" and old is None:  # between the two passes
                fake.server_delete(NAMESPACES, "n0")
                fake.server_update(NAMESPACES, "n3", {"metadata": {"labels": {"a": "b"}}})

    handler = ChangingServer()
    r = reflector(fake, handler=handler, page_size=2)
    await r.list_all()
    assert r.synced
    assert r.stats.expired_continuations == 1
    assert [e[:2] for e in handler.events] == [
        ("upsert", "n0"),
        ("upsert", "n1"),
        # the second pass: n1 is cached at the same version, so skipped
        ("upsert", "n2"),
        ("upsert", "n3"),
        ("delete", "n0"),
    ]
    assert sorted(r.cache) == ["n1", "n2", "n3"]
    assert r.cache["n3"] == fake.stored(NAMESPACES, "n3")
    collection = NAMESPACES.collection()
    # The answered lists (the refused continuation is not among them): the first page,
    # then the list again from its first page.
    assert fake.list_queries == [
        (collection, {"limit": "2"}),
        (collection, {"limit": "2"}),
        (collection, {"limit": "2", "continue": "2"}),
    ]
    assert not fake.failures[("GET", page_2)]  # the continuation was asked, and refused
    # A relist after that still finds what vanished.
    handler.take()
    fake.server_delete(NAMESPACES, "n2")
    await r.list_all()
    assert [e[:2] for e in handler.take()] == [("delete", "n2")]
    assert sorted(r.cache) == ["n1", "n3"]


async def test_a_pass_that_hands_nothing_over_before_expiring_reads_the_list_whole() -> None:
    fake, handler, r = paged_namespaces(4, page_size=2)
    page_2 = f"{NAMESPACES.collection()}?limit=2&continue=2"
    expired = status_error(410, "continue token expired", "Expired")
    fake.fail("GET", page_2, expired, expired)
    await r.list_all()
    assert r.synced
    assert r.stats.expired_continuations == 2
    assert [e[:2] for e in handler.events] == [("upsert", f"n{i}") for i in range(4)]
    collection = NAMESPACES.collection()
    # First page (n0, n1 handed over), refused; again (nothing new), refused; then the
    # whole list in one answer.
    assert fake.list_queries == [
        (collection, {"limit": "2"}),
        (collection, {"limit": "2"}),
        (collection, {}),
    ]


async def test_a_list_failing_midway_keeps_what_it_handed_over_and_deletes_nothing() -> None:
    fake, handler, r = paged_namespaces(4, page_size=2)
    await r.list_all()
    handler.take()
    fake.server_update(NAMESPACES, "n1", {"metadata": {"labels": {"a": "b"}}})
    fake.server_delete(NAMESPACES, "n3")
    r.synced = False  # as after a 410 on the watch
    page_2 = f"{NAMESPACES.collection()}?limit=2&continue=2"
    fake.fail("GET", page_2, status_error(500, "etcd is busy", "InternalError"))
    with pytest.raises(KubeError):
        await r.list_all()
    # The first page's change is in (as a watch would have brought it); nothing is
    # deleted from an incomplete list, and the reflector is not synced.
    assert [e[:2] for e in handler.take()] == [("upsert", "n1")]
    assert sorted(r.cache) == ["n0", "n1", "n2", "n3"]
    assert not r.synced
    await r.list_all()
    assert [e[:2] for e in handler.take()] == [("delete", "n3")]
    assert sorted(r.cache) == ["n0", "n1", "n2"]
    assert r.synced


async def test_a_410_on_the_first_page_is_not_a_continuation() -> None:
    fake = FakeKube()
    fake.seed(NAMESPACES, ns("n0"))
    r = reflector(fake, page_size=1)
    first = f"{NAMESPACES.collection()}?limit=1"
    fake.fail("GET", first, status_error(410, "gone", "Expired"))
    with pytest.raises(KubeError):
        await r.list_all()
    assert r.stats.expired_continuations == 0


# -- watches --------------------------------------------------------------------------
async def test_watch_applies_events_and_bookmarks_move_the_resume_point() -> None:
    fake = FakeKube()
    path = WORKLOADS.collection()
    fake.script_watch(
        path,
        WatchEvent("ADDED", wl("a", "11")),
        WatchEvent("ADDED", wl("b", "12")),
        WatchEvent("MODIFIED", wl("a", "13")),
        WatchEvent("BOOKMARK", {"kind": "Workload", "metadata": {"resourceVersion": "20"}}),
        WatchEvent("DELETED", wl("b", "21")),
        WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": "30"}}),
    )
    handler = Recorder()
    r = reflector(fake, WORKLOADS, handler)
    r.resource_version = "10"
    await r.watch_once()
    assert handler.events == [
        ("upsert", "team/a", "11", None),
        ("upsert", "team/b", "12", None),
        ("upsert", "team/a", "13", "11"),
        ("delete", "team/b", "12", None),  # the cached object, as last seen
    ]
    assert r.resource_version == "30"
    assert list(r.cache) == ["team/a"]
    assert handler.objects[-1]["kind"] == "Workload"  # the handler's decoder needs it
    assert r.stats.events == 4
    [(watched, query, read_timeout)] = fake.watch_queries
    assert watched == path
    assert query == {
        "resourceVersion": "10",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "240",
    }
    assert read_timeout == 240 + r.read_slack


async def test_watch_410_on_the_request_is_gone() -> None:
    fake = FakeKube()
    fake.script_watch(NAMESPACES.collection(), status_error(410, "too old", "Expired"))
    with pytest.raises(Gone):
        await reflector(fake).watch_once()


async def test_watch_410_error_event_is_gone() -> None:
    fake = FakeKube()
    fake.script_watch(
        NAMESPACES.collection(),
        WatchEvent("ERROR", {"kind": "Status", "code": 410, "reason": "Expired"}),
    )
    with pytest.raises(Gone):
        await reflector(fake).watch_once()


async def test_other_error_events_are_kube_errors() -> None:
    fake = FakeKube()
    fake.script_watch(
        NAMESPACES.collection(), WatchEvent("ERROR", {"code": 500, "message": "etcd down"})
    )
    fake.script_watch(NAMESPACES.collection(), WatchEvent("ERROR", {"message": "no code"}))
    r = reflector(fake)
    with pytest.raises(KubeError) as caught:
        await r.watch_once()
    assert caught.value.status == 500
    with pytest.raises(KubeError) as caught:
        await r.watch_once()
    assert caught.value.status == 0


async def test_a_failing_handler_does_not_stop_the_watch() -> None:
    fake = FakeKube()
    fake.script_watch(
        WORKLOADS.collection(),
        WatchEvent("ADDED", wl("bad", "2")),
        WatchEvent("ADDED", wl("good", "3")),
    )
    handler = Recorder(fail_on="team/bad")
    r = reflector(fake, WORKLOADS, handler)
    await r.watch_once()
    assert [e[1] for e in handler.events] == ["team/bad", "team/good"]
    assert sorted(r.cache) == ["team/bad", "team/good"]
    assert r.resource_version == "3"


# -- for ever -------------------------------------------------------------------------
async def test_run_relists_and_diffs_after_410_then_watches_from_the_new_list() -> None:
    fake = FakeKube()
    fake.seed(NAMESPACES, ns("kept"))
    fake.seed(NAMESPACES, ns("deleted-in-the-gap"))
    handler = Recorder()
    r = reflector(fake, handler=handler)
    await r.list_all()
    handler.take()
    # While the reflector was away, the server compacted past its resume point.
    fake.server_delete(NAMESPACES, "deleted-in-the-gap")
    fake.seed(NAMESPACES, ns("created-in-the-gap"))
    fake.compacted = fake.rv
    task = asyncio.create_task(r.run())
    try:
        await until(lambda: fake.waiting == 1)
        assert sorted(e[:2] for e in handler.take()) == [
            ("delete", "deleted-in-the-gap"),
            ("upsert", "created-in-the-gap"),
        ]
        assert r.stats.gone == 1
        assert r.stats.lists == 2
        # The new watch resumes from the relist, and sees what happens next.
        assert fake.watch_queries[-1][1]["resourceVersion"] == str(fake.rv)
        fake.seed(NAMESPACES, ns("later"))
        await until(lambda: "later" in r.cache)
        assert handler.take() == [("upsert", "later", str(fake.rv), None)]
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_run_backs_off_exponentially_on_errors_and_resets_after_a_good_watch() -> None:
    fake = FakeKube()
    path = NAMESPACES.collection()
    for code in (500, 503, 429):
        fake.script_watch(path, status_error(code))
    fake.script_watch(path)  # one watch that ends normally (the server's timeout)
    fake.script_watch(path, KubeError(0, "watch interrupted: read timeout"))
    sleeps = Sleeps(stop_after=4)
    r = reflector(fake, sleep=sleeps)
    await r.list_all()
    with pytest.raises(Stop):
        await r.run()
    assert sleeps.delays == [0.5, 1.0, 2.0, 0.5]
    assert r.stats.errors == 4
    assert r.stats.watches == 5
    assert r.stats.lists == 1  # errors reconnect from the resume point, no relist
    assert {q["resourceVersion"] for _, q, _ in fake.watch_queries} == {r.resource_version}


async def test_backoff_is_capped_and_jitter_only_adds() -> None:
    fake = FakeKube()
    path = NAMESPACES.collection()
    for _ in range(12):
        fake.script_watch(path, status_error(500))
    sleeps = Sleeps(stop_after=12)
    r = Reflector(
        fake.rest,
        NAMESPACES,
        Recorder(),
        settings=ReflectorSettings(sleep=sleeps, rng=random.Random(7)),
    )
    await r.list_all()
    with pytest.raises(Stop):
        await r.run()
    base = [min(MAX_BACKOFF, 0.5 * 2**i) for i in range(12)]
    assert all(b <= d <= b * 1.2 for b, d in zip(base, sleeps.delays, strict=True))
    assert base[-1] == MAX_BACKOFF


async def test_run_lists_first_and_retries_a_failed_list_with_backoff() -> None:
    fake = FakeKube()
    fake.seed(NAMESPACES, ns("a"))
    path = NAMESPACES.collection()
    fake.fail("GET", path, status_error(500), status_error(500))
    sleeps = Sleeps()
    handler = Recorder()
    r = reflector(fake, handler=handler, sleep=sleeps)
    task = asyncio.create_task(r.run())
    try:
        await until(lambda: fake.waiting == 1)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert sleeps.delays == [0.5, 1.0]
    assert r.synced
    assert [e[:2] for e in handler.events] == [("upsert", "a")]


async def test_an_unexpected_error_backs_off_instead_of_ending_the_reflector() -> None:
    fake = FakeKube()
    path = NAMESPACES.collection()
    fake.script_watch(path, RuntimeError("a line longer than the read buffer"))
    sleeps = Sleeps(stop_after=1)
    r = reflector(fake, sleep=sleeps)
    await r.list_all()
    with pytest.raises(Stop):
        await r.run()
    assert r.stats.errors == 1
    assert sleeps.delays == [0.5]


# -- what the cache keeps ----------------------------------------------------------------
MANAGED = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {}}}]


async def test_managed_fields_are_dropped_from_listed_and_watched_objects() -> None:
    fake = FakeKube()
    listed = wl("listed", "5")
    listed["metadata"]["managedFields"] = MANAGED
    fake.seed(WORKLOADS, listed)
    watched = wl("watched", "11")
    watched["metadata"]["managedFields"] = MANAGED
    fake.script_watch(WORKLOADS.collection(), WatchEvent("ADDED", watched))
    handler = Recorder()
    r = reflector(fake, WORKLOADS, handler)
    await r.list_all()
    await r.watch_once()
    assert sorted(r.cache) == ["team/listed", "team/watched"]
    for obj in handler.objects:
        assert "managedFields" not in obj["metadata"]
        assert obj["metadata"]["namespace"] == "team"  # the rest of metadata stays


async def test_workloads_are_cached_as_records_and_other_kinds_as_objects() -> None:
    fake = FakeKube()
    listed = wl("listed", "5")
    listed["metadata"]["labels"] = {"kueue.x-k8s.io/job-uid": "j-uid"}
    listed["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "j-uid"}
    ]
    listed["status"] = {"conditions": [{"type": "Admitted", "status": "True"}]}
    fake.seed(WORKLOADS, listed)
    fake.seed(NAMESPACES, ns("team"))
    r = reflector(fake, WORKLOADS, Recorder())
    await r.list_all()
    record = r.cache["team/listed"]
    assert isinstance(record, WorkloadRecord)
    stored = fake.stored(WORKLOADS, "team/listed")
    assert stored is not None
    assert record.resource_version == stored["metadata"]["resourceVersion"]
    assert (record.key, record.active) == ("team/listed", True)
    assert record.job_uid == "j-uid"
    assert [(o.kind, o.name, o.uid) for o in record.owners] == [("Job", "j", "j-uid")]
    assert record.condition("Admitted") is not None
    assert record.condition("Finished") is None
    namespaces = reflector(fake, NAMESPACES, Recorder())
    await namespaces.list_all()
    assert namespaces.cache["team"] == fake.stored(NAMESPACES, "team")


async def test_a_list_waits_for_the_handler_after_each_page() -> None:
    fake = FakeKube()
    for i in range(5):
        fake.seed(NAMESPACES, ns(f"n{i}"))
    handler = Recorder()
    seen_per_page: list[int] = []

    async def after_page() -> None:
        seen_per_page.append(len(handler.events))

    r = Reflector(
        fake.rest,
        NAMESPACES,
        handler,
        settings=ReflectorSettings(page_size=2),
        after_page=after_page,
    )
    await r.list_all()
    # Three pages (2, 2, 1): the handler had each page's objects before the next came.
    assert seen_per_page == [2, 4, 5]


async def test_a_resource_with_a_label_selector_lists_and_watches_only_what_it_selects() -> None:
    fake = FakeKube()
    managed = {
        "metadata": {"name": "a", "namespace": "team", "labels": {"kueue.x-k8s.io/managed": "true"}}
    }
    fake.seed(PODS, managed)
    fake.seed(PODS, {"metadata": {"name": "b", "namespace": "team", "labels": {}}})
    r = reflector(fake, PODS)
    await r.list_all()
    assert list(r.cache) == ["team/a"]
    assert fake.list_queries == [
        (PODS.collection(), {"limit": "500", "labelSelector": "kueue.x-k8s.io/managed=true"})
    ]
    task = asyncio.create_task(r.watch_once())
    await until(lambda: bool(fake.watch_queries))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [(_, query, _)] = fake.watch_queries
    assert query["labelSelector"] == "kueue.x-k8s.io/managed=true"
