"""The Kubernetes store: the API server's objects into the engine.

One reflector per watched resource keeps a cache of the server's objects. The initial
sync lists every resource in dependency order (queues before Workloads) and then
marks the engine synced, so `/readyz` turns true only after a full picture; watches
then run side by side.

What the core reads goes to the engine as commands. Workloads carry their status:
a follower takes what the leader wrote; the leader keeps its own, newer decisions
(`ApplyObject.keep_status`) and only reads two signals from it, `Finished` and
`PodsReady` set by someone else. Other listeners (the Job integration, the status
writers) see every change through :meth:`subscribe`.

Each object is decoded once, into the core's structures; of a Workload the cache then
keeps a compact :class:`WorkloadRecord` (what the writers and the Job integration
read), not the object (docs/operations.md#memory-to-plan-for).

An object that cannot be decoded is logged once per resourceVersion and skipped; it
never stops the store.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from scheduler.api import Workload
from scheduler.api.decode import ApiError
from scheduler.core.status import workload_status
from scheduler.kubeapi.backoff import Backoff
from scheduler.kubeapi.client import KubeRest
from scheduler.kubeapi.errors import Json, KubeError
from scheduler.runtime.commands import (
    ApplyObject,
    Barrier,
    DeleteObject,
    Finish,
    MarkSynced,
    PodsReady,
)
from scheduler.runtime.engine import Engine
from scheduler.runtime.kube.decode import decode_live
from scheduler.runtime.kube.normalize import same_status
from scheduler.runtime.kube.records import (
    Cached,
    WorkloadRecord,
    cached_key,
    cached_version,
    content_digest,
    keep,
)
from scheduler.runtime.kube.reflector import Reflector, drop_managed_fields
from scheduler.runtime.kube.resources import (
    ADMISSION_CHECKS,
    CLUSTER_QUEUES,
    COHORTS,
    LOCAL_QUEUES,
    NAMESPACES,
    OPTIONAL_KINDS,
    RESOURCE_FLAVORS,
    WATCHED,
    WORKLOADS,
    Resource,
    object_key,
    resource_version,
)

log = logging.getLogger(__name__)

# The kinds the scheduling core models; the others are read by listeners only.
RESYNC_BUDGET = 0.003  # seconds of work between two yields when taking server status
CORE_KINDS = frozenset(
    r.kind for r in (NAMESPACES, RESOURCE_FLAVORS, COHORTS, CLUSTER_QUEUES, LOCAL_QUEUES, WORKLOADS)
) | {ADMISSION_CHECKS.kind}

# (resource, new, old): a WorkloadRecord for a Workload, the object for other kinds.
Listener = Callable[[Resource, Cached | None, Cached | None], None]


@dataclass(slots=True)
class StoreStats:
    applied: int = 0
    deleted: int = 0
    decode_errors: int = 0


def _same_except_status(old: Cached, new: Cached) -> bool:
    """Equal but for status and the bookkeeping metadata a status write changes."""

    def digest(value: Cached) -> int:
        return value.digest if isinstance(value, WorkloadRecord) else content_digest(value)

    return digest(old) == digest(new)


def _check_states(value: Cached) -> object:
    status = value.status if isinstance(value, WorkloadRecord) else value.get("status")
    return status.get("admissionChecks") if isinstance(status, dict) else None


def _check_states_changed(old: Cached | None, new: Cached) -> bool:
    """Whether `status.admissionChecks` differs: a check's controller wrote a state (or
    this is the echo of our own write, which the core's merge leaves as it is)."""
    return old is not None and _check_states(old) != _check_states(new)


def _newer(a: str, b: str) -> bool:
    """Is resourceVersion `a` newer than `b`? They are opaque in general but etcd's
    are integers; with anything else, trust the newest arrival."""
    if a.isdigit() and b.isdigit():
        return int(a) > int(b)
    return True


class KubeStore:
    def __init__(
        self,
        rest: KubeRest,
        engine: Engine,
        *,
        resources: tuple[Resource, ...] = WATCHED,
        relist_backoff: float = 1.0,
    ) -> None:
        self.rest = rest
        self.engine = engine
        self.reflectors: dict[str, Reflector] = {
            r.kind: Reflector(rest, r, self, after_page=self._caught_up) for r in resources
        }
        self.leading = False
        self.synced = asyncio.Event()
        self.stats = StoreStats()
        self._listeners: list[Listener] = []
        self._bad: dict[str, str] = {}  # key -> resourceVersion already reported
        # Doubling from `relist_backoff` to 32 times it, at most 30 s.
        self._relist_backoff = Backoff(relist_backoff, 2.0, cap=30.0)

    # -- reading ---------------------------------------------------------------------
    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def get(self, resource: Resource, key: str) -> Json | None:
        """The cached object of a kind other than Workload (see :meth:`workload`)."""
        value = self._cached(resource, key)
        assert not isinstance(value, WorkloadRecord), "a Workload: use workload()"
        return value

    def items(self, resource: Resource) -> Iterator[Json]:
        """The cached objects of a kind other than Workload (see :meth:`workloads`)."""
        for value in self._values(resource):
            assert not isinstance(value, WorkloadRecord), "Workloads: use workloads()"
            yield value

    def workload(self, key: str) -> WorkloadRecord | None:
        value = self._cached(WORKLOADS, key)
        return value if isinstance(value, WorkloadRecord) else None

    def workloads(self) -> Iterator[WorkloadRecord]:
        for value in self._values(WORKLOADS):
            if isinstance(value, WorkloadRecord):
                yield value

    def _cached(self, resource: Resource, key: str) -> Cached | None:
        reflector = self.reflectors.get(resource.kind)
        return reflector.cache.get(key) if reflector is not None else None

    def _values(self, resource: Resource) -> list[Cached]:
        reflector = self.reflectors.get(resource.kind)
        return list(reflector.cache.values()) if reflector is not None else []

    def observe(self, resource: Resource, obj: Json) -> None:
        """Record an object this process just wrote or read (a write's response, a
        re-read after a conflict), unless the cache already holds a newer one."""
        reflector = self.reflectors.get(resource.kind)
        if reflector is None:
            return
        obj.setdefault("kind", resource.kind)
        obj.setdefault("apiVersion", resource.api_version)
        drop_managed_fields(obj)
        key = object_key(obj)
        old = reflector.cache.get(key)
        if old is not None and not _newer(resource_version(obj), cached_version(old)):
            return
        reflector.put(obj)
        self.upsert(resource, obj, old)

    async def _caught_up(self) -> None:
        """Wait until the running engine has applied what the store handed it, so that
        at most one page of a list waits in its queue: each waiting object is a decoded
        model of several KiB, and without this nothing bounds how far a list of 100k
        Workloads runs ahead of an engine short of CPU."""
        if not self.engine.running:
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.engine.submit(Barrier(done))
        await done

    # -- running ---------------------------------------------------------------------
    async def sync(self) -> None:
        """List everything once, in dependency order, then mark the engine synced."""
        for reflector in self.reflectors.values():
            failures = 0
            while True:
                try:
                    await reflector.list_all()
                    break
                except KubeError as err:
                    if err.status == 404 and reflector.resource.kind in OPTIONAL_KINDS:
                        # Its CRD is not installed: nothing to take yet; the watch loop
                        # lists it once it is (docs/cluster.md#jobsets).
                        log.warning(
                            "event=kind-not-served kind=%s error=%s",
                            reflector.resource.kind,
                            err,
                        )
                        break
                    failures += 1
                    log.warning(
                        "event=initial-list-failed kind=%s error=%s attempt=%d",
                        reflector.resource.kind,
                        err,
                        failures,
                    )
                    await asyncio.sleep(self._relist_backoff.delay(min(failures, 5)))
        self.engine.submit(MarkSynced())
        self.synced.set()
        log.info(
            "event=store-synced %s",
            " ".join(f"{k}={len(r.cache)}" for k, r in self.reflectors.items()),
        )

    async def run(self) -> None:
        """Sync, then watch every resource until cancelled."""
        if not self.synced.is_set():
            await self.sync()
        async with asyncio.TaskGroup() as group:
            for kind, reflector in self.reflectors.items():
                group.create_task(reflector.run(), name=f"watch-{kind}")

    def set_leading(self, leading: bool) -> None:
        """Leadership changed: from now on a Workload's status is the core's (leading)
        or the server's (following). A replica that stops leading and keeps running
        then calls :meth:`take_server_status`; one that is shutting down does not."""
        self.leading = leading

    async def take_server_status(self, budget: float = RESYNC_BUDGET) -> int:
        """After losing the Lease: take the server's copy again for every Workload whose
        status in the core differs from it, dropping decisions that were never written;
        the number taken. Re-decoding all of 100k Workloads in one step blocked the
        loop for tens of seconds, so this compares first (rendering is far cheaper than
        decoding) and works in `budget`-long stretches. The cache keeps records, not
        objects: a Workload that differs is read from the server again."""
        keys = [record.key for record in self.workloads()]
        differing: list[str] = []
        done = 0
        while done < len(keys):
            started = time.perf_counter()
            stretch_end = done + 1  # at least one key per stretch
            while done < len(keys) and (
                done < stretch_end or time.perf_counter() - started < budget
            ):
                key = keys[done]
                done += 1
                record = self.workload(key)
                if record is not None and self._differs_from_core(key, record):
                    differing.append(key)
            await asyncio.sleep(0)
        taken = 0
        failures = 0
        while differing and not self.leading:
            failed: list[str] = []
            for key in differing:
                if self.leading:
                    break
                taken += await self._retake(key, failed)
            differing = failed
            if failed:
                failures += 1
                log.warning(
                    "event=status-retake-failed workloads=%d attempt=%d", len(failed), failures
                )
                await asyncio.sleep(self._relist_backoff.delay(min(failures, 5)))
        return taken

    async def _retake(self, key: str, failed: list[str]) -> int:
        """Read one Workload from the server and give the core its status; 1 if taken."""
        namespace, _, name = key.partition("/")
        try:
            raw = await self.rest.get(WORKLOADS.item(name, namespace))
        except KubeError as err:
            if err.status != 404:  # deleted: the watch removes it
                failed.append(key)
            return 0
        if self.leading:
            return 0
        raw.setdefault("kind", WORKLOADS.kind)
        raw.setdefault("apiVersion", WORKLOADS.api_version)
        drop_managed_fields(raw)
        reflector = self.reflectors[WORKLOADS.kind]
        old = reflector.cache.get(key)
        if old is not None and _newer(resource_version(raw), cached_version(old)):
            reflector.put(raw)
        self._apply_core(WORKLOADS, raw, replace=True)
        return 1

    def _differs_from_core(self, key: str, record: WorkloadRecord) -> bool:
        wl = self.engine.scheduler.workload(key)
        if wl is None:
            return True
        if record.active != wl.active:
            return True
        return not same_status(workload_status(wl), record.status)

    # -- reflector handler -----------------------------------------------------------
    def upsert(self, resource: Resource, obj: Json, old: Cached | None) -> None:
        """An object arrived (`old`: what the cache held of it before)."""
        new = self._kept(resource, obj)
        if resource.kind in CORE_KINDS:
            # The echo of a status write changes nothing the core reads, except a
            # Workload's status on a follower (which mirrors the leader's writes), the
            # check states an admission check's controller writes on a Workload, and
            # an AdmissionCheck's status (its controller's `Active` condition), which
            # no one but that controller writes (docs/scheduling.md#admission-checks).
            takes_status = (
                resource.kind == ADMISSION_CHECKS.kind
                or (resource.kind == WORKLOADS.kind and not self.leading)
                or (resource.kind == WORKLOADS.kind and _check_states_changed(old, new))
            )
            if old is None or takes_status or not _same_except_status(old, new):
                self._apply_core(resource, obj)
            elif isinstance(new, WorkloadRecord):
                self._signals(new)
        self._notify(resource, new, old)

    def _kept(self, resource: Resource, obj: Json) -> Cached:
        """What the cache holds of `obj`: the reflector (or :meth:`observe`) has just
        made it; an object handed over directly gets its own."""
        cached = self._cached(resource, object_key(obj))
        if cached is not None and cached_version(cached) == resource_version(obj):
            return cached
        return keep(resource.kind, obj)

    def delete(self, resource: Resource, obj: Cached) -> None:
        key = cached_key(obj)
        if resource.kind in CORE_KINDS:
            namespace, _, name = key.rpartition("/")
            self.engine.submit(DeleteObject(resource.kind, namespace or None, name))
            self.stats.deleted += 1
        self._bad.pop(f"{resource.kind}:{key}", None)
        self._notify(resource, None, obj)

    def _notify(self, resource: Resource, new: Cached | None, old: Cached | None) -> None:
        subject = new if new is not None else old
        for listener in self._listeners:
            try:
                listener(resource, new, old)
            except Exception:
                log.exception(
                    "event=listener-failed kind=%s key=%s",
                    resource.kind,
                    cached_key(subject) if subject is not None else "",
                )

    def _apply_core(self, resource: Resource, raw: Json, *, replace: bool = False) -> None:
        key = f"{resource.kind}:{object_key(raw)}"
        try:
            obj = decode_live(raw, source=f"{resource.api_version}/{resource.plural}")
        except ApiError as err:
            self.stats.decode_errors += 1
            rv = resource_version(raw)
            if self._bad.get(key) != rv:
                self._bad[key] = rv
                log.error("event=object-rejected kind=%s key=%s error=%s", resource.kind, key, err)
            return
        self._bad.pop(key, None)
        self.stats.applied += 1
        if isinstance(obj, Workload):
            self._apply_workload(obj, raw, replace=replace)
        else:
            self.engine.submit(ApplyObject(obj))

    def _apply_workload(self, obj: Workload, raw: Json, *, replace: bool = False) -> None:
        if replace and obj.status.admission is None and not obj.status.conditions:
            # An object without status keeps the core's (ApplyObject): forget the
            # workload first, so an admission that was never written is dropped too.
            self.engine.submit(
                DeleteObject(WORKLOADS.kind, obj.metadata.namespace, obj.metadata.name)
            )
        self.engine.submit(ApplyObject(obj, keep_status=self.leading))
        self._signals(self._kept(WORKLOADS, raw))

    def _signals(self, record: Cached) -> None:
        """Conditions that another party (a job integration, an operator) may set on a
        Workload the leader owns: they arrive as commands, like a Job's signals."""
        if not self.leading or not isinstance(record, WorkloadRecord):
            return
        key = record.key
        finished = record.condition("Finished")
        wl = self.engine.scheduler.workload(key)
        if finished is not None and wl is not None and not wl.finished:
            reason = str(finished.get("reason", ""))
            message = str(finished.get("message", ""))
            self.engine.submit(Finish(key, reason == "Failed", reason, message))
        ready = record.condition("PodsReady") is not None
        if ready and wl is not None and not wl.conditions.is_true("PodsReady"):
            self.engine.submit(PodsReady(key))
