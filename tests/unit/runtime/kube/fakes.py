"""An in-memory API server behind KubeRest's surface, for the cluster-runtime unit tests.

`FakeKube` keeps objects by resource, namespace and name, with a global
resourceVersion counter like etcd's: every write bumps it, a write that carries a
stale resourceVersion gets 409, a missing object 404, a second create 409. Lists are
paged with `limit`/`continue` and, like the real server, their items carry no
kind/apiVersion. Watches replay the recorded change log after the requested
resourceVersion and then wait for new changes (410 below `compacted`), unless a test
scripted the next watch of a path. Failures can be scripted per method and path.
Nothing here sleeps.
"""

from __future__ import annotations

import asyncio
import copy
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import urlencode

from scheduler.core.cycle import run_cycle
from scheduler.kubeapi.client import KubeRest, WatchEvent
from scheduler.kubeapi.errors import Json, KubeError
from scheduler.runtime.commands import Command
from scheduler.runtime.engine import Engine
from scheduler.runtime.kube.events import Event
from scheduler.runtime.kube.leader_io import LeaderIO
from scheduler.runtime.kube.ratelimit import TokenBucket
from scheduler.runtime.kube.resources import (
    CLUSTER_QUEUES,
    EVENTS,
    JOBSETS,
    LEASES,
    LOCAL_QUEUES,
    NAMESPACES,
    PODS,
    RESOURCE_FLAVORS,
    STATEFULSETS,
    WATCHED,
    WORKLOADS,
    Resource,
)
from scheduler.runtime.kube.store import KubeStore
from tests.unit.runtime.support import (
    cluster_queue,
    flavor,
    local_queue,
    namespace,
    real_scheduler,
    workload,
)

# Pods first: their paths begin as a Namespace's do.
RESOURCES: tuple[Resource, ...] = (PODS, STATEFULSETS, JOBSETS, *WATCHED, LEASES, EVENTS)

_REASONS = {404: "NotFound", 409: "Conflict", 410: "Expired", 500: "InternalError"}


def status_error(code: int, message: str = "", reason: str = "") -> KubeError:
    """A KubeError as KubeRest raises it for a Kubernetes `Status` answer."""
    reason = reason or _REASONS.get(code, "")
    body: Json = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message or f"status {code}",
        "reason": reason,
        "code": code,
    }
    return KubeError(code, reason, body)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


@dataclass(frozen=True, slots=True)
class Target:
    resource: Resource
    namespace: str | None
    name: str | None  # None: the collection
    subresource: str = ""


def parse(path: str) -> Target:
    """The resource, namespace, name and subresource a REST path names."""
    for resource in RESOURCES:
        prefix = resource.collection().removesuffix(f"/{resource.plural}")
        if not path.startswith(prefix + "/"):
            continue
        parts = path[len(prefix) + 1 :].split("/")
        namespace = None
        if resource.namespaced and parts[0] == "namespaces" and len(parts) >= 3:
            namespace, parts = parts[1], parts[2:]
        if parts[0] != resource.plural:
            continue
        name = parts[1] if len(parts) > 1 else None
        return Target(resource, namespace, name, parts[2] if len(parts) > 2 else "")
    raise AssertionError(f"the fake does not serve {path}")


@dataclass
class Change:
    rv: int
    resource: Resource
    type: str
    object: Json


@dataclass
class FakeKube:
    rv: int = 100
    compacted: int = 0  # a watch from a resourceVersion below this gets 410
    objects: dict[tuple[str, str | None, str], Json] = field(default_factory=dict)
    log: list[Change] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)  # (method, path)
    bodies: list[tuple[str, str, Json]] = field(default_factory=list)  # writes
    watch_queries: list[tuple[str, dict[str, str], float]] = field(default_factory=list)
    failures: dict[tuple[str, str], deque[KubeError]] = field(default_factory=dict)
    scripts: dict[str, deque[Sequence[WatchEvent | KubeError]]] = field(default_factory=dict)
    list_queries: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    uids: int = 0
    waiting: int = 0  # live watches that have sent everything and wait for a change

    def __post_init__(self) -> None:
        self._changed = asyncio.Event()  # replaced after each change

    @property
    def rest(self) -> KubeRest:
        """This fake where a KubeRest is expected."""
        return cast(KubeRest, self)

    # -- test set-up ---------------------------------------------------------------
    def fail(self, method: str, path: str, *errors: KubeError) -> None:
        """The next calls of `method` on `path` raise these errors, in order. A path
        may carry a query (`?limit=1&continue=1`, in the order the caller sends it) to
        fail only that request."""
        self.failures.setdefault((method, path), deque()).extend(errors)

    def script_watch(self, path: str, *items: WatchEvent | KubeError) -> None:
        """The next watch of `path` yields these events (raising an error item) and
        then ends, as a server ends a watch at its timeout."""
        self.scripts.setdefault(path, deque()).append(items)

    def seed(self, resource: Resource, obj: Json) -> Json:
        """Create an object as another client would (no call recorded)."""
        return self._create(resource, copy.deepcopy(obj))

    def stored(self, resource: Resource, key: str) -> Json | None:
        namespace, _, name = key.rpartition("/")
        found = self.objects.get((resource.plural, namespace or None, name))
        return copy.deepcopy(found) if found is not None else None

    def server_update(self, resource: Resource, key: str, patch: Json) -> Json:
        """Merge-patch an object as another client would (no precondition)."""
        namespace, _, name = key.rpartition("/")
        return self._patch(Target(resource, namespace or None, name), patch)

    def server_delete(self, resource: Resource, key: str) -> None:
        namespace, _, name = key.rpartition("/")
        self._delete(Target(resource, namespace or None, name))

    def writes(self, method: str | None = None) -> list[tuple[str, str, Json]]:
        return [b for b in self.bodies if method is None or b[0] == method]

    # -- KubeRest's surface --------------------------------------------------------
    async def get(self, path: str, query: Mapping[str, str] | None = None) -> Json:
        target = self._call("GET", path, query=query)
        if target.name is None:
            self.list_queries.append((path, dict(query or {})))
            return self._list(target, dict(query or {}))
        return copy.deepcopy(self._existing(target))

    async def create(self, path: str, body: Json) -> Json:
        target = self._call("POST", path, body)
        body = copy.deepcopy(body)
        meta = body.setdefault("metadata", {})
        if target.namespace is not None:
            meta["namespace"] = target.namespace
        return self._create(target.resource, body)

    async def replace(self, path: str, body: Json) -> Json:
        target = self._call("PUT", path, body)
        current = self._existing(target)
        self._precondition(current, body)
        new = copy.deepcopy(body)
        if target.subresource == "status":
            new = {**current, "status": new.get("status")}
        elif "status" in current:
            new["status"] = current["status"]  # the main resource ignores status
        return self._store(target, new, "MODIFIED")

    async def merge_patch(self, path: str, patch: Json) -> Json:
        target = self._call("PATCH", path, patch)
        self._precondition(self._existing(target), patch)
        return self._patch(target, patch)

    async def strategic_merge_patch(self, path: str, patch: Json) -> Json:
        """Only what the integrations send: `status.conditions` merge by `type`, the
        rest as a merge patch."""
        target = self._call("PATCH", path, patch)
        existing = self._existing(target)
        conditions = (patch.get("status") or {}).get("conditions")
        if conditions is not None:
            by_type = {c["type"]: c for c in (existing.get("status") or {}).get("conditions") or []}
            by_type.update({c["type"]: c for c in conditions})
            patch = {**patch, "status": {**patch["status"], "conditions": list(by_type.values())}}
        return self._patch(target, patch)

    async def delete(self, path: str, options: Json | None = None) -> Json:
        target = self._call("DELETE", path, options)
        wanted = (options or {}).get("preconditions") or {}
        current = self._existing(target)["metadata"]
        for field_name in ("uid", "resourceVersion"):
            if field_name in wanted and wanted[field_name] != current.get(field_name):
                raise status_error(
                    409, f"Precondition failed: {field_name} in precondition", "Conflict"
                )
        return self._delete(target)

    async def watch(
        self, path: str, query: Mapping[str, str], *, read_timeout: float
    ) -> AsyncIterator[WatchEvent]:
        self.watch_queries.append((path, dict(query), read_timeout))
        target = self._call("WATCH", path)
        script = self.scripts.get(path)
        if script:
            for item in script.popleft():
                if isinstance(item, KubeError):
                    raise item
                yield item
            return
        since = int(query.get("resourceVersion") or self.rv)
        if since < self.compacted:
            raise status_error(410, "too old resource version", "Expired")
        sent = since
        while True:
            for change in [c for c in self.log if c.rv > sent]:
                sent = change.rv
                if (
                    change.resource == target.resource
                    and (
                        target.namespace is None
                        or change.object["metadata"].get("namespace") == target.namespace
                    )
                    and _selected(change.object, query.get("labelSelector", ""))
                ):
                    yield WatchEvent(change.type, copy.deepcopy(change.object))
            changed = self._changed
            if self.log and self.log[-1].rv > sent:
                continue
            self.waiting += 1
            try:
                await changed.wait()
            finally:
                self.waiting -= 1

    # -- internals -----------------------------------------------------------------
    def _call(
        self,
        method: str,
        path: str,
        body: Json | None = None,
        query: Mapping[str, str] | None = None,
    ) -> Target:
        self.calls.append((method, path))
        if body is not None:
            self.bodies.append((method, path, copy.deepcopy(body)))
        for key in (path, f"{path}?{urlencode(dict(query or {}))}"):
            pending = self.failures.get((method, key))
            if pending:
                raise pending.popleft()
        return parse(path)

    def _existing(self, target: Target) -> Json:
        assert target.name is not None
        found = self.objects.get((target.resource.plural, target.namespace, target.name))
        if found is None:
            raise status_error(404, f'"{target.name}" not found', "NotFound")
        return found

    @staticmethod
    def _precondition(current: Json, body: Json) -> None:
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            raise status_error(409, "the object has been modified", "Conflict")

    def _create(self, resource: Resource, body: Json) -> Json:
        meta = body.setdefault("metadata", {})
        key = (resource.plural, meta.get("namespace"), meta["name"])
        if key in self.objects:
            raise status_error(409, f'"{meta["name"]}" already exists', "AlreadyExists")
        self.uids += 1
        meta.setdefault("uid", f"uid-{self.uids}")
        meta.setdefault("creationTimestamp", "2025-01-01T00:00:00Z")
        body.setdefault("kind", resource.kind)
        body.setdefault("apiVersion", resource.api_version)
        target = Target(resource, meta.get("namespace"), meta["name"])
        return self._store(target, body, "ADDED")

    def _patch(self, target: Target, patch: Json) -> Json:
        current = self._existing(target)
        patch = copy.deepcopy(patch)
        (patch.get("metadata") or {}).pop("resourceVersion", None)
        patched = merge_patch(current, patch)
        meta = patched["metadata"]
        stored = self._store(target, patched, "MODIFIED")
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._delete(target)  # the last finalizer went: the server deletes it
        return stored

    def _delete(self, target: Target) -> Json:
        current = self._existing(target)
        assert target.name is not None
        if current["metadata"].get("finalizers"):
            # As a server does: marked for deletion until its finalizers are released.
            if not current["metadata"].get("deletionTimestamp"):
                marked = copy.deepcopy(current)
                marked["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
                self._store(target, marked, "MODIFIED")
            return {"kind": "Status", "status": "Success"}
        del self.objects[(target.resource.plural, target.namespace, target.name)]
        self.rv += 1
        gone = copy.deepcopy(current)
        gone["metadata"]["resourceVersion"] = str(self.rv)
        self._record(target.resource, "DELETED", gone)
        return {"kind": "Status", "status": "Success"}

    def _store(self, target: Target, obj: Json, kind: str) -> Json:
        assert target.name is not None
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        # As kube-apiserver: the generation counts the changes of the spec.
        before = self.objects.get((target.resource.plural, target.namespace, target.name))
        generation = int((before or {}).get("metadata", {}).get("generation") or 0)
        if before is None or before.get("spec") != obj.get("spec"):
            generation += 1
        obj["metadata"]["generation"] = generation
        self.objects[(target.resource.plural, target.namespace, target.name)] = obj
        self._record(target.resource, kind, obj)
        return copy.deepcopy(obj)

    def _record(self, resource: Resource, kind: str, obj: Json) -> None:
        self.log.append(Change(self.rv, resource, kind, copy.deepcopy(obj)))
        self._changed.set()
        self._changed = asyncio.Event()

    def _list(self, target: Target, query: dict[str, str]) -> Json:
        items = [
            obj
            for (plural, namespace, _), obj in sorted(
                self.objects.items(), key=lambda kv: (kv[0][0], kv[0][1] or "", kv[0][2])
            )
            if plural == target.resource.plural
            and (target.namespace is None or namespace == target.namespace)
            and _selected(obj, query.get("labelSelector", ""))
        ]
        start = int(query.get("continue") or 0)
        limit = int(query.get("limit") or len(items) or 1)
        page = items[start : start + limit]
        meta: Json = {"resourceVersion": str(self.rv)}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        out = []
        for obj in page:
            item = copy.deepcopy(obj)
            item.pop("kind", None)
            item.pop("apiVersion", None)
            out.append(item)
        return {"kind": f"{target.resource.kind}List", "metadata": meta, "items": out}


def _selected(obj: Json, selector: str) -> bool:
    """Does `obj` carry every `key=value` (or `key`: any value) of a label selector? (A
    watch here leaves out changes that do not match, where a server sends a deletion.)"""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, selector.split(",")):
        key, equals, value = term.partition("=")
        if (labels.get(key) != value) if equals else key not in labels:
            return False
    return True


class FreeBucket(TokenBucket):
    """A token bucket that never waits, counting what was taken."""

    def __init__(self) -> None:
        super().__init__(1000, 1000)
        self.taken = 0

    async def acquire(self) -> None:
        self.taken += 1


# -- a small cluster behind the fake, and a real engine fed by a KubeStore -------------
KEY = "team/w1"


class RecordingEngine(Engine):
    """A real engine (not started: tests apply commands with `apply_pending`) that
    also records the commands it is given."""

    def __init__(self, config: Json | None = None) -> None:
        super().__init__(real_scheduler(config))
        self.submitted: list[Command] = []

    def submit(self, command: Command) -> None:
        self.submitted.append(command)
        super().submit(command)

    def take(self) -> list[Command]:
        commands, self.submitted = self.submitted, []
        return commands


def condition(type_: str, reason: str, status: str = "True") -> Json:
    """A Workload or Job condition as another controller writes it."""
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": "set by someone else",
        "lastTransitionTime": "2025-01-01T00:00:00Z",
    }


def seed_cluster(fake: FakeKube, cpu: str = "4", *, workloads: int = 1) -> None:
    """Namespace `team`, flavor `default`, ClusterQueue `cq`, LocalQueue `team/main`,
    and Workloads `team/w1`... (seeded in reverse dependency order: the store must
    not depend on it)."""
    for i in range(1, workloads + 1):
        fake.seed(WORKLOADS, workload("team", f"w{i}", "main"))
    fake.seed(LOCAL_QUEUES, local_queue("team", "main", "cq"))
    fake.seed(CLUSTER_QUEUES, cluster_queue("cq", cpu))
    fake.seed(RESOURCE_FLAVORS, flavor())
    fake.seed(NAMESPACES, namespace("team"))


async def synced_store(
    fake: FakeKube, config: Json | None = None, **kwargs: Any
) -> tuple[KubeStore, RecordingEngine]:
    """A store that has done its initial sync into an engine that applied it."""
    engine = RecordingEngine(config)
    store = KubeStore(fake.rest, engine, **kwargs)
    await store.sync()
    engine.apply_pending()
    engine.take()
    return store, engine


def admit_in_core(engine: Engine) -> list[str]:
    """Apply what is queued and run one scheduling cycle; the admitted keys."""
    engine.apply_pending()
    return list(run_cycle(engine.scheduler).admitted)


async def until(predicate: Callable[[], bool], turns: int = 10_000) -> None:
    """Let other tasks run (no wall-clock wait) until `predicate()` holds."""
    for _ in range(turns):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition not reached")


@dataclass
class Events:
    """Stands in for the recorder: what would have been written."""

    seen: list[Event] = field(default_factory=list)

    def record(self, *events: Event) -> None:
        self.seen.extend(events)

    def reasons(self) -> list[tuple[str, str, str]]:
        return [(e.regarding.name, e.reason, e.note) for e in self.seen]


def delivered(fake: FakeKube, store: KubeStore, resource: Resource, key: str) -> Json:
    """What the watch would deliver next: the server's current object, observed."""
    obj = fake.stored(resource, key)
    assert obj is not None
    store.observe(resource, obj)
    return obj


async def leading(
    fake: FakeKube, resources: Sequence[Resource]
) -> tuple[KubeStore, RecordingEngine, LeaderIO, Events]:
    """A synced store of `resources` that leads, its engine, and the leader's I/O, whose
    Events are kept in the returned stand-in."""
    store, engine = await synced_store(fake, resources=tuple(resources))
    store.set_leading(True)
    events = Events()
    io = LeaderIO(fake.rest, engine, store, FreeBucket(), events)  # type: ignore[arg-type]
    return store, engine, io, events
