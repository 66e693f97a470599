"""The batch/v1 Job integration (issue 5 item 3, kep-349's Job parts): the flow every
suspended kind shares (`suspendable.py`), for a Job. Its one pod set is its pod
template; it reports `PodsReady` when `ready + succeeded >= parallelism`, gives back the
quota of the Pods it no longer needs (`reclaimablePods`) and ends with its `Complete` or
`Failed` condition. A Job a JobSet controls is the JobSet's, with the
`jobset.x-k8s.io/jobset` integration on (docs/cluster.md#jobsets).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.api import Job
from scheduler.api import raw_object as raw
from scheduler.api.integrations import NO_INTEGRATIONS, Integrations
from scheduler.api.job import JOB_MIN_PARALLELISM_ANNOTATION
from scheduler.api.job_reclaimable import reclaimable_pods
from scheduler.api.job_workload import job_to_workload
from scheduler.api.jobset_admission import controlled_by_jobset
from scheduler.api.workload import Workload
from scheduler.kubeapi.errors import Json
from scheduler.runtime.kube.decode import decode_live
from scheduler.runtime.kube.leader_io import LeaderIO
from scheduler.runtime.kube.placement import map_patch
from scheduler.runtime.kube.priorities import PriorityClasses, priority_classes
from scheduler.runtime.kube.records import WorkloadRecord
from scheduler.runtime.kube.resources import JOBS, WORKLOADS
from scheduler.runtime.kube.suspendable import Change, SuspendableController, template_fields

log = logging.getLogger(__name__)

JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
MAIN_POD_SET = "main"  # a Job's one pod set
COMPLETIONS_EQUAL_PARALLELISM = "kueue.x-k8s.io/job-completions-equal-parallelism"
GO_TRUE = frozenset(("1", "t", "T", "TRUE", "true", "True"))  # what Go's ParseBool takes


def _condition(obj: Json, type_: str) -> Json | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == type_ and c.get("status") == "True":
            return c
    return None


def _pod_template(obj: Json) -> Mapping[str, Any]:
    return raw.mapping(raw.mapping(obj.get("spec")).get("template"))


class JobController(SuspendableController):
    def __init__(
        self,
        io: LeaderIO,
        *,
        retry_delay: float = 1.0,
        integrations: Integrations = NO_INTEGRATIONS,
    ) -> None:
        super().__init__(io, JOBS, retry_delay=retry_delay)
        self._integrations = integrations

    def make_workload(self, obj: Json) -> Workload:
        job = decode_live(obj, source="batch/v1/jobs")
        assert isinstance(job, Job)
        return job_to_workload(job, *priority_classes(self.io.store))

    def priority_classes(self) -> PriorityClasses:
        """The priority classes a Job's priority resolves with (the what-if dry run too)."""
        return priority_classes(self.io.store)

    def managed(self, obj: Json) -> bool:
        """A Job naming a queue, unless a JobSet controls it while JobSets are integrated:
        then its JobSet is the workload (Kueue skips a Job whose owner it manages)."""
        if not super().managed(obj):
            return False
        return not (self._integrations.jobsets and controlled_by_jobset(obj))

    def pod_templates(self, obj: Json) -> Sequence[Mapping[str, Any]]:
        return [_pod_template(obj)]

    def ended(self, obj: Json) -> tuple[bool, bool]:
        if _condition(obj, "Failed") is not None:
            return True, True
        if _condition(obj, "Complete") is not None:
            return True, False
        return False, False

    def reclaimable(self, obj: Json) -> dict[str, int] | None:
        """Kueue's: once fewer Pods remain to run than its parallelism, the rest of its
        one pod set (docs/cluster.md#reclaimable-pods)."""
        count = reclaimable_pods(obj)
        return {MAIN_POD_SET: count} if count else {}

    def pods_ready(self, obj: Json) -> bool:
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        parallelism = spec.get("parallelism", 1)
        ready = int(status.get("ready") or 0) + int(status.get("succeeded") or 0)
        return ready >= int(parallelism if parallelism is not None else 1)

    async def write(self, obj: Json, change: Change) -> Json:
        """One merge patch of the Job: `spec.suspend`, its pod template's maps turned
        into the wanted ones (keys to drop set to null), and a partially admissible Job's
        parallelism (docs/cluster.md#partial-admission)."""
        suspend, workload, templates = change.suspend, change.workload, change.templates
        template_patch: Json = {}
        if templates:
            wanted, current = templates[0], template_fields(_pod_template(obj))
            selector_patch = map_patch(current.node_selector, wanted.node_selector)
            selector_patch.update(wanted.node_selector)
            template_patch = {"spec": {"nodeSelector": selector_patch or None}}
            if wanted.tolerations != current.tolerations:
                template_patch["spec"]["tolerations"] = wanted.tolerations
            meta_patch: Json = {}
            for field, now, want in (
                ("labels", current.labels, wanted.labels),
                ("annotations", current.annotations, wanted.annotations),
            ):
                if now != want:
                    meta_patch[field] = map_patch(now, want)
            if meta_patch:
                template_patch["metadata"] = meta_patch
        meta = obj["metadata"]
        if template_patch and (obj.get("status") or {}).get("startTime"):
            obj = await self._clear_start_time(obj)
        patch: Json = {
            "metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
            "spec": {"suspend": suspend},
        }
        if template_patch:
            patch["spec"]["template"] = template_patch
        if workload is not None:
            patch["spec"].update(await self._counts(obj, workload, start=not suspend))
        await self.io.limiter.acquire()
        return await self.io.rest.merge_patch(JOBS.item(meta["name"], meta["namespace"]), patch)

    async def _counts(self, job: Json, workload: WorkloadRecord, *, start: bool) -> Json:
        """A Job with `kueue.x-k8s.io/job-min-parallelism` runs the count its Workload was
        admitted with and gets its own back when stopped, as Kueue's Job integration sets
        them; its completions follow with `job-completions-equal-parallelism: "true"`."""
        annotations = raw.annotations_of(job)
        if JOB_MIN_PARALLELISM_ANNOTATION not in annotations:
            return {}
        if start:
            admission = raw.mapping((workload.status or {}).get("admission"))
            assigned = [raw.mapping(a) for a in admission.get("podSetAssignments") or []]
            count = raw.integer(assigned[0].get("count"), -1) if assigned else -1
        else:
            whole = await self.io.rest.get(WORKLOADS.item(workload.name, workload.namespace))
            pod_sets = [raw.mapping(p) for p in raw.mapping(whole.get("spec")).get("podSets") or []]
            count = raw.integer(pod_sets[0].get("count"), -1) if pod_sets else -1
        if count < 0 or count == raw.mapping(job.get("spec")).get("parallelism"):
            return {}
        counts: Json = {"parallelism": count}
        if annotations.get(COMPLETIONS_EQUAL_PARALLELISM) in GO_TRUE:
            counts["completions"] = count
        return counts

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
