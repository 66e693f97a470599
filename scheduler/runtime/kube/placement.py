"""Where an admitted Workload's pods go: the node labels and tolerations of its
assigned flavors, and its admission checks' pod set updates merged over the pod
template (docs/scheduling.md#admission-checks). Both integrations (batch/v1 Jobs, plain
Pods) start their pods with these."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from scheduler.api.names import dns1123_label
from scheduler.kubeapi.errors import Json
from scheduler.runtime.kube.records import WorkloadRecord
from scheduler.runtime.kube.resources import RESOURCE_FLAVORS
from scheduler.runtime.kube.store import KubeStore

POD_SET_LABEL: Final = "kueue.x-k8s.io/podset"
LOCAL_QUEUE_LABEL: Final = "kueue.x-k8s.io/local-queue-name"
CLUSTER_QUEUE_LABEL: Final = "kueue.x-k8s.io/cluster-queue-name"


def admission_labels(pod_set: str, local_queue: str, workload: WorkloadRecord) -> dict[str, str]:
    """The labels Kueue v0.19 puts on an admitted workload's pods (its
    AssignQueueLabelsForPods, on by default): the pod set's name, the LocalQueue and the
    ClusterQueue that admitted it (the latter only if it is a valid label value), for
    whoever sums the pods' usage by queue. A stopped job's template loses them again."""
    labels = {POD_SET_LABEL: pod_set}
    if local_queue:
        labels[LOCAL_QUEUE_LABEL] = local_queue
    cluster_queue = str(((workload.status or {}).get("admission") or {}).get("clusterQueue", ""))
    if cluster_queue and not dns1123_label(cluster_queue):
        labels[CLUSTER_QUEUE_LABEL] = cluster_queue
    return labels


def flavor_placement(
    store: KubeStore, workload: WorkloadRecord, pod_set: str
) -> tuple[dict[str, str], list[Json]]:
    """Node labels and tolerations of every flavor assigned to the Workload's pod set
    `pod_set` (a pod group's roles may get different flavors)."""
    labels: dict[str, str] = {}
    tolerations: list[Json] = []
    for assignment in (workload.status or {}).get("admission", {}).get("podSetAssignments", []):
        if assignment.get("name") != pod_set:
            continue
        for flavor in sorted(set((assignment.get("flavors") or {}).values())):
            rf = store.get(RESOURCE_FLAVORS, flavor) or {}
            spec = rf.get("spec") or {}
            labels.update(spec.get("nodeLabels") or {})
            for t in spec.get("tolerations") or []:
                if t not in tolerations:
                    tolerations.append(t)
    return labels, tolerations


@dataclass(slots=True)
class CheckUpdates:
    """What the admission checks of a Workload ask its pods to get (their
    `podSetUpdates` for the Job's pod set), merged."""

    labels: dict[str, str]
    annotations: dict[str, str]
    node_selector: dict[str, str]
    tolerations: list[Json]


class UpdateConflictError(Exception):
    """A check's pod set update sets a key the template already sets differently."""


def _merge_key(into: dict[str, str], field: str, key: str, value: str, check: str) -> None:
    if into.get(key, value) != value:
        raise UpdateConflictError(
            f'admission check "{check}" sets {field}[{key}] to "{value}", '
            f'the pod template has "{into[key]}"'
        )
    into[key] = value


def check_updates(pod_set: str, check_states: Sequence[Json], base: CheckUpdates) -> CheckUpdates:
    """`base` (the template's labels, annotations, node selector and tolerations) with
    every admission check's `podSetUpdates` for pod set `pod_set` (a Job has one) merged
    in, in check order: a key set to another value than the template's (or another
    check's) is a conflict (UpdateConflictError), as in Kueue."""
    merged = CheckUpdates(
        labels=dict(base.labels),
        annotations=dict(base.annotations),
        node_selector=dict(base.node_selector),
        tolerations=list(base.tolerations),
    )
    for check in check_states:
        for update in check.get("podSetUpdates") or []:
            if update.get("name") != pod_set:
                continue
            for field, into in (
                ("labels", merged.labels),
                ("annotations", merged.annotations),
                ("nodeSelector", merged.node_selector),
            ):
                for key, value in (update.get(field) or {}).items():
                    _merge_key(into, field, key, value, str(check.get("name", "")))
            for toleration in update.get("tolerations") or []:
                if toleration not in merged.tolerations:
                    merged.tolerations.append(toleration)
    return merged


def started_placement(
    store: KubeStore, workload: WorkloadRecord, pod_set: str, queue: str, template: CheckUpdates
) -> CheckUpdates:
    """What an admitted Workload's pods of pod set `pod_set` start with, over their
    `template` (labels, annotations, node selector, tolerations): Kueue's admission
    labels, the assigned flavors' node labels and tolerations, then the admission
    checks' updates. Both integrations start their pods with it; a check update that
    contradicts the template raises UpdateConflictError."""
    flavor_labels, flavor_tolerations = flavor_placement(store, workload, pod_set)
    placed = CheckUpdates(
        labels={**template.labels, **admission_labels(pod_set, queue, workload)},
        annotations=template.annotations,
        node_selector={**template.node_selector, **flavor_labels},
        tolerations=template.tolerations
        + [t for t in flavor_tolerations if t not in template.tolerations],
    )
    return check_updates(pod_set, workload.check_states, placed)


def map_patch(current: dict[str, str], wanted: dict[str, str]) -> dict[str, str | None]:
    """A merge patch turning map `current` into `wanted` (keys to drop set to null)."""
    patch: dict[str, str | None] = {k: None for k in current if k not in wanted}
    patch.update({k: v for k, v in wanted.items() if current.get(k) != v})
    return patch
