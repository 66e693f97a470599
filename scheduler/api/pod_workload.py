"""The Workload that Kueue's `pod` integration creates for a single Pod
(docs/cluster.md#plain-pods): one pod set `main` of count 1 whose template is the Pod's
spec, owned by the Pod, named by Kueue's rule (`pod-<pod name>-<5 hex digits>`)."""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.api.job_workload import owner_workload
from scheduler.api.plain_pod import Pod
from scheduler.api.pod import PodTemplateSpec
from scheduler.api.priority import PriorityClass, WorkloadPriorityClass
from scheduler.api.workload import PodSet, Workload
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
    pod_set = PodSet(name="main", count=1, template=PodTemplateSpec(spec=pod.spec))
    return owner_workload(
        pod, pod.metadata.uid or "", [pod_set], workload_priority_classes, priority_classes
    )
