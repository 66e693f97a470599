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
    DeleteObject,
    Finish,
    MarkSynced,
    PodsReady,
)
from scheduler.runtime.engine import Engine
from scheduler.runtime.kube.decode import decode_live
from scheduler.runtime.kube.normalize import same_status
from scheduler.runtime.kube.reflector import Reflector, drop_managed_fields
from scheduler.runtime.kube.resources import (
    ADMISSION_CHECKS,
    CLUSTER_QUEUES,
    COHORTS,
    LOCAL_QUEUES,
    NAMESPACES,
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

Listener = Callable[[Resource, Json | None, Json | None], None]  # (resource, new, old)


@dataclass(slots=True)
class StoreStats:
    applied: int = 0
    deleted: int = 0
    decode_errors: int = 0


def _true_condition(obj: Json, type_: str) -> Json | None:
    status = obj.get("status")
    if not isinstance(status, dict):
        return None
    for c in status.get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == type_ and c.get("status") == "True":
            return c
    return None


_VOLATILE_META = ("resourceVersion", "managedFields", "generation")


def _same_except_status(old: Json, new: Json) -> bool:
    """Equal but for status and the bookkeeping metadata a status write changes."""

    def strip(obj: Json) -> Json:
        meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _VOLATILE_META}
        return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": meta}

    return strip(old) == strip(new)


def _check_states(obj: Json) -> object:
    status = obj.get("status")
    return status.get("admissionChecks") if isinstance(status, dict) else None


def _check_states_changed(old: Json | None, new: Json) -> bool:
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
            r.kind: Reflector(rest, r, self) for r in resources
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
        reflector = self.reflectors.get(resource.kind)
        return reflector.cache.get(key) if reflector is not None else None

    def items(self, resource: Resource) -> Iterator[Json]:
        reflector = self.reflectors.get(resource.kind)
        if reflector is not None:
            yield from list(reflector.cache.values())

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
        if old is not None and not _newer(resource_version(obj), resource_version(old)):
            return
        reflector.cache[key] = obj
        self.upsert(resource, obj, old)

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
        decoding) and works in `budget`-long stretches."""
        keys = [object_key(obj) for obj in self.items(WORKLOADS)]
        taken = 0
        done = 0
        while done < len(keys):
            started = time.perf_counter()
            stretch_end = done + 1  # at least one key per stretch
            while done < len(keys) and (
                done < stretch_end or time.perf_counter() - started < budget
            ):
                key = keys[done]
                done += 1
                raw = self.get(WORKLOADS, key)
                if raw is not None and not self.leading and self._differs_from_core(key, raw):
                    self._apply_core(WORKLOADS, raw, replace=True)
                    taken += 1
            await asyncio.sleep(0)
        return taken

    def _differs_from_core(self, key: str, raw: Json) -> bool:
        wl = self.engine.scheduler.workloads.get(key)
        if wl is None:
            return True
        if (raw.get("spec") or {}).get("active", True) != wl.active:
            return True
        return not same_status(workload_status(wl), raw.get("status"))

    # -- reflector handler -----------------------------------------------------------
    def upsert(self, resource: Resource, obj: Json, old: Json | None) -> None:
        if resource.kind in CORE_KINDS:
            # The echo of a status write changes nothing the core reads, except a
            # Workload's status on a follower (which mirrors the leader's writes), the
            # check states an admission check's controller writes on a Workload, and
            # an AdmissionCheck's status (its controller's `Active` condition), which
            # no one but that controller writes (docs/scheduling.md#admission-checks).
            takes_status = (
                resource.kind == ADMISSION_CHECKS.kind
                or (resource.kind == WORKLOADS.kind and not self.leading)
                or (resource.kind == WORKLOADS.kind and _check_states_changed(old, obj))
            )
            if old is None or takes_status or not _same_except_status(old, obj):
                self._apply_core(resource, obj)
            elif resource.kind == WORKLOADS.kind:
                self._signals(obj)
        for listener in self._listeners:
            try:
                listener(resource, obj, old)
            except Exception:
                log.exception(
                    "event=listener-failed kind=%s key=%s", resource.kind, object_key(obj)
                )

    def delete(self, resource: Resource, obj: Json) -> None:
        if resource.kind in CORE_KINDS:
            meta = obj.get("metadata") or {}
            self.engine.submit(
                DeleteObject(resource.kind, meta.get("namespace"), str(meta.get("name", "")))
            )
            self.stats.deleted += 1
        self._bad.pop(f"{resource.kind}:{object_key(obj)}", None)
        for listener in self._listeners:
            try:
                listener(resource, None, obj)
            except Exception:
                log.exception(
                    "event=listener-failed kind=%s key=%s", resource.kind, object_key(obj)
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
        self._signals(raw)

    def _signals(self, raw: Json) -> None:
        """Conditions that another party (a job integration, an operator) may set on a
        Workload the leader owns: they arrive as commands, like a Job's signals."""
        if not self.leading:
            return
        key = object_key(raw)
        finished = _true_condition(raw, "Finished")
        wl = self.engine.scheduler.workloads.get(key)
        if finished is not None and wl is not None and not wl.finished:
            self.engine.submit(Finish(key, failed=finished.get("reason") == "Failed"))
        ready = _true_condition(raw, "PodsReady") is not None
        if ready and wl is not None and not wl.conditions.is_true("PodsReady"):
            self.engine.submit(PodsReady(key))
