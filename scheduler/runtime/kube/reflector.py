"""List and watch one resource into a local cache, for ever (client-go's reflector).

* Lists are paged and handed over page by page as they arrive, diffed against the
  cache (one page is held parsed at a time; see `list_all` for an expired
  continuation); afterwards a watch resumes from the last resourceVersion seen, with
  bookmarks so that the resume point keeps moving on quiet resources.
* `410 Gone` (on the watch request or as an ERROR event) means the resume point fell
  out of the server's window: the reflector lists again and diffs the new list
  against its cache, so the handler sees exactly the changes it missed, deletions
  included.
* Each watch asks the server to end it after a few minutes, and the socket has a read
  timeout above that: a connection that died silently is noticed, not waited on.
* Failures reconnect with exponential backoff; one undecodable object is the
  handler's problem, never the reflector's.
* The cache keeps what `records.keep` makes of each object (a compact record for a
  Workload; docs/operations.md#memory-to-plan-for).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from scheduler.kubeapi.backoff import RECONNECT
from scheduler.kubeapi.client import KubeRest
from scheduler.kubeapi.errors import Json, KubeError
from scheduler.runtime.kube.records import Cached, cached_key, cached_version, keep
from scheduler.runtime.kube.resources import (
    WATCH_SELECTORS,
    Resource,
    object_key,
    resource_version,
)
from scheduler.runtime.stepclock import TimeBox

log = logging.getLogger(__name__)

PAGE_SIZE = 500
WATCH_SECONDS = (240, 360)  # the server ends each watch after a random time in this range
READ_SLACK = 30.0  # seconds of silence beyond the watch's own timeout before giving up
MAX_BACKOFF = RECONNECT.cap
# Handing a (re)list to the handler decodes every object (~0.2 ms each): 100k Workloads
# would hold the loop for 20 s. The dispatch yields whenever a stretch reaches this.
DISPATCH_BUDGET = 0.003
# A list whose continuation expires starts again from its first page this many times at
# most (each time going further, since what is cached is skipped), then reads it whole.
MAX_LIST_RESTARTS = 3


def drop_managed_fields(obj: Json) -> Json:
    """`obj` without `metadata.managedFields`, which nothing here reads and which was
    the largest part of a cached Workload (docs/benchmarks.md, "Cluster-mode memory").
    A status write that omits it leaves the server's copy unchanged."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


def _abandon(task: asyncio.Task[Json] | None) -> None:
    """Cancel a page read ahead that is no longer wanted (the list failed or was
    cancelled), retrieving its failure if it already had one so none goes unreported."""
    if task is None:
        return
    if task.done():
        if not task.cancelled():
            task.exception()
        return
    task.cancel()


class _ContinuationExpired(Exception):  # noqa: N818
    """A paged list's continuation expired after `listed` objects (`handed` of them
    handed over) in this pass."""

    def __init__(self, listed: int, handed: int) -> None:
        super().__init__(f"continuation expired after {listed} objects")
        self.listed = listed
        self.handed = handed


class Gone(Exception):  # noqa: N818 (named after the HTTP status)
    """The resume resourceVersion is too old: list again."""


class Handler(Protocol):
    def upsert(self, resource: Resource, obj: Json, old: Cached | None) -> None: ...

    def delete(self, resource: Resource, obj: Cached) -> None: ...


@dataclass(slots=True)
class ReflectorStats:
    lists: int = 0
    watches: int = 0
    gone: int = 0
    expired_continuations: int = 0  # paged lists finished as one full list
    errors: int = 0
    events: int = 0


@dataclass(frozen=True, slots=True)
class ReflectorSettings:
    """A reflector's list page, watch length (drawn between the two bounds), read slack
    past it, how long one dispatch of events may hold the loop, and where it sleeps and
    draws its jitter (tests pass their own)."""

    page_size: int = PAGE_SIZE
    watch_seconds: tuple[int, int] = WATCH_SECONDS
    read_slack: float = READ_SLACK
    dispatch_budget: float = DISPATCH_BUDGET
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    rng: random.Random | None = None  # None: a fresh random.Random()


class Reflector:
    def __init__(
        self,
        rest: KubeRest,
        resource: Resource,
        handler: Handler,
        *,
        settings: ReflectorSettings = ReflectorSettings(),
        after_page: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.rest = rest
        self.resource = resource
        self.handler = handler
        self.page_size = settings.page_size
        self.watch_seconds = settings.watch_seconds
        self.read_slack = settings.read_slack
        self._sleep = settings.sleep
        self._rng = settings.rng or random.Random()
        self.dispatch_budget = settings.dispatch_budget
        # Awaited after each page of a list is handed over: the handler's backpressure.
        self.after_page = after_page
        self.cache: dict[str, Cached] = {}
        self.resource_version = ""
        self.synced = False
        self.stats = ReflectorStats()

    # -- listing ---------------------------------------------------------------------
    async def list_all(self) -> None:
        """List every object and reconcile the cache with it, page by page: each page's
        new or changed objects are cached and handed over as it arrives (the next page
        is read meanwhile), so one page is held parsed at a time, not the whole list;
        objects that are gone are found by absence and deleted once the last page is
        in, after every upsert. A list that fails midway keeps what it handed over
        (each object as the server held it, as a watch would have delivered it) and
        deletes nothing; `synced` is set at the end only (docs/architecture.md#lists-page-by-page).

        When a continuation expires (the list outlived the server's compaction window)
        the list starts again from the first page, skipping what is already cached at
        the same resourceVersion, so each attempt goes further; if an attempt handed
        nothing over, the list is read in one request, as client-go's pager does
        (docs/operations.md#memory-to-plan-for)."""
        paged, restarts = True, 0
        while True:
            try:
                self.resource_version = await self._list_pass(paged)
                break
            except _ContinuationExpired as err:
                self.stats.expired_continuations += 1
                restarts += 1
                paged = err.handed > 0 and restarts <= MAX_LIST_RESTARTS
                log.warning(
                    "event=list-continuation-expired resource=%s listed=%d handed=%d action=%s",
                    self.resource.plural,
                    err.listed,
                    err.handed,
                    "relist" if paged else "full-list",
                )
        self.stats.lists += 1
        self.synced = True

    async def _list_pass(self, paged: bool) -> str:
        """One list from the first page (`paged`) or in one request, reconciled with the
        cache as it comes; the list's resourceVersion. Only the keys listed are kept
        until the end, for the deletes.
        Nothing else of this resource runs until the pass is done (the watch starts
        after it), so yielding between objects changes no order."""
        listed: set[str] = set()
        handed = 0
        version = ""
        box = TimeBox(self.dispatch_budget)
        query: dict[str, str] = {"limit": str(self.page_size)} if paged else {}
        next_page: asyncio.Task[Json] | None = asyncio.ensure_future(self._page(query))
        try:
            while next_page is not None:
                try:
                    page = await next_page
                except KubeError as err:
                    if err.status == 410 and "continue" in query:
                        raise _ContinuationExpired(len(listed), handed) from err
                    raise
                next_page = None
                meta = page.get("metadata") or {}
                token = meta.get("continue") or ""
                if token:
                    query = {"limit": str(self.page_size), "continue": token}
                    next_page = asyncio.ensure_future(self._page(query))
                else:
                    version = str(meta.get("resourceVersion", ""))
                items = page.pop("items", None) or []
                del page
                handed_before = handed
                for obj in items:
                    if isinstance(obj, dict) and self._reconcile(obj, listed):
                        handed += 1
                        await box.pause()
                del items
                if self.after_page is not None and handed > handed_before:
                    await self.after_page()
        finally:
            _abandon(next_page)
        for key in [k for k in self.cache if k not in listed]:
            old = self.cache.pop(key)
            self._dispatch_delete(old)
            await box.pause()
        return version

    def _selected(self, query: dict[str, str]) -> dict[str, str]:
        selector = WATCH_SELECTORS.get(self.resource.kind, "")
        return {**query, "labelSelector": selector} if selector else query

    async def _page(self, query: dict[str, str]) -> Json:
        return await self.rest.get(self.resource.collection(), self._selected(query))

    def _reconcile(self, obj: Json, listed: set[str]) -> bool:
        """Note one listed object and hand it over if the cache lacks it or holds
        another resourceVersion of it; whether it was handed over."""
        # List items carry no kind/apiVersion; the handler's decoder needs them.
        obj.setdefault("kind", self.resource.kind)
        obj.setdefault("apiVersion", self.resource.api_version)
        key = object_key(drop_managed_fields(obj))
        old = self.cache.get(key)
        if old is not None and cached_version(old) == resource_version(obj):
            listed.add(cached_key(old))  # the cached record's string: no second copy
            return False
        kept = self.put(obj)
        listed.add(cached_key(kept))
        self._dispatch_upsert(obj, old)
        return True

    # -- watching --------------------------------------------------------------------
    async def watch_once(self) -> None:
        """One watch from the current resourceVersion until the server ends it."""
        seconds = self._rng.randint(*self.watch_seconds)
        query = {
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(seconds),
        }
        self.stats.watches += 1
        try:
            async for event in self.rest.watch(
                self.resource.collection(),
                self._selected(query),
                read_timeout=seconds + self.read_slack,
            ):
                self._on_event(event.type, event.object)
        except KubeError as err:
            if err.status == 410:
                raise Gone(str(err)) from err
            raise

    def _on_event(self, kind: str, obj: Json) -> None:
        if kind == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise Gone(str(obj.get("message", "")))
            raise KubeError(int(code) if isinstance(code, int) else 0, "watch error", obj)
        rv = resource_version(obj)
        if rv:
            self.resource_version = rv
        if kind == "BOOKMARK":
            return
        self.stats.events += 1
        obj.setdefault("kind", self.resource.kind)
        obj.setdefault("apiVersion", self.resource.api_version)
        drop_managed_fields(obj)
        key = object_key(obj)
        if kind == "DELETED":
            old = self.cache.pop(key, None)
            self._dispatch_delete(old if old is not None else keep(self.resource.kind, obj))
            return
        old = self.cache.get(key)
        self.put(obj)
        self._dispatch_upsert(obj, old)

    def put(self, obj: Json) -> Cached:
        """Cache what `records.keep` makes of `obj`; a new entry's key is the record's
        own string, so the cache holds one copy of it, not two."""
        kept = keep(self.resource.kind, obj)
        self.cache[cached_key(kept)] = kept
        return kept

    def _dispatch_upsert(self, obj: Json, old: Cached | None) -> None:
        try:
            self.handler.upsert(self.resource, obj, old)
        except Exception:
            log.exception(
                "event=handler-failed kind=%s key=%s", self.resource.kind, object_key(obj)
            )

    def _dispatch_delete(self, obj: Cached) -> None:
        try:
            self.handler.delete(self.resource, obj)
        except Exception:
            log.exception(
                "event=handler-failed kind=%s key=%s", self.resource.kind, cached_key(obj)
            )

    # -- for ever --------------------------------------------------------------------
    async def run(self) -> None:
        """Watch (listing first if needed) until cancelled."""
        failures = 0
        while True:
            try:
                if not self.synced or not self.resource_version:
                    await self.list_all()
                await self.watch_once()
                failures = 0
            except Gone as err:
                self.stats.gone += 1
                log.info("event=watch-expired kind=%s detail=%s", self.resource.kind, err)
                self.resource_version = ""
                self.synced = False
            except Exception as err:  # whatever breaks a watch, the store lives on
                self.stats.errors += 1
                failures += 1
                delay = RECONNECT.delay(failures - 1, self._rng.random())
                if not isinstance(err, KubeError):
                    log.exception("event=watch-crashed kind=%s", self.resource.kind)
                log.warning(
                    "event=watch-failed kind=%s error=%s retry_in=%.1fs",
                    self.resource.kind,
                    err,
                    delay,
                )
                await self._sleep(delay)
