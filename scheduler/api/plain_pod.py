"""core/v1 Pod, as Kueue's `pod` integration reads it, and that integration's names
(docs/cluster.md#plain-pods).

A Pod labelled `kueue.x-k8s.io/queue-name` is its own workload: the mutating webhook
marks it managed, holds it behind a scheduling gate and a finalizer, and the integration
lifts the gate once its Workload is admitted. Only the spec is typed (as a pod
template's is).
"""

from __future__ import annotations

from typing import ClassVar, Final, Literal

from scheduler.api.job import QUEUE_NAME_LABEL
from scheduler.api.meta import KubeObject
from scheduler.api.pod import PodSpec

MANAGED_LABEL: Final = "kueue.x-k8s.io/managed"
MANAGED_VALUE: Final = "true"
# Kueue uses the label's key as the finalizer's name too.
POD_FINALIZER: Final = MANAGED_LABEL
ADMISSION_GATE: Final = "kueue.x-k8s.io/admission"
# Pod groups: a Pod carrying the name (label or annotation) belongs to a group.
POD_GROUP_NAME: Final = "kueue.x-k8s.io/pod-group-name"
POD_GROUP_TOTAL_COUNT: Final = "kueue.x-k8s.io/pod-group-total-count"
# Set on a pod template by the webhook of the Pods' owner (a Deployment's: `deployment`):
# its Pods are managed with no finalizer, their owner replaces a deleted one.
SUSPENDING_PARENT: Final = "kueue.x-k8s.io/pod-suspending-parent"
# The condition a running Pod gets before it is deleted for its Workload's eviction.
TERMINATION_TARGET: Final = "TerminationTarget"


class QueuedByLabel(KubeObject):
    """An object Kueue queues by its own queue-name label: a Pod, or a Pod-suspending
    parent read offline (a StatefulSet, docs/simulate.md#statefulsets)."""

    @property
    def queue_name(self) -> str | None:
        """The LocalQueue it names; None (no label, or an empty one): not queued."""
        return self.metadata.labels.get(QUEUE_NAME_LABEL) or None


class Pod(QueuedByLabel):
    namespaced: ClassVar[bool] = True

    api_version: Literal["v1"] = "v1"
    kind: Literal["Pod"] = "Pod"
    spec: PodSpec  # the status is read raw, where it is read (pods.py)
