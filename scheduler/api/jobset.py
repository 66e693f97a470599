"""A JobSet, as Kueue's `jobset.x-k8s.io/jobset` integration reads it, and the Workload it
makes of one (docs/cluster.md#jobsets).

A JobSet that names a LocalQueue is one workload, admitted all or none: one pod set per
replicated Job, named after it, of `replicas` × its Job's Pods (parallelism, at most
completions), with that Job's pod template; named by Kueue's rule
(`jobset-<name>-<5 hex digits>`) and controlled by the JobSet, as a Job's Workload is by
its Job. The JobSet waits suspended; once admitted it is started with each pod set's
placement written into its replicated Job's pod template, which the JobSet controller
copies into the child Jobs it resumes. The model is `scheduler.api.jobset_model`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.api import raw_object as raw
from scheduler.api.job_workload import owner_uid, owner_workload
from scheduler.api.jobset_model import JobSet
from scheduler.api.priority import PriorityClass, WorkloadPriorityClass
from scheduler.api.workload import PodSet, Workload

# The condition types that end a JobSet (Kueue's Finished).
COMPLETED = "Completed"
FAILED = "Failed"


def jobset_workload(
    jobset: JobSet,
    workload_priority_classes: Mapping[str, WorkloadPriorityClass],
    priority_classes: Mapping[str, PriorityClass],
) -> Workload:
    """The Workload as Kueue's JobSet integration creates it (a manifest without a uid
    gets the deterministic one Jobs get). ApiError when the JobSet names a priority class
    that does not exist."""
    pod_sets = [
        PodSet(
            name=replicated.name,
            count=replicated.replicas * replicated.pods_per_replica,
            template=replicated.template.spec.template,
        )
        for replicated in jobset.spec.replicated_jobs
    ]
    return owner_workload(
        jobset, owner_uid(jobset), pod_sets, workload_priority_classes, priority_classes
    )


def replicated_jobs(jobset: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """`spec.replicatedJobs` of a raw JobSet (the well-formed entries)."""
    found = raw.mapping(jobset.get("spec")).get("replicatedJobs")
    return [r for r in found if isinstance(r, Mapping)] if isinstance(found, list) else []


def pod_template(replicated: Mapping[str, Any]) -> Mapping[str, Any]:
    """The pod template of a raw replicated Job."""
    job_template = raw.mapping(replicated.get("template"))
    return raw.mapping(raw.mapping(job_template.get("spec")).get("template"))


def ended(jobset: Mapping[str, Any]) -> tuple[bool, bool]:
    """(finished, failed) from a raw JobSet's conditions, as Kueue reads them."""
    conditions = raw.mapping(jobset.get("status")).get("conditions")
    true = {
        c.get("type")
        for c in (conditions if isinstance(conditions, list) else [])
        if isinstance(c, Mapping) and c.get("status") == "True"
    }
    if COMPLETED in true:
        return True, False
    return (True, True) if FAILED in true else (False, False)


def pods_ready(jobset: Mapping[str, Any]) -> bool:
    """Kueue's PodsReady of a JobSet: as many ready or succeeded child Jobs as its
    replicated Jobs' replicas add up to."""
    wanted = sum(raw.integer(r.get("replicas"), 1) for r in replicated_jobs(jobset))
    statuses = raw.mapping(jobset.get("status")).get("replicatedJobsStatus")
    ready = sum(
        raw.integer(s.get("ready"), 0) + raw.integer(s.get("succeeded"), 0)
        for s in (statuses if isinstance(statuses, Sequence) else [])
        if isinstance(s, Mapping)
    )
    return ready == wanted
