"""AdmissionCheck rules (docs/scheduling.md#admission-checks): Kueue's CRD limits, and the
per-Workload check states' limits."""

from __future__ import annotations

import re
from collections.abc import Sequence

from scheduler.api.admissioncheck import AdmissionCheck
from scheduler.api.errors import FieldError
from scheduler.api.validation.common import at_most, duplicate, invalid, required
from scheduler.api.validation.meta import validate_conditions
from scheduler.api.validation.paths import child, index
from scheduler.api.validation.v1beta2 import too_long
from scheduler.api.workload import AdmissionCheckState

MAX_CONTROLLER_NAME = 253
MAX_CONDITIONS = 16
MAX_WORKLOAD_CHECKS = 8
MAX_CHECK_NAME = 316
MAX_MESSAGE = 32768
MAX_POD_SET_UPDATES = 18

# (field, maximum length, pattern as the CRD publishes it)
_PARAMETER_RULES: tuple[tuple[str, int, str], ...] = (
    (
        "apiGroup",
        253,
        r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
    ),
    ("kind", 63, r"^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$"),
    ("name", 63, r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"),
)


def _matches(pattern: str, value: str) -> bool:
    flags = 0
    if pattern.startswith("^(?i)"):
        pattern, flags = "^" + pattern[5:], re.IGNORECASE
    return re.fullmatch(pattern, value, flags) is not None


def validate_admission_check(obj: AdmissionCheck) -> list[FieldError]:
    errors = validate_conditions("status.conditions", obj.status.conditions)
    errors += at_most("status.conditions", obj.status.conditions, MAX_CONDITIONS)
    spec = obj.spec
    if spec is None:
        return errors
    if not spec.controller_name:
        errors.append(required("spec.controllerName"))
    elif len(spec.controller_name) > MAX_CONTROLLER_NAME:
        errors.append(too_long("spec.controllerName", MAX_CONTROLLER_NAME))
    if spec.retry_delay_minutes is not None and spec.retry_delay_minutes < 0:
        errors.append(
            invalid("spec.retryDelayMinutes", spec.retry_delay_minutes, "must not be negative")
        )
    if spec.parameters is not None:
        values = {
            "apiGroup": spec.parameters.api_group,
            "kind": spec.parameters.kind,
            "name": spec.parameters.name,
        }
        for field, limit, pattern in _PARAMETER_RULES:
            path = child("spec.parameters", field)
            value = values[field]
            if not value:
                errors.append(required(path))
            elif len(value) > limit:
                errors.append(too_long(path, limit))
            elif not _matches(pattern, value):
                errors.append(invalid(path, value, f"{path} in body should match '{pattern}'"))
    return errors


def validate_check_states(path: str, states: Sequence[AdmissionCheckState]) -> list[FieldError]:
    """`Workload.status.admissionChecks`: a map keyed by name, at most 8 entries."""
    errors = at_most(path, states, MAX_WORKLOAD_CHECKS)
    seen: set[str] = set()
    for i, state in enumerate(states):
        here = index(path, i)
        if not state.name:
            errors.append(required(child(here, "name")))
        elif len(state.name) > MAX_CHECK_NAME:
            errors.append(too_long(child(here, "name"), MAX_CHECK_NAME))
        if state.name in seen:
            errors.append(duplicate(child(here, "name"), state.name))
        seen.add(state.name)
        if len(state.message) > MAX_MESSAGE:
            errors.append(too_long(child(here, "message"), MAX_MESSAGE))
        for field, value in (
            ("requeueAfterSeconds", state.requeue_after_seconds),
            ("retryCount", state.retry_count),
        ):
            if value is not None and value < 0:
                errors.append(
                    invalid(child(here, field), value, "must be greater than or equal to 0")
                )
        if state.pod_set_updates is not None:
            updates_path = child(here, "podSetUpdates")
            errors += at_most(updates_path, state.pod_set_updates, MAX_POD_SET_UPDATES)
    return errors
