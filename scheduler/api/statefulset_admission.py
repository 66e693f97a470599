"""What the admission webhooks do to an apps/v1 StatefulSet when the `statefulset`
integration is on (docs/cluster.md#statefulsets). Pure, on the raw object.

The marks are every pod-suspending parent's (`scheduler.api.parent_admission`): the pod
template of a StatefulSet that names a LocalQueue carries the queue, the managed label
and `kueue.x-k8s.io/pod-suspending-parent: statefulset`. Unlike a Deployment's, a
StatefulSet's Pods are one pod group, one Workload, so Kueue v0.19.2 adds rules while
the StatefulSet is managed: its pod template's role shape is fixed, and its replicas
may only go to 0 and back, and back only once the previous Pods and Workload are gone.

A StatefulSet whose template another integration marked (a LeaderWorkerSet's) is that
integration's: no marks, no rules, as in Kueue.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from scheduler.api import raw_object as raw
from scheduler.api.errors import FieldError
from scheduler.api.integrations import STATEFULSET_FRAMEWORK
from scheduler.api.parent_admission import (
    PodParent,
    label_update_errors,
    managed_by_another,
    names_queue,
    queue_name_errors,
)
from scheduler.api.validation.common import invalid
from scheduler.api.validation.pod_shape import pod_spec_shape_errors
from scheduler.api.validation.queue_labels import IMMUTABLE
from scheduler.api.workload_names import workload_name

STATEFULSET: Final = PodParent(
    "apps/v1", "StatefulSet", STATEFULSET_FRAMEWORK, yields_to_other_parents=True
)
REPLICAS_PATH: Final = "spec.replicas"
POD_SPEC_PATH: Final = "spec.template.spec"
SCALING_DOWN: Final = "Forbidden: scaling down is still in progress"
WORKLOAD_LEFT: Final = "Forbidden: workload from previous scale-down is still being deleted"

# (namespace, Workload name) -> the Workload exists and is not on hold.
WorkloadInUse = Callable[[str, str], bool]


def statefulset_errors(statefulset: Mapping[str, Any]) -> list[FieldError]:
    """Kueue's rules for a StatefulSet being created."""
    if managed_by_another(statefulset, STATEFULSET):
        return []
    return queue_name_errors(statefulset)


def statefulset_update_errors(
    old: Mapping[str, Any], new: Mapping[str, Any], workload_in_use: WorkloadInUse
) -> list[FieldError]:
    """Kueue's rules for replacing StatefulSet `old` by `new`; `workload_in_use` is
    asked only when `new` scales up from zero with no Pod left."""
    if managed_by_another(new, STATEFULSET):
        return []
    errors = label_update_errors(old, new)
    if not names_queue(new):
        return errors  # not managed after the change: only the label rules hold
    errors += pod_spec_shape_errors(_pod_spec(old), _pod_spec(new), POD_SPEC_PATH)
    return errors + _replicas_errors(old, new, workload_in_use)


def _replicas_errors(
    old: Mapping[str, Any], new: Mapping[str, Any], workload_in_use: WorkloadInUse
) -> list[FieldError]:
    """Kueue resizes a StatefulSet's Workload only to and from zero: scaling down to 0
    ends it, scaling up from 0 makes a new one, once the old Pods and Workload are gone."""
    before, after = replicas(old), replicas(new)
    if before != 0 and after != 0:
        return [] if before == after else [invalid(REPLICAS_PATH, after, IMMUTABLE)]
    if before != 0 or after == 0:
        return []
    if raw.mapping(new.get("status")).get("replicas"):
        return [FieldError(REPLICAS_PATH, SCALING_DOWN)]
    metadata = raw.metadata_of(old)
    owner, uid = str(metadata.get("name") or ""), str(metadata.get("uid") or "")
    name = workload_name(STATEFULSET.kind, STATEFULSET.group, owner, uid)
    if workload_in_use(str(metadata.get("namespace") or ""), name):
        return [FieldError(REPLICAS_PATH, WORKLOAD_LEFT)]
    return []


def replicas(statefulset: Mapping[str, Any]) -> int:
    """`spec.replicas`, 1 when absent (the API server's default)."""
    value = raw.mapping(statefulset.get("spec")).get("replicas")
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def _pod_spec(statefulset: Mapping[str, Any]) -> Mapping[str, Any]:
    template = raw.mapping(raw.mapping(statefulset.get("spec")).get("template"))
    return raw.mapping(template.get("spec"))
