"""Kubernetes Events (`events.k8s.io/v1`) for what the leader did (docs/cluster.md#events).

The leader's controllers say what they did with :meth:`EventRecorder.record`, which never
waits: the event goes into a bounded queue (full: the event is dropped and counted, as
client-go's broadcaster drops). One task writes them, with its own token bucket so that
Events never delay a status write.

An event like one written less than six minutes before (same object, type, reason,
action and note: client-go's "isomorphic" events) is not written again: the first one's
`series` counts it (`count`, `lastObservedTime`), patched at most every
`series_interval` seconds. A write that fails is counted and dropped: Events are a
courtesy, and a retry would only delay the next ones.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Final, Literal

from scheduler.kubeapi.client import KubeRest
from scheduler.kubeapi.errors import Json, KubeError
from scheduler.runtime.kube.leader import micro_time
from scheduler.runtime.kube.ratelimit import TokenBucket
from scheduler.runtime.kube.resources import EVENTS, Resource

log = logging.getLogger(__name__)

REPORTING_CONTROLLER: Final = "queuescope"
NOTE_LIMIT: Final = 1024  # bytes: events.k8s.io/v1 validation refuses a longer note
QUEUE_LIMIT: Final = 1000  # client-go's broadcaster queue
SERIES_WINDOW: Final = timedelta(minutes=6)  # client-go's isomorphic-event window
# Kueue's default client rate (clientConnection qps 50, burst 100), which its Events share
# with every other write; here they have it to themselves.
EVENT_QPS: Final = 50.0
EVENT_BURST: Final = 100
EventType = Literal["Normal", "Warning"]


@dataclass(frozen=True, slots=True)
class Regarding:
    """The object an Event is about."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str

    @classmethod
    def of(cls, resource: Resource, namespace: str, name: str, uid: str) -> Regarding:
        return cls(resource.api_version, resource.kind, namespace, name, uid)

    def to_json(self) -> Json:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
        }


@dataclass(frozen=True, slots=True)
class Event:
    """One thing that happened to `regarding`; `reason` is also the action, as Kueue
    records them."""

    regarding: Regarding
    reason: str
    note: str
    type: EventType = "Normal"


def truncated(note: str) -> str:
    """At most NOTE_LIMIT bytes of UTF-8, ending in "..." when cut (as Kueue cuts)."""
    data = note.encode()
    if len(data) <= NOTE_LIMIT:
        return note
    return data[: NOTE_LIMIT - 3].decode(errors="ignore") + "..."


@dataclass(slots=True)
class _Series:
    """A written Event and the isomorphic ones since."""

    name: str
    namespace: str
    count: int
    last_observed: datetime
    written_count: int  # the count the server holds (1: no series yet)


@dataclass(slots=True)
class EventStats:
    """Events by outcome, each named as its `result` label in queuescope_events_total."""

    written: int = 0
    repeated: int = 0  # isomorphic events folded into a series
    series_update: int = 0  # patches of a series' count
    dropped: int = 0  # the queue was full
    error: int = 0


def _wall_now() -> datetime:
    return datetime.now(UTC)


class EventRecorder:
    def __init__(
        self,
        rest: KubeRest,
        instance: str,
        *,
        limiter: TokenBucket | None = None,
        wall: Callable[[], datetime] = _wall_now,
        series_interval: float = 30.0,
    ) -> None:
        self.rest = rest
        self.instance = instance[:128]  # the API's limit on reportingInstance
        self.limiter = limiter or TokenBucket(EVENT_QPS, EVENT_BURST)
        self.wall = wall
        self.series_interval = series_interval
        self.stats = EventStats()
        self._queue: deque[tuple[Event, datetime]] = deque()
        self._ready = asyncio.Event()
        self._series: dict[Event, _Series] = {}
        self._running = False
        self._last_stamp = 0  # nanoseconds of the last Event name: each name is unique

    @property
    def backlog(self) -> int:
        return len(self._queue)

    def record(self, *events: Event) -> None:
        """Queue events to write; never waits. Only while the recorder runs (the leader)."""
        if not self._running:
            return
        now = self.wall()
        for event in events:
            if len(self._queue) >= QUEUE_LIMIT:
                self.stats.dropped += 1
                continue
            self._queue.append((event, now))
        self._ready.set()

    async def run(self) -> None:
        """Write queued events until cancelled; the series' counts on the side."""
        self._running = True
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._write_series_periodically())
                while True:
                    await self._ready.wait()
                    self._ready.clear()
                    while self._queue:
                        event, at = self._queue.popleft()
                        await self.write(event, at)
        finally:
            self._running = False
            self._queue.clear()
            self._series.clear()

    async def write(self, event: Event, at: datetime) -> None:
        """Write one event observed at `at`, or fold it into the series of an earlier one."""
        series = self._series.get(event)
        if series is not None and at - series.last_observed <= SERIES_WINDOW:
            series.count += 1
            series.last_observed = at
            self.stats.repeated += 1
            return
        # client-go's name, `<object>.<nanoseconds in hex>`, made unique within the process.
        self._last_stamp = max(int(at.timestamp() * 1e9), self._last_stamp + 1)
        name = f"{event.regarding.name}.{self._last_stamp:x}"
        namespace = event.regarding.namespace or "default"
        body: Json = {
            "apiVersion": EVENTS.api_version,
            "kind": EVENTS.kind,
            "metadata": {"name": name, "namespace": namespace},
            "eventTime": micro_time(at),
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self.instance,
            "action": event.reason,
            "reason": event.reason,
            "type": event.type,
            "note": truncated(event.note),
            "regarding": event.regarding.to_json(),
        }
        if await self._send(
            f"create {name}", partial(self.rest.create, EVENTS.collection(namespace), body)
        ):
            self.stats.written += 1
            self._series[event] = _Series(name, namespace, 1, at, 1)

    async def write_series(self) -> None:
        """Patch the count of every series that grew; forget those six minutes quiet."""
        now = self.wall()
        for event, series in list(self._series.items()):
            if series.count != series.written_count:
                patch = {
                    "series": {
                        "count": series.count,
                        "lastObservedTime": micro_time(series.last_observed),
                    }
                }
                path = EVENTS.item(series.name, series.namespace)
                if await self._send(
                    f"series {series.name}", partial(self.rest.merge_patch, path, patch)
                ):
                    self.stats.series_update += 1
                series.written_count = series.count
            if now - series.last_observed > SERIES_WINDOW:
                del self._series[event]

    async def _write_series_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.series_interval)
            await self.write_series()

    async def _send(self, what: str, call: Callable[[], Awaitable[Json]]) -> bool:
        """Make the write `call` after a token; False when it failed."""
        await self.limiter.acquire()
        try:
            await call()
        except KubeError as err:
            self.stats.error += 1
            if err.status != 404:  # 404: the namespace is going away
                log.warning("event=event-write-failed %s error=%s", what, err)
            return False
        return True
