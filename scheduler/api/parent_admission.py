"""What the admission webhooks do to a *pod-suspending parent*: an apps/v1 Deployment or
StatefulSet whose integration is on (docs/cluster.md#deployments,
docs/cluster.md#statefulsets). Pure, on the raw object, as for Pods.

Kueue does not suspend such a parent: its Pods are held, through the Pod path. The
parent's webhook only marks the pod template of a parent that names a LocalQueue: the
label `kueue.x-k8s.io/managed`, the queue name and the WorkloadPriorityClass copied from
the parent, and the annotation `kueue.x-k8s.io/pod-suspending-parent: <framework>` (its
Pods need no finalizer: the parent's controller replaces a deleted one). A parent in a
namespace with a `default` LocalQueue that names none gets that one on creation.

Kueue's rules on an update that both kinds share: the queue name may change only while
no replica is ready, and may never be removed; a WorkloadPriorityClass cannot be added
while replicas are ready, nor removed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.api import raw_object as raw
from scheduler.api.errors import FieldError
from scheduler.api.job import PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL
from scheduler.api.job_defaulting import DEFAULT_LOCAL_QUEUE
from scheduler.api.plain_pod import MANAGED_LABEL, MANAGED_VALUE, SUSPENDING_PARENT
from scheduler.api.validation.common import subdomain
from scheduler.api.validation.queue_labels import (
    QUEUE_NAME_PATH,
    priority_class_update_errors,
    queue_name_update_errors,
)


@dataclass(frozen=True, slots=True)
class PodParent:
    """A kind whose Pods an integration holds: its type, and the framework name its
    webhook writes in the template's `kueue.x-k8s.io/pod-suspending-parent`."""

    api_version: str
    kind: str
    framework: str
    # Kueue's StatefulSet webhook leaves alone a StatefulSet whose template another
    # integration already marked (a LeaderWorkerSet's): that integration manages it.
    yields_to_other_parents: bool = False

    @property
    def type(self) -> tuple[str, str]:
        return self.api_version, self.kind

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]


def _label(obj: Mapping[str, Any], name: str) -> str:
    return str(raw.labels_of(obj).get(name) or "")


def names_queue(obj: Mapping[str, Any]) -> bool:
    return bool(_label(obj, QUEUE_NAME_LABEL))


def template_parent(obj: Mapping[str, Any]) -> str:
    """The framework named in the pod template's `pod-suspending-parent` ("" for none)."""
    template = raw.mapping(raw.mapping(obj.get("spec")).get("template"))
    return str(raw.annotations_of(template).get(SUSPENDING_PARENT) or "")


def managed_by_another(obj: Mapping[str, Any], parent: PodParent) -> bool:
    """Does another integration's webhook own this object (so `parent`'s does nothing)?"""
    named = template_parent(obj)
    return parent.yields_to_other_parents and bool(named) and named != parent.framework


@dataclass(frozen=True, slots=True)
class ParentMarks:
    """The changes to make: a queue-name label for the parent (None: none), and the
    labels and annotations its pod template must carry (empty: not managed)."""

    queue_name: str | None = None
    template_labels: dict[str, str] = field(default_factory=dict)
    template_annotations: dict[str, str] = field(default_factory=dict)


def parent_marks(
    obj: Mapping[str, Any], parent: PodParent, *, default_queue_exists: bool
) -> ParentMarks:
    """The marks of a parent being created or updated; `default_queue_exists`: its
    namespace has a LocalQueue `default` and it names none (creation only)."""
    if raw.metadata_of(obj).get("deletionTimestamp"):
        return ParentMarks()  # only finalizers are left to change
    if managed_by_another(obj, parent):
        return ParentMarks()
    queue = _label(obj, QUEUE_NAME_LABEL)
    added = None
    if not queue and default_queue_exists:
        added = queue = DEFAULT_LOCAL_QUEUE
    if not queue:
        return ParentMarks()
    labels = {MANAGED_LABEL: MANAGED_VALUE, QUEUE_NAME_LABEL: queue}
    priority_class = _label(obj, PRIORITY_CLASS_LABEL)
    if priority_class:
        labels[PRIORITY_CLASS_LABEL] = priority_class
    return ParentMarks(added, labels, {SUSPENDING_PARENT: parent.framework})


def queue_name_errors(obj: Mapping[str, Any]) -> list[FieldError]:
    """The queue name, when set, is a DNS subdomain (Kueue's rule on create and update)."""
    queue = _label(obj, QUEUE_NAME_LABEL)
    return subdomain(QUEUE_NAME_PATH, queue) if queue else []


def _no_replica_ready(obj: Mapping[str, Any]) -> bool:
    """Kueue's "suspended" parent: none of its replicas is ready."""
    return not raw.mapping(obj.get("status")).get("readyReplicas")


def label_update_errors(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """The rules of replacing parent `old` by `new` for its queue and priority labels,
    judged on the replicas `old` has ready."""
    suspended = _no_replica_ready(old)
    before, after = _label(old, QUEUE_NAME_LABEL), _label(new, QUEUE_NAME_LABEL)
    errors = queue_name_errors(new)
    errors += queue_name_update_errors(before, after, fixed=not suspended or not after)
    errors += priority_class_update_errors(
        _label(old, PRIORITY_CLASS_LABEL), _label(new, PRIORITY_CLASS_LABEL), suspended=suspended
    )
    return errors
