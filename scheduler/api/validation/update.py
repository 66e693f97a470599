"""Immutability rules for updates (docs/scheduling.md#localqueue, #workload, #resourceflavor).

Used when a scenario `apply` event or an edited manifest replaces an existing object:
a violation rejects the update and the stored object stays as it was. Only the
transition rules live here; the new object itself is validated when decoded.
"""

from __future__ import annotations

from scheduler.api.admissioncheck import AdmissionCheck
from scheduler.api.base import TypedObject
from scheduler.api.conversion import v1beta2_path
from scheduler.api.conversion.workload import POD_PRIORITY_CLASS_SOURCE
from scheduler.api.errors import FieldError
from scheduler.api.flavor import ResourceFlavor
from scheduler.api.job import Job
from scheduler.api.localqueue import LocalQueue
from scheduler.api.source import wire_version
from scheduler.api.validation.job_update import validate_job_update
from scheduler.api.validation.paths import child, key
from scheduler.api.versions import KUEUE_V1BETA2
from scheduler.api.workload import Workload

IMMUTABLE = "field is immutable"


def _workload_update(old: Workload, new: Workload, reserved: bool | None) -> list[FieldError]:
    """Kueue v0.19.2's rules for a Workload that holds quota: its pod sets, queue name and
    maximum execution time are fixed; its priority class may not appear, go or change
    kind, and a pod PriorityClass's name is fixed, but a WorkloadPriorityClass may be
    changed, and the priority value with it (Kueue's running-workload priority change)."""
    held = old.has_quota_reservation if reserved is None else reserved
    if not held:
        return []
    pod_class_renamed = (
        new.spec.priority_class_source == POD_PRIORITY_CLASS_SOURCE
        and old.spec.priority_class_name != new.spec.priority_class_name
    )
    errors: list[FieldError] = []
    # Compared by value; pydantic equality covers the whole pod template.
    for path, before, after in (
        ("spec.podSets", old.spec.pod_sets, new.spec.pod_sets),
        ("spec.queueName", old.spec.queue_name, new.spec.queue_name),
        (
            "spec.maximumExecutionTimeSeconds",
            old.spec.maximum_execution_time_seconds,
            new.spec.maximum_execution_time_seconds,
        ),
        # Only a pod PriorityClass's name is fixed (a WorkloadPriorityClass may change).
        ("spec.priorityClassName", False, pod_class_renamed),
        (
            "spec.priorityClassSource",
            (bool(old.spec.priority_class_name), old.spec.priority_class_source),
            (bool(new.spec.priority_class_name), new.spec.priority_class_source),
        ),
    ):
        if before != after:
            errors.append(FieldError(path, IMMUTABLE))
    # A status rule: it applies only when both statuses say the quota is reserved.
    if old.has_quota_reservation and new.has_quota_reservation:
        errors += _reclaimable_update(old, new)
    return errors


def _reclaimable_update(old: Workload, new: Workload) -> list[FieldError]:
    path = "status.reclaimablePods"
    now = {item.name: item.count for item in new.status.reclaimable_pods}
    errors: list[FieldError] = []
    for item in old.status.reclaimable_pods:
        if item.name not in now:
            errors.append(FieldError(key(path, item.name), "Required value: cannot be removed"))
        elif now[item.name] < item.count:
            errors.append(
                FieldError(
                    child(key(path, item.name), "count"),
                    f"Invalid value: {now[item.name]}: cannot be less than {item.count}",
                )
            )
    return errors


def _admission_check_update(old: AdmissionCheck, new: AdmissionCheck) -> list[FieldError]:
    before = old.spec.controller_name if old.spec is not None else None
    after = new.spec.controller_name if new.spec is not None else None
    if before is not None and before != after:
        return [FieldError("spec.controllerName", IMMUTABLE)]
    return []


def validate_update(
    old: TypedObject,
    new: TypedObject,
    *,
    reserved: bool | None = None,
    default_queue_exists: bool = False,
) -> list[FieldError]:
    """Immutability violations of replacing `old` by `new` (same kind and name), named
    as in the version `new` was written in (docs/api-versions.md).

    `reserved` says whether the Workload holds quota when the caller knows it better than
    `old`'s status: the runtime and the simulator keep reservations in the core, not in
    the applied manifest. None reads it from `old`'s QuotaReserved condition.
    `default_queue_exists` says whether a Job's namespace has a LocalQueue named
    `default` (docs/cluster.md#admission-webhooks).
    """
    if isinstance(old, Job) and isinstance(new, Job):
        return validate_job_update(old, new, default_queue_exists=default_queue_exists)
    errors = _update_errors(old, new, reserved)
    if wire_version(new) == KUEUE_V1BETA2:
        return [FieldError(v1beta2_path(e.path), e.detail) for e in errors]
    return errors


def _update_errors(old: TypedObject, new: TypedObject, reserved: bool | None) -> list[FieldError]:
    if isinstance(old, LocalQueue) and isinstance(new, LocalQueue):
        if old.spec.cluster_queue != new.spec.cluster_queue:
            return [FieldError("spec.clusterQueue", IMMUTABLE)]
        return []
    if isinstance(old, Workload) and isinstance(new, Workload):
        return _workload_update(old, new, reserved)
    if isinstance(old, AdmissionCheck) and isinstance(new, AdmissionCheck):
        return _admission_check_update(old, new)
    if (
        isinstance(old, ResourceFlavor)
        and isinstance(new, ResourceFlavor)
        and old.spec.topology_name is not None
        and old.spec != new.spec
    ):
        return [FieldError("spec", "resourceFlavorSpec are immutable when topologyName is set")]
    return []
