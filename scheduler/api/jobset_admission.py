"""What the admission webhooks do to a JobSet when the `jobset.x-k8s.io/jobset`
integration is on (docs/cluster.md#jobsets): on creation it is stored suspended when it
names a LocalQueue (or gets the `default` one), as a Job is; its queue and priority
labels follow a Job's rules, judged by its `spec.suspend`. JobSet's own webhook keeps
its replicated Jobs immutable, so nothing else is ours to check. A Job a JobSet controls
is the JobSet's: the Job webhooks leave it alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from scheduler.api import raw_object as raw
from scheduler.api.errors import FieldError
from scheduler.api.job import QUEUE_NAME_LABEL
from scheduler.api.jobset_model import JOBSET_API_VERSION
from scheduler.api.validation.job_update import queued_update_errors
from scheduler.api.validation.queue_labels import queued_label_errors

JOBSET: Final = (JOBSET_API_VERSION, "JobSet")


def controlled_by_jobset(obj: Mapping[str, Any]) -> bool:
    """Does a JobSet control the raw object (a Job the JobSet controller made)?"""
    owner = raw.controller_of(obj)
    return owner is not None and (owner.get("apiVersion"), owner.get("kind")) == JOBSET


def _labels(jobset: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in raw.labels_of(jobset).items()}


def _suspended(jobset: Mapping[str, Any]) -> bool:
    return raw.mapping(jobset.get("spec")).get("suspend") is True


def jobset_errors(jobset: Mapping[str, Any]) -> list[FieldError]:
    return queued_label_errors(_labels(jobset))


def jobset_update_errors(
    old: Mapping[str, Any], new: Mapping[str, Any], *, default_queue_exists: bool
) -> list[FieldError]:
    """The rules of replacing JobSet `old` by `new` (`default_queue_exists`: its namespace
    has a LocalQueue named `default`)."""
    return jobset_errors(new) + queued_update_errors(
        _labels(old),
        _labels(new),
        suspended=(_suspended(old), _suspended(new)),
        default_queue_exists=default_queue_exists,
    )


def removes_queue_name(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Only this update reads the LocalQueues (so only it can wait for the sync)."""
    return bool(_labels(old).get(QUEUE_NAME_LABEL)) and not _labels(new).get(QUEUE_NAME_LABEL)
