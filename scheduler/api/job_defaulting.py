"""What admission does to a new batch/v1 Job (docs/cluster.md#admission-webhooks).

A Job that names a LocalQueue (label `kueue.x-k8s.io/queue-name`) is stored suspended, so
no pod starts before queuescope admits it. A Job that names none (no label, or an empty
one) gets the queue `default` when its namespace has a LocalQueue of that name (Kueue's
LocalQueue defaulting, always on in Kueue v0.19.2, where its feature gate no longer
exists), and is then suspended too.

Pure: the caller says whether the namespace's `default` LocalQueue exists.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from scheduler.api.job import QUEUE_NAME_LABEL

DEFAULT_LOCAL_QUEUE: Final = "default"


@dataclass(frozen=True, slots=True)
class JobDefaults:
    """The changes to make: a queue-name label to add (None: none), whether to suspend."""

    queue_name: str | None = None
    suspend: bool = False

    @property
    def changes(self) -> bool:
        return self.queue_name is not None or self.suspend


def job_defaults(
    labels: Mapping[str, str], suspended: bool, *, default_queue_exists: bool
) -> JobDefaults:
    """The defaults of a Job being created with `labels` and `spec.suspend == suspended`."""
    queue_name = labels.get(QUEUE_NAME_LABEL)
    added: str | None = None
    if not queue_name and default_queue_exists:
        added = queue_name = DEFAULT_LOCAL_QUEUE
    return JobDefaults(queue_name=added, suspend=bool(queue_name) and not suspended)
