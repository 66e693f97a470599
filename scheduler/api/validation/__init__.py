"""Semantic validation of decoded objects: Kueue's webhook and CRD rules
(docs/scheduling.md#api-objects).

Type, enum and unknown-field errors are found while decoding (pydantic); the rules
here need a whole object. Each function returns every problem as a FieldError with
its JSON path; an empty list means the object is valid.
"""

from __future__ import annotations

from collections.abc import Callable
from types import UnionType
from typing import Any

from scheduler.api.admissioncheck import AdmissionCheck
from scheduler.api.base import TypedObject
from scheduler.api.clusterqueue import ClusterQueue
from scheduler.api.cohort import Cohort
from scheduler.api.config import Configuration
from scheduler.api.errors import FieldError
from scheduler.api.flavor import ResourceFlavor
from scheduler.api.job import Job
from scheduler.api.jobset_model import JobSet
from scheduler.api.localqueue import LocalQueue
from scheduler.api.meta import KubeObject
from scheduler.api.names import dns1123_label, dns1123_subdomain
from scheduler.api.namespace import Namespace
from scheduler.api.plain_pod import Pod
from scheduler.api.priority import PriorityClass
from scheduler.api.rbac import ClusterRole, ClusterRoleBinding, Role, RoleBinding
from scheduler.api.scenario import Scenario
from scheduler.api.statefulset_model import StatefulSet
from scheduler.api.validation.admissioncheck import validate_admission_check
from scheduler.api.validation.common import NameValidator
from scheduler.api.validation.config import validate_configuration
from scheduler.api.validation.flavor import validate_resource_flavor
from scheduler.api.validation.jobset import validate_jobset
from scheduler.api.validation.meta import path_segment_name, validate_metadata
from scheduler.api.validation.misc import (
    validate_binding,
    validate_job,
    validate_plain_pod,
    validate_priority_class,
    validate_role,
    validate_scenario,
)
from scheduler.api.validation.queues import (
    validate_cluster_queue,
    validate_cohort,
    validate_local_queue,
)
from scheduler.api.validation.statefulset import validate_statefulset
from scheduler.api.validation.update import validate_update
from scheduler.api.validation.workload import validate_workload
from scheduler.api.workload import Workload

__all__ = ["validate_object", "validate_update"]


def _name_validator(obj: KubeObject) -> NameValidator:
    if isinstance(obj, Namespace):
        return dns1123_label
    if isinstance(obj, Role | ClusterRole | RoleBinding | ClusterRoleBinding):
        return path_segment_name
    return dns1123_subdomain


# The kind's own rules, by type; the first entry that matches decides.
_SPEC_RULES: tuple[tuple[type | UnionType, Callable[[Any], list[FieldError]]], ...] = (
    (ResourceFlavor, validate_resource_flavor),
    (ClusterQueue, validate_cluster_queue),
    (Cohort, validate_cohort),
    (LocalQueue, validate_local_queue),
    (Workload, validate_workload),
    (AdmissionCheck, validate_admission_check),
    (PriorityClass, validate_priority_class),
    (Job, validate_job),
    (Pod, validate_plain_pod),
    (StatefulSet, validate_statefulset),
    (JobSet, validate_jobset),
    (Configuration, validate_configuration),
    (Scenario, validate_scenario),
    (Role | ClusterRole, validate_role),
    (RoleBinding | ClusterRoleBinding, validate_binding),
)


def _spec_errors(obj: TypedObject) -> list[FieldError]:
    for kinds, rules in _SPEC_RULES:
        if isinstance(obj, kinds):
            return rules(obj)
    return []


def validate_object(obj: TypedObject) -> list[FieldError]:
    """Every rule of docs/scheduling.md#api-objects that `obj` breaks (metadata first, then the
    kind's own rules)."""
    errors: list[FieldError] = []
    if isinstance(obj, KubeObject):
        errors += validate_metadata(obj, _name_validator(obj))
    errors += _spec_errors(obj)
    return errors
