"""The objects a Workload is made of offline (`simulate`, `serve --embedded`, the what-if
dry run): a batch/v1 Job, always (docs/scheduling.md#configuration), a plain v1 Pod with
the `pod` integration on (docs/simulate.md#pods), an apps/v1 StatefulSet with the
`statefulset` integration on (docs/simulate.md#statefulsets) and a JobSet with the
`jobset.x-k8s.io/jobset` integration on (docs/simulate.md#jobsets), each as Kueue's
integration creates it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

from scheduler.api.errors import ApiError
from scheduler.api.integrations import (
    JOBSET_FRAMEWORK,
    POD_FRAMEWORK,
    STATEFULSET_FRAMEWORK,
    Integrations,
)
from scheduler.api.job import QUEUE_NAME_LABEL, Job
from scheduler.api.job_workload import job_to_workload
from scheduler.api.jobset import jobset_workload
from scheduler.api.jobset_model import JobSet
from scheduler.api.plain_pod import POD_GROUP_NAME, POD_GROUP_TOTAL_COUNT, Pod
from scheduler.api.pod_workload import pod_to_workload
from scheduler.api.priority import PriorityClass, WorkloadPriorityClass
from scheduler.api.statefulset import statefulset_workload
from scheduler.api.statefulset_model import StatefulSet
from scheduler.api.validation.paths import key
from scheduler.api.workload import Workload

WorkloadSource: TypeAlias = Job | Pod | StatefulSet | JobSet
WORKLOAD_SOURCES = (Job, Pod, StatefulSet, JobSet)


def makes_workload(obj: WorkloadSource) -> bool:
    """Would its integration make a Workload of `obj`? Not without a queue name (Kueue
    does not manage it), nor for a StatefulSet of no replicas (the cluster holds its
    Workload: there is nothing to admit)."""
    if obj.queue_name is None:
        return False
    return not (isinstance(obj, StatefulSet) and obj.spec.replicas == 0)


def integration_off_error(obj: WorkloadSource, integrations: Integrations) -> ApiError | None:
    """A Pod, StatefulSet or JobSet that names a LocalQueue while its integration is off:
    Kueue would let it run unqueued, which offline means nothing at all; said rather than
    skipped (docs/simulate.md#pods). None when its integration is on (or it is a Job)."""
    if isinstance(obj, Pod) and not integrations.plain:
        framework = POD_FRAMEWORK
    elif isinstance(obj, StatefulSet) and not integrations.statefulsets:
        framework = STATEFULSET_FRAMEWORK
    elif isinstance(obj, JobSet) and not integrations.jobsets:
        framework = JOBSET_FRAMEWORK
    else:
        return None
    return ApiError(
        f'names the LocalQueue "{obj.queue_name}" but the Configuration does not list '
        f"`{framework}` in integrations.frameworks, so Kueue would not queue it",
        path=key("metadata.labels", QUEUE_NAME_LABEL),
        kind=obj.kind,
        name=obj.metadata.name,
    )


def pod_group_error(pod: Pod) -> ApiError | None:
    """A pod group's Pod: taken in cluster mode only (docs/simulate.md#pods)."""
    for where, values in (
        ("labels", pod.metadata.labels),
        ("annotations", pod.metadata.annotations),
    ):
        for group_key in (POD_GROUP_NAME, POD_GROUP_TOTAL_COUNT):
            if group_key in values:
                return ApiError(
                    "Forbidden: pod groups are taken in cluster mode only (docs/simulate.md#pods)",
                    path=key(f"metadata.{where}", group_key),
                    kind="Pod",
                    name=pod.metadata.name,
                )
    return None


def source_workload(
    obj: WorkloadSource,
    workload_priority_classes: Mapping[str, WorkloadPriorityClass],
    priority_classes: Mapping[str, PriorityClass],
    *,
    integrations: Integrations,
) -> Workload | None:
    """The Workload of `obj`, or None when its integration would make none
    (`makes_workload`). `integrations`: those that are on (a Pod or StatefulSet that
    names a queue while its own is off is an ApiError). ApiError too when a priority
    class it names is missing."""
    if not makes_workload(obj):
        return None
    refused = integration_off_error(obj, integrations)
    if refused is not None:
        raise refused
    if isinstance(obj, Job):
        return job_to_workload(obj, workload_priority_classes, priority_classes)
    if isinstance(obj, StatefulSet):
        return statefulset_workload(obj, workload_priority_classes, priority_classes)
    if isinstance(obj, JobSet):
        return jobset_workload(obj, workload_priority_classes, priority_classes)
    group_error = pod_group_error(obj)
    if group_error is not None:
        raise group_error
    return pod_to_workload(obj, workload_priority_classes, priority_classes)
