"""The objects a Workload is made of offline (`simulate`, `serve --embedded`, the what-if
dry run): a batch/v1 Job, always (docs/scheduling.md#configuration), and a plain v1 Pod
with the `pod` integration on (docs/simulate.md#pods), each as Kueue's integration
creates it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

from scheduler.api.errors import ApiError
from scheduler.api.job import QUEUE_NAME_LABEL, Job
from scheduler.api.job_workload import job_to_workload
from scheduler.api.plain_pod import POD_GROUP_NAME, POD_GROUP_TOTAL_COUNT, Pod
from scheduler.api.pod_workload import pod_to_workload
from scheduler.api.priority import PriorityClass, WorkloadPriorityClass
from scheduler.api.validation.paths import key
from scheduler.api.workload import Workload

WorkloadSource: TypeAlias = Job | Pod
WORKLOAD_SOURCES = (Job, Pod)


def pods_off_error(pod: Pod) -> ApiError:
    """A Pod that names a LocalQueue while the `pod` integration is off: Kueue would let
    it run unqueued, which offline means nothing at all; said rather than skipped."""
    return ApiError(
        f'names the LocalQueue "{pod.queue_name}" but the Configuration does not list `pod` '
        "in integrations.frameworks, so Kueue would not queue it",
        path=key("metadata.labels", QUEUE_NAME_LABEL),
        kind="Pod",
        name=pod.metadata.name,
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
    pods: bool,
) -> Workload | None:
    """The Workload of `obj`, or None when its integration would not manage it (no
    queue name). `pods`: the `pod` integration is on (a Pod that names a queue while it
    is off is an ApiError). ApiError too when a priority class it names is missing."""
    if obj.queue_name is None:
        return None
    if isinstance(obj, Job):
        return job_to_workload(obj, workload_priority_classes, priority_classes)
    if not pods:
        raise pods_off_error(obj)
    group_error = pod_group_error(obj)
    if group_error is not None:
        raise group_error
    return pod_to_workload(obj, workload_priority_classes, priority_classes)
