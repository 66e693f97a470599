"""Rules of the fields only `kueue.x-k8s.io/v1beta2` has (docs/api-versions.md).

Everything both versions share is checked once, on the internal form, after
conversion; these are the rules the internal form cannot see.
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.api.errors import FieldError
from scheduler.api.v1beta2 import (
    ClusterQueueV1Beta2,
    PriorityClassRef,
    WorkloadPriorityClassV1Beta2,
    WorkloadV1Beta2,
)
from scheduler.api.validation.common import at_most, duplicate, invalid, subdomain
from scheduler.api.validation.paths import child, index

MAX_PREEMPTION_GATES = 8
MAX_DESCRIPTION = 2048  # WorkloadPriorityClass.description, v1beta2 only
MAX_SLICE_CONSTRAINTS = 3
MAX_GATE_NAME = 63

# The (group, kind) pairs a priorityClassRef may name, with Kueue's message for the other.
_REF_RULES = (
    (
        "scheduling.k8s.io",
        "PriorityClass",
        "only the PriorityClass kind is allowed for the scheduling.k8s.io group",
    ),
    (
        "kueue.x-k8s.io",
        "WorkloadPriorityClass",
        "only the WorkloadPriorityClass kind is allowed for the kueue.x-k8s.io group",
    ),
)


def validate_v1beta2(obj: object) -> list[FieldError]:
    if isinstance(obj, ClusterQueueV1Beta2):
        return _cluster_queue(obj)
    if isinstance(obj, WorkloadV1Beta2):
        return _workload(obj)
    if isinstance(obj, WorkloadPriorityClassV1Beta2) and len(obj.description) > MAX_DESCRIPTION:
        return [too_long("description", MAX_DESCRIPTION)]
    return []


def _cluster_queue(cq: ClusterQueueV1Beta2) -> list[FieldError]:
    policy = cq.spec.concurrent_admission_policy
    constraints = policy.migration.constraints if policy is not None else None
    if constraints is None or constraints.last_acceptable_flavor_name is None:
        return []
    return subdomain(
        "spec.concurrentAdmissionPolicy.migration.constraints.lastAcceptableFlavorName",
        constraints.last_acceptable_flavor_name,
    )


def _workload(workload: WorkloadV1Beta2) -> list[FieldError]:
    spec = workload.spec
    errors: list[FieldError] = []
    if spec.priority_class_ref is not None:
        errors += _priority_class_ref("spec.priorityClassRef", spec.priority_class_ref)
        if spec.priority is None:
            errors.append(
                FieldError("spec", "priority should not be nil when priorityClassRef is set")
            )
    for i, pod_set in enumerate(spec.pod_sets):
        constraints = (pod_set.topology_request or {}).get("podsetSliceRequiredTopologyConstraints")
        if isinstance(constraints, list):
            path = f"spec.podSets[{i}].topologyRequest.podsetSliceRequiredTopologyConstraints"
            errors += at_most(path, constraints, MAX_SLICE_CONSTRAINTS)
    errors += _gates("spec.preemptionGates", [g.name for g in spec.preemption_gates])
    errors += _gates("status.preemptionGates", [g.name for g in workload.status.preemption_gates])
    return errors


def _priority_class_ref(path: str, ref: PriorityClassRef) -> list[FieldError]:
    errors: list[FieldError] = []
    for group, kind, message in _REF_RULES:
        if ref.group == group and ref.kind != kind:
            errors.append(FieldError(path, message))
    if not ref.name:
        errors.append(FieldError(child(path, "name"), "Required value"))
    else:
        errors += subdomain(child(path, "name"), ref.name)
    return errors


def _gates(path: str, names: Sequence[str]) -> list[FieldError]:
    errors = at_most(path, names, MAX_PREEMPTION_GATES)
    seen: set[str] = set()
    for i, name in enumerate(names):
        here = child(index(path, i), "name")
        if not 1 <= len(name) <= MAX_GATE_NAME:
            errors.append(invalid(here, name, f"must be 1 to {MAX_GATE_NAME} characters long"))
        if name in seen:
            errors.append(duplicate(here, name))
        seen.add(name)
    return errors


def too_long(path: str, limit: int) -> FieldError:
    return FieldError(path, f"Too long: may not be more than {limit} bytes")
