"""Rules for replacing a batch/v1 Job that Kueue manages (docs/cluster.md#admission-webhooks),
and those of its labels a JobSet shares (docs/cluster.md#jobsets).

As Kueue's Job webhook: the queue-name label cannot change while the Job runs (is not
suspended), cannot be removed in a namespace that has a `default` LocalQueue (the
defaulting would otherwise be undone), a WorkloadPriorityClass label cannot be added to
a running Job nor removed at all, and with the partial-admission annotation a running
Job's parallelism is fixed.
"""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.api.errors import FieldError
from scheduler.api.job import (
    JOB_MIN_PARALLELISM_ANNOTATION,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    Job,
)
from scheduler.api.validation.common import invalid
from scheduler.api.validation.queue_labels import (
    QUEUE_NAME_PATH,
    max_exec_time_update_errors,
    priority_class_update_errors,
    queue_name_update_errors,
)


def queued_update_errors(
    old: Mapping[str, str],
    new: Mapping[str, str],
    *,
    suspended: tuple[bool, bool],
    default_queue_exists: bool,
) -> list[FieldError]:
    """The label rules every suspended kind (a Job, a JobSet) follows on an update, as
    Kueue's generic job webhook: `old` and `new` are the labels before and after,
    `suspended` whether it was and is suspended, `default_queue_exists` whether the
    namespace has a LocalQueue named `default`."""
    errors: list[FieldError] = []
    old_queue, new_queue = old.get(QUEUE_NAME_LABEL, ""), new.get(QUEUE_NAME_LABEL, "")
    was_suspended, is_suspended = suspended
    errors += queue_name_update_errors(old_queue, new_queue, fixed=not is_suspended)
    if not new_queue and old_queue and default_queue_exists:
        errors.append(
            invalid(
                QUEUE_NAME_PATH, "", "queue-name must not be empty in namespace with default queue"
            )
        )
    errors += priority_class_update_errors(
        old.get(PRIORITY_CLASS_LABEL, ""), new.get(PRIORITY_CLASS_LABEL, ""), suspended=is_suspended
    )
    errors += max_exec_time_update_errors(old, new, suspended=was_suspended and is_suspended)
    return errors


def validate_job_update(old: Job, new: Job, *, default_queue_exists: bool) -> list[FieldError]:
    """Violations of replacing `old` by `new`; `default_queue_exists` says whether the
    namespace has a LocalQueue named `default`."""
    errors = queued_update_errors(
        old.metadata.labels,
        new.metadata.labels,
        suspended=(old.spec.suspend, new.spec.suspend),
        default_queue_exists=default_queue_exists,
    )
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
