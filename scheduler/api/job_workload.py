"""The Workload that Kueue's Job integration creates for a batch/v1 Job
(docs/scheduling.md#priority-resolution).

Naming: Kueue names the Workload `job-<job name>-<5 hex digits of a hash>`; the hash
only has to be stable and to tell apart Jobs that reuse a name. Ours is the first 5
hex digits of SHA-1 over "batch/v1\\nJob\\n<name>\\n<uid>", and the prefix is cut so
the name stays within 253 characters. When the Job has no uid (a hand-written
manifest), a deterministic UUID-5 of "batch/v1/Job/<namespace>/<name>" stands in, so
the `kueue.x-k8s.io/job-uid` label and the name are reproducible across runs.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping

from scheduler.api.errors import ApiError
from scheduler.api.job import (
    JOB_MIN_PARALLELISM_ANNOTATION,
    JOB_UID_LABEL,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    Job,
)
from scheduler.api.meta import ObjectMeta
from scheduler.api.priority import PriorityClass, WorkloadPriorityClass
from scheduler.api.source import set_source, source_of
from scheduler.api.workload import (
    POD_PRIORITY_CLASS_SOURCE,
    WORKLOAD_PRIORITY_CLASS_SOURCE,
    PodSet,
    PriorityClassSource,
    Workload,
    WorkloadSpec,
)

__all__ = [
    "ResolvedPriority",
    "job_to_workload",
    "job_uid",
    "job_workload_name",
    "resolve_priority",
]

_MAX_NAME = 253
_HASH_LENGTH = 5


def job_uid(job: Job) -> str:
    if job.metadata.uid:
        return job.metadata.uid
    namespace = job.metadata.namespace or "default"
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"batch/v1/Job/{namespace}/{job.metadata.name}"))


def job_workload_name(job_name: str, uid: str) -> str:
    digest = hashlib.sha1(f"batch/v1\nJob\n{job_name}\n{uid}".encode(), usedforsecurity=False)
    prefix = f"job-{job_name}"[: _MAX_NAME - _HASH_LENGTH - 1]
    return f"{prefix}-{digest.hexdigest()[:_HASH_LENGTH]}"


ResolvedPriority = tuple[int, str, PriorityClassSource]
"""(priority, priorityClassName, priorityClassSource)."""


def _error(job: Job, path: str, detail: str) -> ApiError:
    ref = source_of(job)
    return ApiError(
        detail,
        path=path,
        source=ref.source if ref else "",
        index=ref.index if ref else None,
        item=ref.item if ref else None,
        kind="Job",
        name=job.metadata.name,
        namespace=job.metadata.namespace,
    )


def resolve_priority(
    job: Job,
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
    # A Job has a single pod set, so "the first pod set naming a class" is its template.
    pc_name = job.spec.template.spec.priority_class_name
    if pc_name:
        pc = priority_classes.get(pc_name)
        if pc is None:
            raise _error(
                job, "spec.template.spec.priorityClassName", f'PriorityClass "{pc_name}" not found'
            )
        return pc.value, pc_name, POD_PRIORITY_CLASS_SOURCE
    defaults = [pc for pc in priority_classes.values() if pc.global_default]
    if defaults:
        # Several global defaults: the lowest value wins; name breaks ties (determinism).
        chosen = min(defaults, key=lambda pc: (pc.value, pc.metadata.name))
        return chosen.value, chosen.metadata.name, POD_PRIORITY_CLASS_SOURCE
    return 0, "", ""


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
    uid = job_uid(job)
    priority, class_name, class_source = resolve_priority(
        job, workload_priority_classes, priority_classes
    )
    meta = job.metadata
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": meta.name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    workload = Workload(
        metadata=ObjectMeta(
            name=job_workload_name(meta.name, uid),
            namespace=meta.namespace or "default",
            labels={JOB_UID_LABEL: uid},
            creation_timestamp=meta.creation_timestamp,
            owner_references=[owner],
        ),
        spec=WorkloadSpec(
            pod_sets=[
                PodSet(
                    name="main",
                    count=_pod_count(job),
                    min_count=_min_count(job),
                    template=job.spec.template,
                )
            ],
            queue_name=meta.labels.get(QUEUE_NAME_LABEL, ""),
            priority=priority,
            priority_class_name=class_name,
            priority_class_source=class_source,
        ),
    )
    # The Workload is reported against the Job's manifest.
    return set_source(workload, source_of(job))
