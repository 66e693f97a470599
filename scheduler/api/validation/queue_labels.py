"""The rules every workload owner Kueue manages (a Job, a Pod, a Deployment) follows for
its `kueue.x-k8s.io/queue-name` and `kueue.x-k8s.io/priority-class` labels on an update,
and a Job's or Pod's `kueue.x-k8s.io/max-exec-time-seconds`
(docs/cluster.md#admission-webhooks), with Kueue's messages."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from scheduler.api.errors import FieldError
from scheduler.api.job import MAX_EXEC_TIME_LABEL, PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL
from scheduler.api.validation.common import invalid, subdomain
from scheduler.api.validation.paths import key

IMMUTABLE: Final = "field is immutable"
QUEUE_NAME_PATH: Final = key("metadata.labels", QUEUE_NAME_LABEL)
PRIORITY_CLASS_PATH: Final = key("metadata.labels", PRIORITY_CLASS_LABEL)
MAX_EXEC_TIME_PATH: Final = key("metadata.labels", MAX_EXEC_TIME_LABEL)
GO_INTEGER: Final = re.compile(r"[+-]?[0-9]+")  # what strconv.Atoi parses


def queue_name_update_errors(before: str, after: str, *, fixed: bool) -> list[FieldError]:
    """A queue name that may not change now (`fixed`: the workload runs) changed."""
    return [invalid(QUEUE_NAME_PATH, after, IMMUTABLE)] if fixed and after != before else []


def priority_class_update_errors(before: str, after: str, *, suspended: bool) -> list[FieldError]:
    """A WorkloadPriorityClass label cannot be added to a running workload, nor removed."""
    if not suspended and not before and after:
        return [
            invalid(
                PRIORITY_CLASS_PATH,
                after,
                "WorkloadPriorityClass cannot be added to a non-suspended workload",
            )
        ]
    if before and not after:
        return [
            invalid(
                PRIORITY_CLASS_PATH, "", "WorkloadPriorityClass cannot be removed from a workload"
            )
        ]
    return []


def queued_label_errors(labels: Mapping[str, str]) -> list[FieldError]:
    """The queue-name and priority-class labels, when set, are DNS subdomains, and the
    maximum execution time a whole number above 0 (a Job's and a JobSet's rules)."""
    errors: list[FieldError] = []
    for label_name in (QUEUE_NAME_LABEL, PRIORITY_CLASS_LABEL):
        if labels.get(label_name):
            errors += subdomain(key("metadata.labels", label_name), labels[label_name])
    return errors + max_exec_time_errors(labels)


def max_exec_time_errors(labels: Mapping[str, str]) -> list[FieldError]:
    """The maximum execution time label, when set, is a whole number above 0 (Kueue
    parses it as Go's strconv.Atoi does, and says what that says)."""
    raw = labels.get(MAX_EXEC_TIME_LABEL)
    if raw is None:
        return []
    if not GO_INTEGER.fullmatch(raw):
        return [invalid(MAX_EXEC_TIME_PATH, raw, f'strconv.Atoi: parsing "{raw}": invalid syntax')]
    value = int(raw)
    if not -(2**63) <= value < 2**63:
        detail = f'strconv.Atoi: parsing "{raw}": value out of range'
        return [invalid(MAX_EXEC_TIME_PATH, raw, detail)]
    if value <= 0:
        return [invalid(MAX_EXEC_TIME_PATH, value, "should be greater than 0")]
    return []


def max_exec_time_update_errors(
    before: Mapping[str, str], after: Mapping[str, str], *, suspended: bool
) -> list[FieldError]:
    """The label changes only while the job is suspended before and after the update."""
    old, new = before.get(MAX_EXEC_TIME_LABEL, ""), after.get(MAX_EXEC_TIME_LABEL, "")
    return [] if suspended or old == new else [invalid(MAX_EXEC_TIME_PATH, new, IMMUTABLE)]
