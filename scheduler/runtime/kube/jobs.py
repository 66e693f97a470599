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

import logging

from scheduler.api import Job
from scheduler.api.job import QUEUE_NAME_LABEL
from scheduler.api.job_workload import job_to_workload
from scheduler.api.workload import Workload
from scheduler.kubeapi.errors import Json, KubeError
from scheduler.runtime.commands import Finish, PodsReady
from scheduler.runtime.kube.decode import decode_live
from scheduler.runtime.kube.integration import Integration
from scheduler.runtime.kube.leader_io import LeaderIO
from scheduler.runtime.kube.placement import (
    CheckUpdates,
    UpdateConflictError,
    map_patch,
    started_placement,
)
from scheduler.runtime.kube.priorities import PriorityClasses, priority_classes
from scheduler.runtime.kube.records import EMPTY_TEMPLATE, WorkloadRecord
from scheduler.runtime.kube.resources import (
    JOBS,
    WORKLOADS,
)

log = logging.getLogger(__name__)

JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"


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


def _pod_spec(obj: Json) -> Json:
    return ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}


def _template_meta(obj: Json) -> Json:
    return ((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}


class JobController(Integration):
    def __init__(self, io: LeaderIO, *, retry_delay: float = 1.0) -> None:
        super().__init__(io, JOBS, retry_delay=retry_delay)

    def make_workload(self, obj: Json) -> Workload:
        job = decode_live(obj, source="batch/v1/jobs")
        assert isinstance(job, Job)
        return job_to_workload(job, *priority_classes(self.io.store))

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
        workload = self.workload_of(job)
        suspended = bool((job.get("spec") or {}).get("suspend", False))
        finished, failed = _job_finished(job)
        if workload is None:
            if finished:
                return
            if not suspended:
                await self._set_suspended(job, True, None, why="missing workload")
            await self.create_workload(namespace, name)
            return
        wl_key = workload.key
        core = self.io.engine.scheduler.workload(wl_key)
        if finished:
            if workload.condition("Finished") is None and core is not None and not core.finished:
                self.io.engine.submit(Finish(wl_key, failed=failed))
            return
        await self._follow(job, workload, suspended=suspended)

    async def _follow(self, job: Json, workload: WorkloadRecord, *, suspended: bool) -> None:
        """A live Job with a live Workload: start it once admitted, report its pods ready,
        stop it once the admission is gone and put its template back; while it waits,
        its Workload follows its queue-name label."""
        wl_key = workload.key
        core = self.io.engine.scheduler.workload(wl_key)
        if await self.follow_priority_class(job, workload):
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
        else:
            await self.follow_labels(job, workload)
            await self.follow_spec(job, workload)

    @staticmethod
    def _pods_ready(job: Json) -> bool:
        spec, status = job.get("spec") or {}, job.get("status") or {}
        parallelism = spec.get("parallelism", 1)
        ready = int(status.get("ready") or 0) + int(status.get("succeeded") or 0)
        return ready >= int(parallelism if parallelism is not None else 1)

    def priority_classes(self) -> PriorityClasses:
        """The priority classes a Job's priority resolves with (the what-if dry run too)."""
        return priority_classes(self.io.store)

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
                try:
                    updates = started_placement(
                        self.io.store,
                        workload,
                        base.pod_set,
                        self.queue_of(workload),
                        CheckUpdates(labels, annotations, base_selector, base_tolerations),
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
            selector_patch = map_patch(current_selector, selector)
            selector_patch.update(selector)
            template_patch = {"spec": {"nodeSelector": selector_patch or None}}
            if tolerations != list(pod.get("tolerations") or []):
                template_patch["spec"]["tolerations"] = tolerations
            meta_patch: Json = {}
            for field, wanted in (("labels", labels), ("annotations", annotations)):
                current: dict[str, str] = dict(_template_meta(job).get(field) or {})
                if current != wanted:
                    meta_patch[field] = map_patch(current, wanted)
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
        self.saw_write(job, result)
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
            self.stats.started += 1
            admission = ((workload.status if workload else None) or {}).get("admission") or {}
            note = f"Admitted by clusterQueue {admission.get('clusterQueue', '')}"
            self.tell(after, "Started", note)
            return
        self.stats.stopped += 1
        if not (before.get("spec") or {}).get("suspend"):
            self.tell(after, "Stopped", why)

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
