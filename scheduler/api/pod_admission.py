"""What the admission webhooks do to a Pod when the `pod` or `deployment` integration
is on (docs/cluster.md#plain-pods, docs/cluster.md#deployments). Pure, on the raw
object: a Pod has far more fields than the API layer models, and none of them matters
here.

A Pod is managed when it names a LocalQueue (a non-empty `kueue.x-k8s.io/queue-name`
label) and is not a batch/v1 Job's Pod (the Job is the workload then): with `pod`, any
such Pod; with `deployment`, those whose template a Deployment's webhook marked
(`kueue.x-k8s.io/pod-suspending-parent`; such a Pod is managed whenever either is on).
On CREATE a managed Pod gets the label `kueue.x-k8s.io/managed` and the scheduling gate
`kueue.x-k8s.io/admission`, and the finalizer `kueue.x-k8s.io/managed` unless its
parent replaces it, as in Kueue. Kueue's rules for such Pods are kept (a queue name that
is a DNS subdomain, the managed label only `true`, the queue name fixed once the Pod is
past its gate), and those for a pod group's keys (docs/cluster.md#pod-groups).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.api import pod_group
from scheduler.api import raw_object as raw
from scheduler.api.errors import FieldError
from scheduler.api.integrations import Integrations
from scheduler.api.job import QUEUE_NAME_LABEL
from scheduler.api.plain_pod import (
    ADMISSION_GATE,
    MANAGED_LABEL,
    MANAGED_VALUE,
    SUSPENDING_PARENT,
)
from scheduler.api.validation.common import subdomain
from scheduler.api.validation.paths import key
from scheduler.api.validation.queue_labels import (
    QUEUE_NAME_PATH,
    max_exec_time_errors,
    max_exec_time_update_errors,
    queue_name_update_errors,
)

MANAGED_PATH = key("metadata.labels", MANAGED_LABEL)


def queue_name(pod: Mapping[str, Any]) -> str:
    return str(raw.labels_of(pod).get(QUEUE_NAME_LABEL) or "")


def owned_by_job(pod: Mapping[str, Any]) -> bool:
    """Is the Pod's controller a batch/v1 Job (the Job integration's to queue)?"""
    ref = raw.controller_of(pod)
    return ref is not None and (ref.get("apiVersion"), ref.get("kind")) == ("batch/v1", "Job")


def suspending_parent(pod: Mapping[str, Any]) -> str:
    """The integration whose webhook marked the Pod's template ("" for none)."""
    annotations = raw.annotations_of(pod)
    return str(annotations.get(SUSPENDING_PARENT) or "")


def is_managed(pod: Mapping[str, Any], integrations: Integrations) -> bool:
    """Is the Pod a workload of one of the `integrations` that are on?"""
    if not queue_name(pod) or owned_by_job(pod):
        return False
    if suspending_parent(pod):
        # Kueue manages a Pod its parent's webhook marked whenever Pods are managed at all.
        return integrations.pods
    return integrations.plain


def has_gate(pod: Mapping[str, Any]) -> bool:
    gates = raw.mapping(pod.get("spec")).get("schedulingGates") or []
    return any(isinstance(g, Mapping) and g.get("name") == ADMISSION_GATE for g in gates)


def _held(pod: Mapping[str, Any]) -> bool:
    """Kueue's "suspended" Pod: behind its gate, or ended."""
    phase = raw.mapping(pod.get("status")).get("phase")
    return has_gate(pod) or phase in ("Succeeded", "Failed")


def pod_errors(pod: Mapping[str, Any]) -> list[FieldError]:
    """The rules a managed Pod breaks, on CREATE and UPDATE alike."""
    errors: list[FieldError] = []
    name = queue_name(pod)
    if name:
        errors += subdomain(QUEUE_NAME_PATH, name)
    errors += max_exec_time_errors({str(k): str(v) for k, v in raw.labels_of(pod).items()})
    managed = raw.labels_of(pod).get(MANAGED_LABEL)
    if managed is not None and managed != MANAGED_VALUE:
        errors.append(FieldError(MANAGED_PATH, "Forbidden: managed label value can only be 'true'"))
    return errors + pod_group.metadata_errors(pod)


def pod_update_errors(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """The rules of replacing a managed Pod `old` by `new`."""
    fixed = not _held(new)
    return (
        pod_errors(new)
        + pod_group.update_errors(old, new)
        + queue_name_update_errors(queue_name(old), queue_name(new), fixed=fixed)
        + max_exec_time_update_errors(
            raw.labels_of(old), raw.labels_of(new), suspended=_held(old) and _held(new)
        )
    )
