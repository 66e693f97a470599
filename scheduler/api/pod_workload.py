"""The Workload that Kueue's `pod` integration creates for a single Pod
(docs/cluster.md#plain-pods): one pod set `main` of count 1 whose template is the Pod's
spec, owned by the Pod, named by Kueue's rule (`pod-<pod name>-<5 hex digits>`)."""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.api.job import JOB_UID_LABEL, QUEUE_NAME_LABEL, max_exec_seconds
from scheduler.api.job_workload import resolve_priority
from scheduler.api.meta import ObjectMeta, controller_reference
from scheduler.api.plain_pod import Pod
from scheduler.api.pod import PodTemplateSpec
from scheduler.api.priority import PriorityClass, WorkloadPriorityClass
from scheduler.api.source import set_source, source_of
from scheduler.api.workload import PodSet, Workload, WorkloadSpec
from scheduler.api.workload_names import workload_name


def pod_workload_name(pod_name: str, uid: str) -> str:
    return workload_name("Pod", "", pod_name, uid)


def pod_to_workload(
    pod: Pod,
    workload_priority_classes: Mapping[str, WorkloadPriorityClass],
    priority_classes: Mapping[str, PriorityClass],
) -> Workload:
    """The Workload as Kueue's `pod` integration creates it. ApiError when the Pod names
    a priority class that does not exist (no Workload is made then, as in Kueue)."""
    meta = pod.metadata
    uid = meta.uid or ""
    priority, class_name, class_source = resolve_priority(
        pod, workload_priority_classes, priority_classes
    )
    owner = controller_reference("v1", "Pod", meta.name, uid)
    workload = Workload(
        metadata=ObjectMeta(
            name=pod_workload_name(meta.name, uid),
            namespace=meta.namespace or "default",
            labels={JOB_UID_LABEL: uid} if uid else {},
            creation_timestamp=meta.creation_timestamp,
            owner_references=[owner],
        ),
        spec=WorkloadSpec(
            pod_sets=[PodSet(name="main", count=1, template=PodTemplateSpec(spec=pod.spec))],
            queue_name=meta.labels.get(QUEUE_NAME_LABEL, ""),
            priority=priority,
            priority_class_name=class_name,
            priority_class_source=class_source,
            maximum_execution_time_seconds=max_exec_seconds(meta.labels),
        ),
    )
    return set_source(workload, source_of(pod))
