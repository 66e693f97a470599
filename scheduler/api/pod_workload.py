"""The Workloads that Kueue's `pod` integration creates: for a single Pod
(docs/cluster.md#plain-pods), one pod set `main` of count 1 whose template is the Pod's
spec, owned by the Pod, named by Kueue's rule (`pod-<pod name>-<5 hex digits>`); for a
pod group (docs/cluster.md#pod-groups), one pod set per role, named after the group and
owned by all its Pods."""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.api.job import QUEUE_NAME_LABEL, max_exec_seconds
from scheduler.api.job_workload import owner_workload, resolve_priority
from scheduler.api.meta import ObjectMeta
from scheduler.api.plain_pod import Pod
from scheduler.api.pod import PodTemplateSpec
from scheduler.api.pod_group import IS_GROUP_WORKLOAD, Role
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
    pod_set = PodSet(name="main", count=1, template=PodTemplateSpec(spec=pod.spec))
    return owner_workload(
        pod, pod.metadata.uid or "", [pod_set], workload_priority_classes, priority_classes
    )


def pod_group_workload(
    group: str,
    roles: list[tuple[Role, Pod]],
    members: list[tuple[str, str]],
    workload_priority_classes: Mapping[str, WorkloadPriorityClass],
    priority_classes: Mapping[str, PriorityClass],
) -> Workload:
    """The Workload of pod group `group`: a pod set per role (each with the spec of the
    role's Pod given beside it), owned by each member (name, uid), its queue, priority
    and maximum execution time those of the first role's Pod. ApiError when that Pod
    names a priority class that does not exist."""
    first = roles[0][1]
    priority, class_name, class_source = resolve_priority(
        first, workload_priority_classes, priority_classes
    )
    labels = first.metadata.labels
    workload = Workload(
        metadata=ObjectMeta(
            name=group,
            namespace=first.metadata.namespace or "default",
            annotations={IS_GROUP_WORKLOAD: "true"},
            creation_timestamp=first.metadata.creation_timestamp,
            # Owned by every member, none its controller (Kueue's SetOwnerReference).
            owner_references=[
                {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid}
                for name, uid in members
            ],
        ),
        spec=WorkloadSpec(
            pod_sets=[
                PodSet(name=role.name, count=role.count, template=PodTemplateSpec(spec=pod.spec))
                for role, pod in roles
            ],
            queue_name=labels.get(QUEUE_NAME_LABEL, ""),
            priority=priority,
            priority_class_name=class_name,
            priority_class_source=class_source,
            maximum_execution_time_seconds=max_exec_seconds(labels),
        ),
    )
    return set_source(workload, source_of(first))
