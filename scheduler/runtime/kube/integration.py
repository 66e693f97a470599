"""What every integration (`jobs.py`, `jobsets.py` over `suspendable.py`; `pods.py`,
`statefulsets.py`) shares: the object kind it manages, a work queue of those objects'
keys, the map from an object's uid to its Workload, and making that Workload.

An object is reconciled when it changes, when its Workload changes, and, while it has no
Workload, when a priority class appears (it may have been waiting for that class). Each
reads only what the API server holds; only the leader runs them.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import Final, Literal

from scheduler.api.conversion.workload import WORKLOAD_PRIORITY_CLASS_SOURCE
from scheduler.api.decode import ApiError
from scheduler.api.job import PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL, max_exec_seconds
from scheduler.api.live import decode_live
from scheduler.api.workload import Workload
from scheduler.kubeapi.errors import Json, KubeError
from scheduler.runtime.kube.events import Event, Regarding
from scheduler.runtime.kube.integration_stats import IntegrationStats
from scheduler.runtime.kube.leader_io import LeaderIO
from scheduler.runtime.kube.priorities import PRIORITY_KINDS, priority_classes
from scheduler.runtime.kube.records import Cached, WorkloadRecord
from scheduler.runtime.kube.resources import WORKLOADS, Resource, object_key
from scheduler.runtime.kube.workqueue import WorkQueue

log = logging.getLogger(__name__)

# Kueue's reason for a Workload it cannot make of an object (docs/cluster.md#events).
COMPOSE_FAILED: Final = "ErrWorkloadCompose"
UPDATED: Final = "UpdatedWorkload"
NOT_MATCHING: Final = "Updated not matching Workload for suspended job"


def uid_of(obj: Json) -> str:
    return str((obj.get("metadata") or {}).get("uid", ""))


def generation(obj: Json) -> int:
    return int((obj.get("metadata") or {}).get("generation") or 0)


def reference(resource: Resource, obj: Json) -> Regarding:
    """What an Event about `obj` (of kind `resource`) regards."""
    meta = obj.get("metadata") or {}
    return Regarding.of(
        resource, str(meta.get("namespace", "")), str(meta.get("name", "")), uid_of(obj)
    )


class Integration(ABC):
    def __init__(self, io: LeaderIO, resource: Resource, *, retry_delay: float = 1.0) -> None:
        self.io = io
        self.resource = resource
        self.stats = IntegrationStats()
        self.queue = WorkQueue(resource.kind.lower(), retry_delay=retry_delay)
        self._workload_by_uid: dict[str, str] = {}  # the object's uid -> its Workload's key
        # The object's key -> the generation its Workload was made from or last matched
        # (follow_spec); only the leader's process knows it.
        self.matched: dict[str, int] = {}
        io.store.subscribe(self.on_change)

    @abstractmethod
    async def reconcile(self, key: str) -> None:
        """Bring the object `key` (namespace/name) and its Workload in line."""

    @abstractmethod
    def make_workload(self, obj: Json) -> Workload:
        """The Workload of the whole object `obj`; ApiError if it cannot have one."""

    # -- events ----------------------------------------------------------------------
    def on_change(self, resource: Resource, new: Cached | None, old: Cached | None) -> None:
        obj = new if new is not None else old
        if obj is None:
            return
        if isinstance(obj, WorkloadRecord):
            self._on_workload(obj, deleted=new is None)
        elif resource.kind == self.resource.kind:
            if new is None:
                self.matched.pop(object_key(obj), None)
            self.enqueue(object_key(obj))
        elif resource.kind in PRIORITY_KINDS:
            # An object naming a class that did not exist yet got no Workload, or its
            # Workload could not take the class (follow_priority_class): try again.
            name = (obj.get("metadata") or {}).get("name")
            for waiting in self.io.store.items(self.resource):
                labels = (waiting.get("metadata") or {}).get("labels") or {}
                if (
                    uid_of(waiting) not in self._workload_by_uid
                    or labels.get(PRIORITY_CLASS_LABEL) == name
                ):
                    self.enqueue(object_key(waiting))

    def _on_workload(self, record: WorkloadRecord, *, deleted: bool) -> None:
        uid = record.job_uid
        owner = record.owner(self.resource)
        if owner is not None:
            uid = uid or owner.uid
            self.enqueue(f"{record.namespace}/{owner.name}")
        if uid:
            if deleted:
                self._workload_by_uid.pop(uid, None)
            else:
                self._workload_by_uid[uid] = record.key

    def enqueue(self, key: str) -> None:
        self.queue.add(key)

    def workload_of(self, obj: Json) -> WorkloadRecord | None:
        key = self._workload_by_uid.get(uid_of(obj))
        return self.io.store.workload(key) if key else None

    def queue_of(self, workload: WorkloadRecord) -> str:
        """The LocalQueue the core holds `workload` in ("" if it does not hold it)."""
        core = self.io.engine.scheduler.workload(workload.key)
        return core.queue_name if core is not None else ""

    async def run(self) -> None:
        """Reconcile until cancelled; every known object once at the start."""
        await self.queue.run(
            self.reconcile,
            [object_key(obj) for obj in self.io.store.items(self.resource)],
            self._failed,
        )

    def _failed(self) -> None:
        self.stats.errors += 1

    # -- the Workload ----------------------------------------------------------------
    async def create_workload(self, namespace: str, name: str) -> None:
        """Make the object's Workload from the whole object, read here: the cache keeps
        a slim one (`records.slim_job`, `records.slim_pod`)."""
        raw = await self.whole(namespace, name)
        if raw is None:
            return
        workload = self.composed(raw)
        if workload is None:
            return
        if await self.submit_workload(workload, raw):
            self.matched[object_key(raw)] = generation(raw)

    async def submit_workload(self, workload: Workload, regarding: Json) -> bool:
        """Create `workload` for the object `regarding` (the `CreatedWorkload` Event's);
        False if it exists already (the watch has not shown it yet)."""
        body = workload.to_dict()
        body.pop("status", None)
        meta = body["metadata"]
        meta.pop("creationTimestamp", None)
        await self.io.limiter.acquire()
        try:
            created = await self.io.rest.create(WORKLOADS.collection(meta["namespace"]), body)
        except KubeError as err:
            if err.status != 409:  # AlreadyExists: the watch has not shown it yet
                raise
            return False
        self.stats.workloads_created += 1
        self.io.store.observe(WORKLOADS, created)
        self.tell(regarding, "CreatedWorkload", f"Created Workload: {object_key(created)}")
        return True

    def refused(self, what: str, key: str, err: Exception) -> None:
        """Count and log an object the integration cannot carry on with
        (`event=<kind>-<what> <kind>=<key>`)."""
        self.stats.errors += 1
        log.error("event=%s-%s %s=%s error=%s", self.queue.what, what, self.queue.what, key, err)

    def tell(self, obj: Json, reason: str, note: str, *, warning: bool = False) -> None:
        """An Event about the object `obj` (of this integration's kind)."""
        kind: Literal["Normal", "Warning"] = "Warning" if warning else "Normal"
        self.io.record(Event(reference(self.resource, obj), reason, note, type=kind))

    async def patch_workload(self, workload: WorkloadRecord, patch: Json) -> None:
        """One merge patch of the Workload (its preconditions in `patch`), seen at once."""
        await self.io.limiter.acquire()
        followed = await self.io.rest.merge_patch(
            WORKLOADS.item(workload.name, workload.namespace), patch
        )
        self.io.store.observe(WORKLOADS, followed)

    async def whole(self, namespace: str, name: str) -> Json | None:
        """The whole object from the API server (None: deleted meanwhile, which the
        watch says)."""
        try:
            raw = await self.io.rest.get(self.resource.item(name, namespace))
        except KubeError as err:
            if err.status != 404:
                raise
            return None
        raw.setdefault("apiVersion", self.resource.api_version)
        raw.setdefault("kind", self.resource.kind)
        return raw

    def composed(self, raw: Json) -> Workload | None:
        """The Workload of the whole object `raw`, or None when none can be made: then
        the object says why in a Warning Event and waits for a fix (a missing priority
        class appearing brings it back here)."""
        try:
            return self.make_workload(raw)
        except ApiError as err:
            self.refused("rejected", object_key(raw), err)
            why = "; ".join(str(e) for e in err.errors) or str(err)
            self.tell(raw, COMPOSE_FAILED, why, warning=True)
            return None

    def saw_write(self, before: Json, written: Json) -> None:
        """The integration changed the object itself (a Job started or stopped): the new
        generation is its own doing, not an edit its Workload must follow, if what it
        wrote over matched its Workload (an edit not yet followed stays to follow)."""
        key = object_key(written)
        if self.matched.get(key) == generation(before):
            self.matched[key] = generation(written)

    async def follow_spec(self, obj: Json, workload: WorkloadRecord) -> None:
        """A waiting object (a suspended Job) whose spec was edited since its Workload
        was made or last matched (a new `metadata.generation`) and whose Workload holds
        no quota: the Workload's pod sets follow the edit, as Kueue updates a not
        matching Workload of a suspended job (docs/cluster.md#a-waiting-job-edited).
        An object first seen here is taken as matching its Workload."""
        key, now = object_key(obj), generation(obj)
        seen = self.matched.setdefault(key, now)
        if seen == now or (workload.status or {}).get("admission"):
            return
        meta = obj.get("metadata") or {}
        raw = await self.whole(str(meta.get("namespace", "")), str(meta.get("name", "")))
        if raw is None:
            return
        wanted = self.composed(raw)
        if wanted is None:
            return
        current = await self.io.rest.get(WORKLOADS.item(workload.name, workload.namespace))
        decoded = decode_live(current, source=WORKLOADS.plural)
        if isinstance(decoded, Workload) and decoded.spec.pod_sets == wanted.spec.pod_sets:
            self.matched[key] = generation(raw)
            return
        pod_sets = wanted.to_dict()["spec"]["podSets"]
        patch = {
            "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
            "spec": {"podSets": pod_sets},
        }
        await self.patch_workload(workload, patch)
        self.matched[key] = generation(raw)
        log.info("event=workload-follows-spec workload=%s", workload.key)
        self.tell(raw, UPDATED, f"{NOT_MATCHING}: {workload.key}")

    async def follow_priority_class(self, obj: Json, workload: WorkloadRecord) -> bool:
        """The Workload follows the WorkloadPriorityClass the object's label names, running
        or not, as Kueue v0.19.2 updates a workload's priority
        (docs/cluster.md#a-new-priority-class): not a Workload whose priority came from a
        pod PriorityClass, nor one that holds quota with no class (none can be added
        then); a class that does not exist yet is waited for. True if it wrote (the
        Workload's change brings the object back for the rest)."""
        labels = (obj.get("metadata") or {}).get("labels") or {}
        wanted = str(labels.get(PRIORITY_CLASS_LABEL, ""))
        core = self.io.engine.scheduler.workload(workload.key)
        if not wanted or core is None or core.priority_class_name == wanted:
            return False
        if core.priority_class_source not in ("", WORKLOAD_PRIORITY_CLASS_SOURCE):
            return False
        if not core.priority_class_name and (workload.status or {}).get("admission"):
            return False
        workload_classes, _ = priority_classes(self.io.store)
        found = workload_classes.get(wanted)
        if found is None:
            return False  # the class's arrival brings the object back (on_change)
        patch = {
            "metadata": {"resourceVersion": workload.resource_version},
            "spec": {
                "priorityClassName": wanted,
                "priorityClassSource": WORKLOAD_PRIORITY_CLASS_SOURCE,
                "priority": found.value,
            },
        }
        await self.patch_workload(workload, patch)
        log.info("event=workload-priority-class workload=%s class=%s", workload.key, wanted)
        self.tell(obj, UPDATED, f"Updated workload priority class: {workload.key}")
        return True

    async def follow_labels(self, obj: Json, workload: WorkloadRecord) -> None:
        """While its object waits (a suspended Job, a gated Pod) and holds no quota, the
        Workload follows the object's labels, as in Kueue: the LocalQueue it names (a
        user moves a waiting job by relabelling it, docs/cluster.md#plain-pods) and its
        maximum execution time (docs/cluster.md#maximum-execution-time), in one write."""
        labels = (obj.get("metadata") or {}).get("labels") or {}
        core = self.io.engine.scheduler.workload(workload.key)
        if core is None or (workload.status or {}).get("admission"):
            return
        spec: Json = {}
        queue = str(labels.get(QUEUE_NAME_LABEL, ""))
        if queue and core.queue_name != queue:
            spec["queueName"] = queue
        max_exec = max_exec_seconds(labels)
        if core.maximum_execution_time_seconds != max_exec:
            spec["maximumExecutionTimeSeconds"] = max_exec  # None drops it
        if not spec:
            return
        patch = {"metadata": {"resourceVersion": workload.resource_version}, "spec": spec}
        await self.patch_workload(workload, patch)
        log.info("event=workload-follows-labels workload=%s spec=%s", workload.key, spec)
        if "maximumExecutionTimeSeconds" in spec:
            self.tell(obj, UPDATED, f"{NOT_MATCHING}: {workload.key}")
