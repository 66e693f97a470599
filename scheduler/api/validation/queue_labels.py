"""The rules every workload owner Kueue manages (a Job, a Pod, a Deployment) follows for
its `kueue.x-k8s.io/queue-name` and `kueue.x-k8s.io/priority-class` labels on an update
(docs/cluster.md#admission-webhooks), with Kueue's messages."""

from __future__ import annotations

from typing import Final

from scheduler.api.errors import FieldError
from scheduler.api.job import PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL
from scheduler.api.validation.common import invalid
from scheduler.api.validation.paths import key

IMMUTABLE: Final = "field is immutable"
QUEUE_NAME_PATH: Final = key("metadata.labels", QUEUE_NAME_LABEL)
PRIORITY_CLASS_PATH: Final = key("metadata.labels", PRIORITY_CLASS_LABEL)


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
