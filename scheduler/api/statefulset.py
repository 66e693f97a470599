"""apps/v1 StatefulSet, as Kueue's `statefulset` integration reads it, and the Workload
it makes of one (docs/cluster.md#statefulsets).

A StatefulSet that names a LocalQueue is one workload of `spec.replicas` Pods, admitted
all or none: a *prebuilt* pod group Workload, made from the StatefulSet before any of its
Pods exists, named by Kueue's rule (`statefulset-<name>-<5 hex digits>`), with one pod
set `main` whose template is the StatefulSet's pod spec, owned (not controlled) by the
StatefulSet. Its Pods join that group: they are marked with the Workload's name as
their group and prebuilt Workload, the replica count as the group's size, and the
serving and fast-admission flags (a serving group never finishes; a fast one is queued
before all its Pods exist: a StatefulSet creates its Pods one by one). The model itself
is `scheduler.api.statefulset_model`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from scheduler.api import raw_object as raw
from scheduler.api.integrations import STATEFULSET_FRAMEWORK
from scheduler.api.job import QUEUE_NAME_LABEL
from scheduler.api.job_workload import owner_uid, owner_workload
from scheduler.api.plain_pod import POD_GROUP_NAME, POD_GROUP_TOTAL_COUNT, SUSPENDING_PARENT
from scheduler.api.pod import PodTemplateSpec
from scheduler.api.pod_group import FAST_ADMISSION, IS_GROUP_WORKLOAD, PREBUILT_WORKLOAD, SERVING
from scheduler.api.priority import PriorityClass, WorkloadPriorityClass
from scheduler.api.role_hash import ROLE_HASH_ANNOTATION
from scheduler.api.statefulset_model import StatefulSet
from scheduler.api.workload import PodSet, Workload
from scheduler.api.workload_names import workload_name

# The model is re-exported: cluster mode reads it from here (runtime/kube/statefulsets.py).
__all__ = [
    "JOB_OWNER_GVK",
    "JOB_OWNER_NAME",
    "MAIN",
    "POD_INDEX_LABEL",
    "POD_INDEX_LABEL_ANNOTATION",
    "StatefulSet",
    "controlling_statefulset",
    "is_managed",
    "pod_marks",
    "replicas",
    "statefulset_workload",
    "statefulset_workload_name",
]

JOB_OWNER_GVK: Final = "kueue.x-k8s.io/job-owner-gvk"
JOB_OWNER_NAME: Final = "kueue.x-k8s.io/job-owner-name"
# Kueue's QuotaReserved=False message of a held Workload (docs/cluster.md#statefulsets).
SCALED_TO_ZERO: Final = "StatefulSet scaled to zero; workload on hold"
POD_INDEX_LABEL_ANNOTATION: Final = "kueue.x-k8s.io/pod-group-pod-index-label"
POD_INDEX_LABEL: Final = "apps.kubernetes.io/pod-index"
# The only role of a StatefulSet's group (its Pods are alike).
MAIN: Final = "main"


def statefulset_workload_name(name: str, uid: str) -> str:
    return workload_name("StatefulSet", "apps", name, uid)


def replicas(sts: Mapping[str, Any]) -> int:
    """`spec.replicas` of a raw StatefulSet (1 when unset, as kube-apiserver defaults)."""
    value = raw.mapping(sts.get("spec")).get("replicas")
    return 1 if value is None else int(value)


def is_managed(sts: Mapping[str, Any]) -> bool:
    """Does the raw StatefulSet name a LocalQueue, its template marked by our webhook?
    (One created before the integration was on runs unqueued: its Pods were never held.)"""
    template = raw.mapping(raw.mapping(sts.get("spec")).get("template"))
    marked = raw.annotations_of(template).get(SUSPENDING_PARENT) == STATEFULSET_FRAMEWORK
    return marked and bool(raw.labels_of(sts).get(QUEUE_NAME_LABEL))


def statefulset_workload(
    sts: StatefulSet,
    workload_priority_classes: Mapping[str, WorkloadPriorityClass],
    priority_classes: Mapping[str, PriorityClass],
) -> Workload:
    """The prebuilt group Workload, as Kueue's StatefulSet reconciler creates it (a
    manifest without a uid gets the deterministic one Jobs get, so that offline the
    name is reproducible). ApiError when the StatefulSet names a priority class that
    does not exist."""
    pod_set = PodSet(
        name=MAIN, count=sts.spec.replicas, template=PodTemplateSpec(spec=sts.spec.template.spec)
    )
    meta = sts.metadata
    return owner_workload(
        sts,
        owner_uid(sts),
        [pod_set],
        workload_priority_classes,
        priority_classes,
        annotations={
            IS_GROUP_WORKLOAD: "true",
            JOB_OWNER_GVK: "apps/v1, Kind=StatefulSet",
            JOB_OWNER_NAME: meta.name,
        },
        controller=False,
    )


def pod_marks(sts: Mapping[str, Any], pod: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """What a Pod of the raw StatefulSet `sts` must carry to join its group, and that it
    does not yet: `{"labels": ..., "annotations": ...}` (empty: nothing to change). Kueue's
    StatefulSet Pod reconciler writes them; the Pod's queue name follows the
    StatefulSet's."""
    meta = raw.metadata_of(sts)
    name = statefulset_workload_name(str(meta.get("name", "")), str(meta.get("uid", "")))
    labels = {QUEUE_NAME_LABEL: str(raw.labels_of(sts).get(QUEUE_NAME_LABEL) or "")}
    annotations = {
        PREBUILT_WORKLOAD: name,
        POD_GROUP_NAME: name,
        POD_GROUP_TOTAL_COUNT: str(replicas(sts)),
        FAST_ADMISSION: "true",
        SERVING: "true",
        POD_INDEX_LABEL_ANNOTATION: POD_INDEX_LABEL,
        ROLE_HASH_ANNOTATION: MAIN,
    }
    if raw.annotations_of(pod).get(POD_GROUP_NAME) == name:
        annotations = {}  # joined already: only the queue name follows
    have_labels, have_annotations = raw.labels_of(pod), raw.annotations_of(pod)
    marks = {
        "labels": {k: v for k, v in labels.items() if v and have_labels.get(k) != v},
        "annotations": {k: v for k, v in annotations.items() if have_annotations.get(k) != v},
    }
    return {k: v for k, v in marks.items() if v}


def controlling_statefulset(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """(name, uid) of the StatefulSet that controls the raw Pod, None for none."""
    ref = raw.controller_of(pod)
    if ref is None or (ref.get("apiVersion"), ref.get("kind")) != ("apps/v1", "StatefulSet"):
        return None
    return str(ref.get("name", "")), str(ref.get("uid", ""))
