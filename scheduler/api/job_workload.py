"""The Workload that Kueue's Job integration creates for a batch/v1 Job
(docs/scheduling.md#priority-resolution).

Naming: Kueue's rule (`scheduler.api.workload_names`), `job-<job name>-<5 hex digits>`.
When the Job (or a StatefulSet, docs/simulate.md#statefulsets) has no uid (a
hand-written manifest), a deterministic UUID-5 of "<apiVersion>/<kind>/<namespace>/<name>"
stands in, so the `kueue.x-k8s.io/job-uid` label and the name are reproducible across
runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, TypeAlias

from scheduler.api.errors import ApiError
from scheduler.api.job import (
    JOB_MIN_PARALLELISM_ANNOTATION,
    JOB_UID_LABEL,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    Job,
    max_exec_seconds,
)
from scheduler.api.jobset_model import JobSet
from scheduler.api.meta import ObjectMeta, controller_reference
from scheduler.api.plain_pod import Pod
from scheduler.api.priority import PriorityClass, WorkloadPriorityClass
from scheduler.api.source import set_source, source_of
from scheduler.api.statefulset_model import StatefulSet
from scheduler.api.workload import (
    POD_PRIORITY_CLASS_SOURCE,
    WORKLOAD_PRIORITY_CLASS_SOURCE,
    PodSet,
    PriorityClassSource,
    Workload,
    WorkloadSpec,
)
from scheduler.api.workload_names import workload_name

# What an integration makes a Workload of.
Owner: TypeAlias = Job | Pod | StatefulSet | JobSet

__all__ = [
    "ResolvedPriority",
    "job_to_workload",
    "job_uid",
    "job_workload_name",
    "owner_uid",
    "resolve_priority",
]


def owner_uid(owner: Owner) -> str:
    """The owner's uid, or the deterministic stand-in of a manifest without one."""
    meta = owner.metadata
    if meta.uid:
        return meta.uid
    where = f"{owner.api_version}/{owner.kind}/{meta.namespace or 'default'}/{meta.name}"
    return str(uuid.uuid5(uuid.NAMESPACE_URL, where))


def job_uid(job: Job) -> str:
    return owner_uid(job)


def job_workload_name(job_name: str, uid: str) -> str:
    return workload_name("Job", "batch", job_name, uid)


ResolvedPriority = tuple[int, str, PriorityClassSource]
"""(priority, priorityClassName, priorityClassSource)."""


def _error(job: Owner, path: str, detail: str) -> ApiError:
    ref = source_of(job)
    return ApiError(
        detail,
        path=path,
        source=ref.source if ref else "",
        index=ref.index if ref else None,
        item=ref.item if ref else None,
        kind=job.kind,
        name=job.metadata.name,
        namespace=job.metadata.namespace,
    )


def resolve_priority(
    job: Owner,
    workload_priority_classes: Mapping[str, WorkloadPriorityClass],
    priority_classes: Mapping[str, PriorityClass],
) -> ResolvedPriority:
    """docs/scheduling.md#priority-resolution, in order: WorkloadPriorityClass label, pod
    PriorityClass, global default, 0."""
    wpc_name = job.metadata.labels.get(PRIORITY_CLASS_LABEL, "")
    if wpc_name:
        wpc = workload_priority_classes.get(wpc_name)
        if wpc is None:
            raise _error(
                job,
                f"metadata.labels[{PRIORITY_CLASS_LABEL}]",
                f'WorkloadPriorityClass "{wpc_name}" not found',
            )
        return wpc.value, wpc_name, WORKLOAD_PRIORITY_CLASS_SOURCE
    pc_name, pc_path = _pod_priority_class(job)
    if pc_name:
        pc = priority_classes.get(pc_name)
        if pc is None:
            detail = f'PriorityClass "{pc_name}" not found'
            raise _error(job, f"{pc_path}.priorityClassName", detail)
        return pc.value, pc_name, POD_PRIORITY_CLASS_SOURCE
    defaults = [pc for pc in priority_classes.values() if pc.global_default]
    if defaults:
        # Several global defaults: the lowest value wins; name breaks ties (determinism).
        chosen = min(defaults, key=lambda pc: (pc.value, pc.metadata.name))
        return chosen.value, chosen.metadata.name, POD_PRIORITY_CLASS_SOURCE
    return 0, "", ""


def _pod_priority_class(owner: Owner) -> tuple[str, str]:
    """The pod PriorityClass of the first pod set that names one, and where it is named.
    A Job (a Pod, a StatefulSet) has a single pod set: its template (its spec)."""
    if isinstance(owner, Pod):
        return owner.spec.priority_class_name, "spec"
    if isinstance(owner, JobSet):
        for index, replicated in enumerate(owner.spec.replicated_jobs):
            named = replicated.template.spec.template.spec.priority_class_name
            if named:
                return named, f"spec.replicatedJobs[{index}].template.spec.template.spec"
        return "", ""
    return owner.spec.template.spec.priority_class_name, "spec.template.spec"


def _pod_count(job: Job) -> int:
    count = job.spec.parallelism
    if job.spec.completions is not None:
        count = min(count, job.spec.completions)
    return count


def _min_count(job: Job) -> int | None:
    raw = job.metadata.annotations.get(JOB_MIN_PARALLELISM_ANNOTATION)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise _error(
            job,
            f"metadata.annotations[{JOB_MIN_PARALLELISM_ANNOTATION}]",
            f'Invalid value: "{raw}": must be an integer',
        ) from None


def job_to_workload(
    job: Job,
    workload_priority_classes: Mapping[str, WorkloadPriorityClass],
    priority_classes: Mapping[str, PriorityClass],
) -> Workload:
    """The Workload as Kueue's Job integration would create it when the Job is created.

    Raises ApiError when the Job names a priority class that does not exist: upstream
    creates no Workload then, and the simulator treats it as bad input.
    """
    pod_set = PodSet(
        name="main", count=_pod_count(job), min_count=_min_count(job), template=job.spec.template
    )
    return owner_workload(job, job_uid(job), [pod_set], workload_priority_classes, priority_classes)


def owner_workload(  # noqa: PLR0913 - the owner, its pod sets, the classes, two options
    owner: Owner,
    uid: str,
    pod_sets: list[PodSet],
    workload_priority_classes: Mapping[str, WorkloadPriorityClass],
    priority_classes: Mapping[str, PriorityClass],
    *,
    annotations: Mapping[str, str] | None = None,
    controller: bool = True,
) -> Workload:
    """The Workload an integration makes for `owner` (a Job, a Pod, a StatefulSet, a JobSet) with
    these pod sets: named by Kueue's rule, owned by it (its controller unless
    `controller` is False), labelled with its uid, in the LocalQueue, with the priority
    and the maximum execution time its labels say. ApiError when it names a priority
    class that does not exist."""
    priority, class_name, class_source = resolve_priority(
        owner, workload_priority_classes, priority_classes
    )
    meta = owner.metadata
    group = owner.api_version.rpartition("/")[0]
    reference: dict[str, Any] = controller_reference(owner.api_version, owner.kind, meta.name, uid)
    if not controller:
        # Kueue's SetOwnerReference: an owner that neither controls nor blocks deletion.
        reference = {
            k: v for k, v in reference.items() if k in ("apiVersion", "kind", "name", "uid")
        }
    workload = Workload(
        metadata=ObjectMeta(
            name=workload_name(owner.kind, group, meta.name, uid),
            namespace=meta.namespace or "default",
            labels={JOB_UID_LABEL: uid} if uid else {},
            annotations=dict(annotations or {}),
            creation_timestamp=meta.creation_timestamp,
            owner_references=[reference],
        ),
        spec=WorkloadSpec(
            pod_sets=pod_sets,
            queue_name=meta.labels.get(QUEUE_NAME_LABEL, ""),
            priority=priority,
            priority_class_name=class_name,
            priority_class_source=class_source,
            maximum_execution_time_seconds=max_exec_seconds(meta.labels),
        ),
    )
    # The Workload is reported against its owner's manifest.
    return set_source(workload, source_of(owner))
