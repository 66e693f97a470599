"""Workload rules (docs/scheduling.md#workload): Kueue's webhook plus our int64 and request
rules."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.api.base import INT64_MAX
from scheduler.api.errors import FieldError
from scheduler.api.pod import Container, PodSpec
from scheduler.api.quantity import QuantityError, format_resource, scheduler_value
from scheduler.api.requests import pod_requests
from scheduler.api.validation.admissioncheck import validate_check_states
from scheduler.api.validation.common import (
    at_least,
    at_most,
    duplicate,
    invalid,
    item_count,
    label,
    not_found,
    resource_list,
    subdomain,
)
from scheduler.api.validation.meta import validate_conditions
from scheduler.api.validation.paths import child, index, key
from scheduler.api.workload import PodSet, Workload

MAX_POD_SETS = 8
MAX_RECLAIMABLE_PODS = 8
RESERVED_RESOURCE = "pods"


def _validate_containers(path: str, containers: Sequence[Container]) -> list[FieldError]:
    errors: list[FieldError] = []
    for i, container in enumerate(containers):
        resources_path = child(index(path, i), "resources")
        for field, values in (
            ("requests", container.resources.requests),
            ("limits", container.resources.limits),
        ):
            list_path = child(resources_path, field)
            errors += resource_list(list_path, values)
            if RESERVED_RESOURCE in values:
                errors.append(
                    invalid(
                        key(list_path, RESERVED_RESOURCE),
                        RESERVED_RESOURCE,
                        "the key is reserved for internal kueue use",
                    )
                )
    return errors


def validate_pod_spec(path: str, spec: PodSpec) -> list[FieldError]:
    errors = _validate_containers(child(path, "initContainers"), spec.init_containers)
    errors += _validate_containers(child(path, "containers"), spec.containers)
    errors += resource_list(child(path, "overhead"), spec.overhead)
    return errors


def _total_request_errors(path: str, pod_set: PodSet) -> list[FieldError]:
    """Per-pod requests times count must stay int64 (docs/scheduling.md#quantities), checked once
    the parts are valid."""
    try:
        per_pod = pod_requests(pod_set.template.spec, ())
    except QuantityError:
        return []  # already reported on the container
    errors: list[FieldError] = []
    for resource, value in per_pod.items():
        if abs(value) * max(pod_set.count, 1) > INT64_MAX:
            errors.append(
                FieldError(
                    path,
                    f"total {resource} request ({format_resource(resource, value)} per pod x "
                    f"{pod_set.count}) does not fit in a signed 64-bit integer",
                )
            )
    return errors


def _validate_pod_sets(workload: Workload) -> list[FieldError]:
    path = "spec.podSets"
    pod_sets = workload.spec.pod_sets
    errors = item_count(path, pod_sets, 1, MAX_POD_SETS)
    names: set[str] = set()
    with_min_count = 0
    for i, pod_set in enumerate(pod_sets):
        here = index(path, i)
        errors += label(child(here, "name"), pod_set.name)
        if pod_set.name in names:
            errors.append(duplicate(child(here, "name"), pod_set.name))
        names.add(pod_set.name)
        errors += at_least(child(here, "count"), pod_set.count, 0)
        if pod_set.min_count is not None:
            with_min_count += 1
            if not 1 <= pod_set.min_count <= pod_set.count:
                errors.append(
                    invalid(
                        child(here, "minCount"),
                        pod_set.min_count,
                        f"must be greater than or equal to 1 and less than or equal to "
                        f"count ({pod_set.count})",
                    )
                )
        spec_errors = validate_pod_spec(child(here, "template.spec"), pod_set.template.spec)
        errors += spec_errors
        if not spec_errors:
            errors += _total_request_errors(here, pod_set)
    if with_min_count > 1:
        errors.append(FieldError(path, "at most one podSet can use minCount"))
    return errors


def _validate_admission(workload: Workload) -> list[FieldError]:
    admission = workload.status.admission
    path = "status.admission"
    if admission is None:
        return [FieldError(path, "Required value: must be set when QuotaReserved is True")]
    errors = subdomain(child(path, "clusterQueue"), admission.cluster_queue)
    assignments_path = child(path, "podSetAssignments")
    if len(admission.pod_set_assignments) != len(workload.spec.pod_sets):
        errors.append(
            FieldError(assignments_path, "must have the same number of podSets as the spec")
        )
    for i, assignment in enumerate(admission.pod_set_assignments):
        here = index(assignments_path, i)
        pod_set = workload.pod_set(assignment.name)
        if pod_set is None:
            errors.append(not_found(child(here, "name"), assignment.name))
        usage_path = child(here, "resourceUsage")
        usage_errors = resource_list(usage_path, assignment.resource_usage)
        errors += usage_errors
        count = (
            assignment.count if assignment.count is not None else (pod_set.count if pod_set else 0)
        )
        errors += at_least(child(here, "count"), assignment.count, 0)
        if count > 0 and not usage_errors:
            for resource, value in assignment.resource_usage.items():
                if scheduler_value(resource, value) % count:
                    errors.append(
                        invalid(
                            key(usage_path, resource), str(value), f"is not a multiple of {count}"
                        )
                    )
        for resource, flavor in assignment.flavors.items():
            errors += subdomain(key(child(here, "flavors"), resource), flavor)
    return errors


def _validate_reclaimable_pods(workload: Workload) -> list[FieldError]:
    path = "status.reclaimablePods"
    reclaimable = workload.status.reclaimable_pods
    errors = at_most(path, reclaimable, MAX_RECLAIMABLE_PODS)
    for i, item in enumerate(reclaimable):
        here = index(path, i)
        pod_set = workload.pod_set(item.name)
        if pod_set is None:
            errors.append(not_found(child(here, "name"), item.name))
            continue
        errors += at_least(child(here, "count"), item.count, 0)
        if item.count > pod_set.count:
            errors.append(
                invalid(
                    child(here, "count"), item.count, f"should be less or equal to {pod_set.count}"
                )
            )
    return errors


def validate_workload(workload: Workload) -> list[FieldError]:
    spec = workload.spec
    errors = _validate_pod_sets(workload)
    if spec.queue_name:
        errors += subdomain("spec.queueName", spec.queue_name)
    if spec.priority_class_name:
        errors += subdomain("spec.priorityClassName", spec.priority_class_name)
        if spec.priority is None:
            errors.append(
                FieldError(
                    "spec.priority", "priority should not be nil when priorityClassName is set"
                )
            )
    errors += at_least("spec.maximumExecutionTimeSeconds", spec.maximum_execution_time_seconds, 1)
    if workload.has_quota_reservation:
        errors += _validate_admission(workload)
    errors += validate_conditions("status.conditions", workload.status.conditions)
    errors += _validate_reclaimable_pods(workload)
    errors += validate_check_states("status.admissionChecks", workload.status.admission_checks)
    requeue = workload.status.requeue_state
    if requeue is not None:
        errors += at_least("status.requeueState.count", requeue.count, 0)
    return errors
