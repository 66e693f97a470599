"""Rules for replacing a batch/v1 Job that Kueue manages (docs/cluster.md#admission-webhooks).

As Kueue's Job webhook: the queue-name label cannot change while the Job runs (is not
suspended), cannot be removed in a namespace that has a `default` LocalQueue (the
defaulting would otherwise be undone), a WorkloadPriorityClass label cannot be added to
a running Job nor removed at all, and with the partial-admission annotation a running
Job's parallelism is fixed.
"""

from __future__ import annotations

from scheduler.api.errors import FieldError
from scheduler.api.job import (
    JOB_MIN_PARALLELISM_ANNOTATION,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    Job,
)
from scheduler.api.validation.common import invalid
from scheduler.api.validation.paths import key

IMMUTABLE = "field is immutable"
QUEUE_NAME_PATH = key("metadata.labels", QUEUE_NAME_LABEL)
PRIORITY_CLASS_PATH = key("metadata.labels", PRIORITY_CLASS_LABEL)


def validate_job_update(old: Job, new: Job, *, default_queue_exists: bool) -> list[FieldError]:
    """Violations of replacing `old` by `new`; `default_queue_exists` says whether the
    namespace has a LocalQueue named `default`."""
    errors: list[FieldError] = []
    old_queue = old.metadata.labels.get(QUEUE_NAME_LABEL, "")
    new_queue = new.metadata.labels.get(QUEUE_NAME_LABEL, "")
    if not new.spec.suspend and new_queue != old_queue:
        errors.append(invalid(QUEUE_NAME_PATH, new_queue, IMMUTABLE))
    if not new_queue and old_queue and default_queue_exists:
        errors.append(
            invalid(
                QUEUE_NAME_PATH, "", "queue-name must not be empty in namespace with default queue"
            )
        )
    errors += _priority_class_update(old, new)
    if (
        JOB_MIN_PARALLELISM_ANNOTATION in old.metadata.annotations
        and not old.spec.suspend
        and old.spec.parallelism != new.spec.parallelism
    ):
        errors.append(
            FieldError(
                "spec.parallelism",
                "Forbidden: cannot change when partial admission is enabled and the job is "
                "not suspended",
            )
        )
    return errors


def _priority_class_update(old: Job, new: Job) -> list[FieldError]:
    before = old.metadata.labels.get(PRIORITY_CLASS_LABEL, "")
    after = new.metadata.labels.get(PRIORITY_CLASS_LABEL, "")
    if not new.spec.suspend and not before and after:
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
