"""The batch/v1 Job integration (issue 5 item 3, kep-349's Job parts).

A Job labelled `kueue.x-k8s.io/queue-name` gets a Workload that the Job owns; the Job
stays suspended until its Workload is admitted, is unsuspended with the node selectors
and tolerations of the assigned flavors and the pod set updates its admission checks
asked for (docs/scheduling.md#admission-checks), reports `PodsReady` when
`ready + succeeded >= parallelism`, is suspended again with its pod template restored
when the Workload loses its admission (preemption, eviction), and finishes its
Workload when it completes or fails.

The controller reads only what the API server holds (its Jobs and Workloads): a Job
runs because an admission was *written*, never because the core decided one that a
crash could lose. Signals go to the engine as commands. Only the leader runs it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.api import Job, PriorityClass, WorkloadPriorityClass
from scheduler.api.decode import ApiError
from scheduler.api.job import QUEUE_NAME_LABEL
from scheduler.api.job_workload import job_to_workload
from scheduler.kubeapi.errors import Json, KubeError
from scheduler.runtime.commands import Finish, PodsReady
from scheduler.runtime.kube.decode import decode_live
from scheduler.runtime.kube.events import Event, Regarding
from scheduler.runtime.kube.leader_io import LeaderIO
from scheduler.runtime.kube.records import EMPTY_TEMPLATE, Cached, WorkloadRecord
from scheduler.runtime.kube.resources import (
    JOBS,
    PRIORITY_CLASSES,
    RESOURCE_FLAVORS,
    WORKLOAD_PRIORITY_CLASSES,
    WORKLOADS,
    Resource,
    object_key,
)

log = logging.getLogger(__name__)

JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"


@dataclass(slots=True)
class JobStats:
    workloads_created: int = 0
    suspended: int = 0
    unsuspended: int = 0
    errors: int = 0


def _condition(obj: Json, type_: str) -> Json | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == type_ and c.get("status") == "True":
            return c
    return None


def _admitted(workload: WorkloadRecord) -> bool:
    status = workload.status or {}
    return bool(status.get("admission")) and workload.condition("Admitted") is not None


def _job_finished(job: Json) -> tuple[bool, bool]:
    """(finished, failed) from the Job's conditions."""
    if _condition(job, "Failed") is not None:
        return True, True
    if _condition(job, "Complete") is not None:
        return True, False
    return False, False


def _job_ref(job: Json) -> Regarding:
    meta = job.get("metadata") or {}
    namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    return Regarding.of(JOBS, namespace, name, str(meta.get("uid", "")))


def _pod_spec(obj: Json) -> Json:
    return ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}


def _template_meta(obj: Json) -> Json:
    return ((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}


@dataclass(slots=True)
class CheckUpdates:
    """What the admission checks of a Workload ask its pods to get (their
    `podSetUpdates` for the Job's pod set), merged."""

    labels: dict[str, str]
    annotations: dict[str, str]
    node_selector: dict[str, str]
    tolerations: list[Json]


class UpdateConflictError(Exception):
    """A check's pod set update sets a key the template already sets differently."""


def _merge_key(into: dict[str, str], field: str, key: str, value: str, check: str) -> None:
    if into.get(key, value) != value:
        raise UpdateConflictError(
            f'admission check "{check}" sets {field}[{key}] to "{value}", '
            f'the pod template has "{into[key]}"'
        )
    into[key] = value


def check_updates(pod_set: str, check_states: Sequence[Json], base: CheckUpdates) -> CheckUpdates:
    """`base` (the template's labels, annotations, node selector and tolerations) with
    every admission check's `podSetUpdates` for pod set `pod_set` (a Job has one) merged
    in, in check order: a key set to another value than the template's (or another
    check's) is a conflict (UpdateConflictError), as in Kueue."""
    merged = CheckUpdates(
        labels=dict(base.labels),
        annotations=dict(base.annotations),
        node_selector=dict(base.node_selector),
        tolerations=list(base.tolerations),
    )
    for check in check_states:
        for update in check.get("podSetUpdates") or []:
            if update.get("name") != pod_set:
                continue
            for field, into in (
                ("labels", merged.labels),
                ("annotations", merged.annotations),
                ("nodeSelector", merged.node_selector),
            ):
                for key, value in (update.get(field) or {}).items():
                    _merge_key(into, field, key, value, str(check.get("name", "")))
            for toleration in update.get("tolerations") or []:
                if toleration not in merged.tolerations:
                    merged.tolerations.append(toleration)
    return merged


def _map_patch(current: dict[str, str], wanted: dict[str, str]) -> dict[str, str | None]:
    """A merge patch turning map `current` into `wanted` (keys to drop set to null)."""
    patch: dict[str, str | None] = {k: None for k in current if k not in wanted}
    patch.update({k: v for k, v in wanted.items() if current.get(k) != v})
    return patch


class JobController:
    def __init__(self, io: LeaderIO, *, retry_delay: float = 1.0) -> None:
        self.io = io
        self.retry_delay = retry_delay
        self.stats = JobStats()
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self._by_job_uid: dict[str, str] = {}  # job uid -> workload key
        io.store.subscribe(self.on_change)

    # -- events ----------------------------------------------------------------------
    def on_change(self, resource: Resource, new: Cached | None, old: Cached | None) -> None:
        obj = new if new is not None else old
        if obj is None:
            return
        if isinstance(obj, WorkloadRecord):
            self._on_workload(obj, deleted=new is None)
        elif resource.kind == JOBS.kind:
            self.enqueue(object_key(obj))
        elif resource.kind in (WORKLOAD_PRIORITY_CLASSES.kind, PRIORITY_CLASSES.kind):
            # A Job naming a class that did not exist yet got no Workload: try again.
            for job in self.io.store.items(JOBS):
                if str((job.get("metadata") or {}).get("uid", "")) not in self._by_job_uid:
                    self.enqueue(object_key(job))

    def _on_workload(self, record: WorkloadRecord, *, deleted: bool) -> None:
        uid = record.job_uid
        job = record.owner(JOBS)
        if job is not None:
            uid = uid or job.uid
            self.enqueue(f"{record.namespace}/{job.name}")
        if uid:
            if deleted:
                self._by_job_uid.pop(uid, None)
            else:
                self._by_job_uid[uid] = record.key

    def enqueue(self, key: str) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    async def run(self) -> None:
        """Reconcile until cancelled; every known Job once at the start."""
        for job in self.io.store.items(JOBS):
            self.enqueue(object_key(job))
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            try:
                await self.reconcile(key)
            except KubeError as err:
                self.stats.errors += 1
                if err.status != 409:
                    log.warning("event=job-reconcile-failed job=%s error=%s", key, err)
                asyncio.get_running_loop().call_later(self.retry_delay, self.enqueue, key)

    # -- reconcile -------------------------------------------------------------------
    async def reconcile(self, key: str) -> None:
        namespace, _, name = key.partition("/")
        job = self.io.store.get(JOBS, key)
        if job is None:
            await self._delete_orphans(namespace, name)
            return
        labels = (job.get("metadata") or {}).get("labels") or {}
        if QUEUE_NAME_LABEL not in labels:
            return
        uid = str((job.get("metadata") or {}).get("uid", ""))
        wl_key = self._by_job_uid.get(uid)
        workload = self.io.store.workload(wl_key) if wl_key else None
        suspended = bool((job.get("spec") or {}).get("suspend", False))
        finished, failed = _job_finished(job)
        if workload is None:
            if finished:
                return
            if not suspended:
                await self._set_suspended(job, True, None, why="missing workload")
            await self._create_workload(namespace, name)
            return
        wl_key = workload.key
        core = self.io.engine.scheduler.workload(wl_key)
        if finished:
            if workload.condition("Finished") is None and core is not None and not core.finished:
                self.io.engine.submit(Finish(wl_key, failed=failed))
            return
        if _admitted(workload):
            if suspended:
                await self._set_suspended(job, False, workload)
            elif (
                self._pods_ready(job)
                and workload.condition("PodsReady") is None
                and core is not None
                and not core.conditions.is_true("PodsReady")
            ):
                self.io.engine.submit(PodsReady(wl_key))
        elif not suspended:
            # The template of a running Job is immutable: suspend first, restore the
            # template once the Job is suspended (the next reconcile).
            evicted = workload.condition("Evicted")
            why = str(evicted.get("message", "")) if evicted else "Not admitted by cluster queue"
            await self._set_suspended(job, True, None, why=why)
        elif self._placement_differs(job, workload):
            await self._set_suspended(job, True, workload)

    @staticmethod
    def _pods_ready(job: Json) -> bool:
        spec, status = job.get("spec") or {}, job.get("status") or {}
        parallelism = spec.get("parallelism", 1)
        ready = int(status.get("ready") or 0) + int(status.get("succeeded") or 0)
        return ready >= int(parallelism if parallelism is not None else 1)

    async def _create_workload(self, namespace: str, name: str) -> None:
        """Make the Job's Workload from the whole Job, read here: the cache keeps a slim
        one (`records.slim_job`) without the pod template's containers."""
        try:
            job_raw = await self.io.rest.get(JOBS.item(name, namespace))
        except KubeError as err:
            if err.status != 404:  # deleted meanwhile: the watch says so
                raise
            return
        try:
            job = decode_live(job_raw, source="batch/v1/jobs")
            assert isinstance(job, Job)
            workload = job_to_workload(job, self._wpcs(), self._pcs())
        except ApiError as err:
            self.stats.errors += 1
            log.error("event=job-rejected job=%s error=%s", object_key(job_raw), err)
            return
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
            return
        self.stats.workloads_created += 1
        self.io.store.observe(WORKLOADS, created)
        self.io.record(
            Event(_job_ref(job_raw), "CreatedWorkload", f"Created Workload: {object_key(created)}")
        )

    def priority_classes(
        self,
    ) -> tuple[dict[str, WorkloadPriorityClass], dict[str, PriorityClass]]:
        """The priority classes a Job's priority resolves with (the what-if dry run too)."""
        return self._wpcs(), self._pcs()

    def _wpcs(self) -> dict[str, WorkloadPriorityClass]:
        return self._decoded(WORKLOAD_PRIORITY_CLASSES, WorkloadPriorityClass)

    def _pcs(self) -> dict[str, PriorityClass]:
        return self._decoded(PRIORITY_CLASSES, PriorityClass)

    def _decoded(self, resource: Resource, model: type[Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for raw in self.io.store.items(resource):
            try:
                obj = decode_live(raw, source=resource.plural)
            except ApiError:
                continue
            if isinstance(obj, model):
                out[obj.metadata.name] = obj
        return out

    def _flavor_placement(self, workload: WorkloadRecord) -> tuple[dict[str, str], list[Json]]:
        """Node labels and tolerations of every flavor assigned to the Workload."""
        labels: dict[str, str] = {}
        tolerations: list[Json] = []
        for assignment in (workload.status or {}).get("admission", {}).get("podSetAssignments", []):
            for flavor in sorted(set((assignment.get("flavors") or {}).values())):
                rf = self.io.store.get(RESOURCE_FLAVORS, flavor) or {}
                spec = rf.get("spec") or {}
                labels.update(spec.get("nodeLabels") or {})
                for t in spec.get("tolerations") or []:
                    if t not in tolerations:
                        tolerations.append(t)
        return labels, tolerations

    async def _set_suspended(
        self, job: Json, suspend: bool, workload: WorkloadRecord | None, *, why: str = ""
    ) -> None:
        """Suspend the Job (restoring `workload`'s template, if given) or start it with
        `workload`'s placement; a running Job stopped says `why` in its event."""
        pod = _pod_spec(job)
        current_selector: dict[str, str] = dict(pod.get("nodeSelector") or {})
        template_patch: Json = {}
        if workload is not None:
            base = workload.template or EMPTY_TEMPLATE
            base_selector: dict[str, str] = dict(base.node_selector)
            base_tolerations: list[Json] = list(base.tolerations)
            labels: dict[str, str] = dict(base.labels)
            annotations: dict[str, str] = dict(base.annotations)
            if suspend:
                selector, tolerations = base_selector, base_tolerations
            else:
                extra_labels, extra_tolerations = self._flavor_placement(workload)
                placed = {**base_selector, **extra_labels}
                placed_tolerations = base_tolerations + [
                    t for t in extra_tolerations if t not in base_tolerations
                ]
                try:
                    updates = check_updates(
                        base.pod_set,
                        workload.check_states,
                        CheckUpdates(labels, annotations, placed, placed_tolerations),
                    )
                except UpdateConflictError as err:
                    # Kueue cannot start such a Job either; it stays suspended, said in the log.
                    self.stats.errors += 1
                    log.error(
                        "event=job-start-refused job=%s/%s error=%s",
                        job["metadata"]["namespace"],
                        job["metadata"]["name"],
                        err,
                    )
                    return
                selector, tolerations = updates.node_selector, updates.tolerations
                labels, annotations = updates.labels, updates.annotations
            # A merge patch merges maps: keys to drop are set to null.
            selector_patch = _map_patch(current_selector, selector)
            selector_patch.update(selector)
            template_patch = {"spec": {"nodeSelector": selector_patch or None}}
            if tolerations != list(pod.get("tolerations") or []):
                template_patch["spec"]["tolerations"] = tolerations
            meta_patch: Json = {}
            for field, wanted in (("labels", labels), ("annotations", annotations)):
                current: dict[str, str] = dict(_template_meta(job).get(field) or {})
                if current != wanted:
                    meta_patch[field] = _map_patch(current, wanted)
            if meta_patch:
                template_patch["metadata"] = meta_patch
        meta = job["metadata"]
        if template_patch and (job.get("status") or {}).get("startTime"):
            job = await self._clear_start_time(job)
        patch: Json = {
            "metadata": {"resourceVersion": job["metadata"]["resourceVersion"]},
            "spec": {"suspend": suspend},
        }
        if template_patch:
            patch["spec"]["template"] = template_patch
        await self.io.limiter.acquire()
        result = await self.io.rest.merge_patch(JOBS.item(meta["name"], meta["namespace"]), patch)
        self.io.store.observe(JOBS, result)
        self._report(job, result, workload, why)

    def _report(self, before: Json, after: Json, workload: WorkloadRecord | None, why: str) -> None:
        """Count, log and record (docs/cluster.md#events) a Job suspended or started."""
        meta = after.get("metadata") or {}
        suspended = bool((after.get("spec") or {}).get("suspend"))
        log.info(
            "event=job-%s job=%s/%s",
            "suspended" if suspended else "started",
            meta.get("namespace"),
            meta.get("name"),
        )
        if not suspended:
            self.stats.unsuspended += 1
            admission = ((workload.status if workload else None) or {}).get("admission") or {}
            note = f"Admitted by clusterQueue {admission.get('clusterQueue', '')}"
            self.io.record(Event(_job_ref(after), "Started", note))
            return
        self.stats.suspended += 1
        if not (before.get("spec") or {}).get("suspend"):
            self.io.record(Event(_job_ref(after), "Stopped", why))

    async def _clear_start_time(self, job: Json) -> Json:
        """Reset a suspended Job's `status.startTime`: kube-apiserver lets the node
        selector and tolerations of a suspended Job change only while it has none, and
        the Job controller keeps the one from its last run (docs/cluster.md#nodes-and-pods)."""
        meta = job["metadata"]
        patch: Json = {
            "metadata": {"resourceVersion": meta["resourceVersion"]},
            "status": {"startTime": None},
        }
        await self.io.limiter.acquire()
        result = await self.io.rest.merge_patch(
            JOBS.item(meta["name"], meta["namespace"], "status"), patch
        )
        self.io.store.observe(JOBS, result)
        log.info("event=job-start-time-reset job=%s/%s", meta["namespace"], meta["name"])
        return result

    @staticmethod
    def _placement_differs(job: Json, workload: WorkloadRecord) -> bool:
        """Does the suspended Job still carry a flavor's node selector or tolerations, or
        a label or annotation an admission check's pod set update added?"""
        pod, base = _pod_spec(job), workload.template or EMPTY_TEMPLATE
        if (pod.get("nodeSelector") or {}) != base.node_selector or (
            pod.get("tolerations") or []
        ) != base.tolerations:
            return True
        meta = _template_meta(job)
        for current, recorded in (
            (meta.get("labels") or {}, base.labels),
            (meta.get("annotations") or {}, base.annotations),
        ):
            if any(recorded.get(k) != v for k, v in current.items()):
                return True
        return False

    async def _delete_orphans(self, namespace: str, job_name: str) -> None:
        """A deleted Job takes its Workload along (the garbage collector would, through
        the owner reference; doing it here also works where none runs)."""
        for workload in self.io.store.workloads():
            if workload.namespace != namespace:
                continue
            job = workload.owner(JOBS)
            if job is not None and job.name == job_name:
                await self.io.limiter.acquire()
                try:
                    await self.io.rest.delete(WORKLOADS.item(workload.name, namespace))
                except KubeError as err:
                    if err.status != 404:
                        raise
