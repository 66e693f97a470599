"""What the admission webhooks do to an apps/v1 Deployment when the `deployment`
integration is on (docs/cluster.md#deployments). Pure, on the raw object, as for Pods.

Kueue does not queue a Deployment as one workload: each of its Pods is one, through
the Pod path. The Deployment's webhook only marks the pod template of a Deployment that
names a LocalQueue: the label `kueue.x-k8s.io/managed`, the queue name and the
WorkloadPriorityClass copied from the Deployment, and the annotation
`kueue.x-k8s.io/pod-suspending-parent: deployment` (its Pods need no finalizer: the
ReplicaSet replaces a deleted one). A Deployment in a namespace with a `default`
LocalQueue that names none gets that one on creation.

Kueue's rules on an update: the queue name may change only while no replica is ready,
and may never be removed; a WorkloadPriorityClass cannot be added while replicas are
ready, nor removed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from scheduler.api import raw_object as raw
from scheduler.api.errors import FieldError
from scheduler.api.integrations import DEPLOYMENT_FRAMEWORK
from scheduler.api.job import PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL
from scheduler.api.job_defaulting import DEFAULT_LOCAL_QUEUE
from scheduler.api.plain_pod import MANAGED_LABEL, MANAGED_VALUE, SUSPENDING_PARENT
from scheduler.api.validation.common import subdomain
from scheduler.api.validation.queue_labels import (
    QUEUE_NAME_PATH,
    priority_class_update_errors,
    queue_name_update_errors,
)

DEPLOYMENT: Final = ("apps/v1", "Deployment")


def _label(obj: Mapping[str, Any], name: str) -> str:
    return str(raw.labels_of(obj).get(name) or "")


@dataclass(frozen=True, slots=True)
class DeploymentMarks:
    """The changes to make: a queue-name label for the Deployment (None: none), and the
    labels and annotations its pod template must carry (empty: not managed)."""

    queue_name: str | None = None
    template_labels: dict[str, str] = field(default_factory=dict)
    template_annotations: dict[str, str] = field(default_factory=dict)


def deployment_marks(
    deployment: Mapping[str, Any], *, default_queue_exists: bool
) -> DeploymentMarks:
    """The marks of a Deployment being created or updated; `default_queue_exists`: its
    namespace has a LocalQueue `default` and it names none (creation only)."""
    if raw.metadata_of(deployment).get("deletionTimestamp"):
        return DeploymentMarks()  # only finalizers are left to change
    queue = _label(deployment, QUEUE_NAME_LABEL)
    added = None
    if not queue and default_queue_exists:
        added = queue = DEFAULT_LOCAL_QUEUE
    if not queue:
        return DeploymentMarks()
    labels = {MANAGED_LABEL: MANAGED_VALUE, QUEUE_NAME_LABEL: queue}
    priority_class = _label(deployment, PRIORITY_CLASS_LABEL)
    if priority_class:
        labels[PRIORITY_CLASS_LABEL] = priority_class
    return DeploymentMarks(added, labels, {SUSPENDING_PARENT: DEPLOYMENT_FRAMEWORK})


def names_queue(deployment: Mapping[str, Any]) -> bool:
    return bool(_label(deployment, QUEUE_NAME_LABEL))


def deployment_errors(deployment: Mapping[str, Any]) -> list[FieldError]:
    queue = _label(deployment, QUEUE_NAME_LABEL)
    return subdomain(QUEUE_NAME_PATH, queue) if queue else []


def _suspended(deployment: Mapping[str, Any]) -> bool:
    """Kueue's "suspended" Deployment: none of its replicas is ready."""
    return not raw.mapping(deployment.get("status")).get("readyReplicas")


def deployment_update_errors(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """The rules of replacing Deployment `old` by `new`."""
    suspended = _suspended(old)
    before, after = _label(old, QUEUE_NAME_LABEL), _label(new, QUEUE_NAME_LABEL)
    errors = deployment_errors(new)
    errors += queue_name_update_errors(before, after, fixed=not suspended or not after)
    errors += priority_class_update_errors(
        _label(old, PRIORITY_CLASS_LABEL), _label(new, PRIORITY_CLASS_LABEL), suspended=suspended
    )
    return errors
