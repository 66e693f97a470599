"""The `jobset.x-k8s.io/jobset` integration (docs/cluster.md#jobsets): the flow every
suspended kind shares (`suspendable.py`), for a JobSet.

Its pod sets are its replicated Jobs' pod templates; it reports `PodsReady` once its
ready and succeeded child Jobs add up to its replicas, gives back the quota of the
replicas that succeeded (`reclaimablePods`) and ends with its `Completed` or `Failed`
condition. A JobSet's placement is written into its replicated Jobs' pod templates while
it is suspended (JobSet's own webhook lets exactly those fields change then); the JobSet
controller copies them into the child Jobs it resumes.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.api import raw_object as raw
from scheduler.api.jobset import ended, jobset_workload, pod_template, pods_ready, replicated_jobs
from scheduler.api.jobset_model import JobSet, pods_per_replica
from scheduler.api.live import decode_live_as
from scheduler.api.workload import Workload
from scheduler.kubeapi.errors import Json
from scheduler.runtime.kube.leader_io import LeaderIO
from scheduler.runtime.kube.placement import CheckUpdates
from scheduler.runtime.kube.priorities import priority_classes
from scheduler.runtime.kube.resources import JOBSETS
from scheduler.runtime.kube.suspendable import Change, SuspendableController


def _set_template(template: dict[str, Any], wanted: CheckUpdates) -> None:
    """Make the raw pod template hold `wanted` (an empty map or list: the field dropped)."""
    meta = template.setdefault("metadata", {})
    pod = template.setdefault("spec", {})
    for holder, field, value in (
        (meta, "labels", wanted.labels),
        (meta, "annotations", wanted.annotations),
        (pod, "nodeSelector", wanted.node_selector),
        (pod, "tolerations", wanted.tolerations),
    ):
        if value:
            holder[field] = value
        else:
            holder.pop(field, None)


class JobSetController(SuspendableController):
    def __init__(self, io: LeaderIO, *, retry_delay: float = 1.0) -> None:
        super().__init__(io, JOBSETS, retry_delay=retry_delay)

    def make_workload(self, obj: Json) -> Workload:
        jobset = decode_live_as(JobSet, obj, source="jobset.x-k8s.io/v1alpha2/jobsets")
        return jobset_workload(jobset, *priority_classes(self.io.store))

    def pod_templates(self, obj: Json) -> Sequence[Mapping[str, Any]]:
        return [pod_template(r) for r in replicated_jobs(obj)]

    def ended(self, obj: Json) -> tuple[bool, bool]:
        return ended(obj)

    def pods_ready(self, obj: Json) -> bool:
        return pods_ready(obj)

    def reclaimable(self, obj: Json) -> dict[str, int] | None:
        """Kueue's: the Pods of each replicated Job's succeeded replicas (no more than it
        has), once some have succeeded."""
        statuses = raw.mapping(obj.get("status")).get("replicatedJobsStatus")
        if not statuses:
            return None
        succeeded = {
            str(s.get("name")): int(s.get("succeeded") or 0)
            for s in statuses
            if isinstance(s, Mapping)
        }
        counts: dict[str, int] = {}
        for entry in replicated_jobs(obj):
            job_spec = raw.mapping(raw.mapping(entry.get("template")).get("spec"))
            per_replica = pods_per_replica(job_spec.get("parallelism"), job_spec.get("completions"))
            done = succeeded.get(str(entry.get("name")), 0)
            if 0 < done <= int(entry.get("replicas", 1)):
                counts[str(entry.get("name"))] = done * per_replica
        return counts

    async def write(self, obj: Json, change: Change) -> Json:
        """One merge patch of the JobSet: `spec.suspend`, and with templates the whole
        `spec.replicatedJobs` (a merge patch replaces a list whole), read from the server
        with its resourceVersion as the precondition."""
        meta = raw.metadata_of(obj)
        name, namespace = str(meta.get("name", "")), str(meta.get("namespace", ""))
        version = meta.get("resourceVersion")
        spec: Json = {"suspend": change.suspend}
        if change.templates is not None:
            whole = await self.whole(namespace, name)
            if whole is None:
                return obj  # deleted meanwhile: the watch says so
            version = whole["metadata"]["resourceVersion"]
            entries = copy.deepcopy(whole["spec"]["replicatedJobs"])
            for entry, wanted in zip(entries, change.templates, strict=False):
                job_template = entry.setdefault("template", {}).setdefault("spec", {})
                _set_template(job_template.setdefault("template", {}), wanted)
            spec["replicatedJobs"] = entries
        patch: Json = {"metadata": {"resourceVersion": version}, "spec": spec}
        await self.io.limiter.acquire()
        return await self.io.rest.merge_patch(JOBSETS.item(name, namespace), patch)
