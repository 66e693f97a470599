"""The mutating webhooks' decisions: for batch/v1 Jobs (and JobSets, with their integration
on: docs/cluster.md#jobsets), the JSONPatch that stores one Kueue manages suspended, and
names the `default` LocalQueue where that applies (`scheduler.api.job_defaulting`;
docs/cluster.md#admission-webhooks); for Pods, with the
`pod`, `deployment` or `statefulset` integration on, the one that holds a managed Pod
behind the admission gate (`scheduler.api.pod_admission`; docs/cluster.md#plain-pods);
for Deployments and StatefulSets, with their integration on, the one that marks the pod
template of one that names a LocalQueue (`scheduler.api.parent_admission`;
docs/cluster.md#deployments, docs/cluster.md#statefulsets).

Works on the raw object: a Job that breaks a rule is the validating webhook's to deny,
and a patch must not depend on fields this server does not model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.api import raw_object as raw
from scheduler.api.integrations import Integrations
from scheduler.api.job import QUEUE_NAME_LABEL
from scheduler.api.job_defaulting import job_defaults
from scheduler.api.jobset_admission import JOBSET, controlled_by_jobset
from scheduler.api.parent_admission import PodParent, managed_by_another, parent_marks
from scheduler.api.plain_pod import ADMISSION_GATE, MANAGED_LABEL, MANAGED_VALUE, POD_FINALIZER
from scheduler.api.pod_admission import has_gate, is_managed, suspending_parent
from scheduler.api.role_hash import ROLE_HASH_ANNOTATION, role_hash
from visibility_server.webhooks.default_queue import DefaultQueueLookup
from visibility_server.webhooks.responses import JsonPatch
from visibility_server.webhooks.review import AdmissionRequest

JOB = ("batch/v1", "Job")
POD = ("v1", "Pod")


class WrongKindError(ValueError):
    """A mutating webhook was sent a kind it does not mutate."""


def _pointer(*parts: str) -> str:
    """An RFC 6901 JSON pointer (`/` in a label key is `~1`)."""
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def set_keys(
    obj: Mapping[str, Any], parts: tuple[str, ...], values: Mapping[str, Any]
) -> JsonPatch:
    """Operations that merge `values` (maps of strings, or of such maps) into the map at
    `parts` below `obj`, adding the maps that are missing whole; keys already so are
    left alone."""
    at: Mapping[str, Any] = obj
    for depth, part in enumerate(parts):
        below = at.get(part)
        if not isinstance(below, Mapping):
            value: Any = dict(values)
            for outer in reversed(parts[depth + 1 :]):
                value = {outer: value}
            return [{"op": "add", "path": _pointer(*parts[: depth + 1]), "value": value}]
        at = below
    patch: JsonPatch = []
    for k, v in values.items():
        if isinstance(v, Mapping):
            patch += set_keys(obj, (*parts, k), v)
        elif at.get(k) != v:
            patch.append({"op": "add", "path": _pointer(*parts, k), "value": v})
    return patch


def job_patch(
    request: AdmissionRequest, default_queue: DefaultQueueLookup, integrations: Integrations
) -> JsonPatch:
    """The patch for a Job being created (empty: nothing to change): none for a Job a
    JobSet controls while JobSets are integrated (the JobSet is the workload). NotSyncedError
    when the defaulting needs the LocalQueues before the server has read them."""
    if (request.kind.api_version, request.kind.kind) != JOB:
        raise WrongKindError(f"only batch/v1 Jobs are mutated here, not {request.kind.kind}")
    if request.operation != "CREATE":
        return []
    if integrations.jobsets and controlled_by_jobset(request.new):
        return []
    return _suspend_patch(request, default_queue)


def jobset_patch(
    request: AdmissionRequest, default_queue: DefaultQueueLookup, *, enabled: bool
) -> JsonPatch:
    """The patch for a JobSet being created, with its integration `enabled`: the same as a
    Job's (docs/cluster.md#jobsets); otherwise nothing."""
    if (request.kind.api_version, request.kind.kind) != JOBSET:
        raise WrongKindError(f"only {JOBSET[0]} JobSets are mutated here, not {request.kind.kind}")
    if not enabled or request.operation != "CREATE":
        return []
    return _suspend_patch(request, default_queue)


def _suspend_patch(request: AdmissionRequest, default_queue: DefaultQueueLookup) -> JsonPatch:
    """A Job's (a JobSet's) defaults on creation: the `default` LocalQueue when it names
    none and its namespace has one, and `spec.suspend` when it is queued."""
    obj = request.new
    metadata = raw.metadata_of(obj)
    labels = {str(k): str(v) for k, v in raw.mapping(metadata.get("labels")).items()}
    spec = raw.mapping(obj.get("spec"))
    namespace = request.namespace or str(metadata.get("namespace") or "")
    exists = False if labels.get(QUEUE_NAME_LABEL) else default_queue(namespace)
    defaults = job_defaults(labels, spec.get("suspend") is True, default_queue_exists=exists)
    patch: JsonPatch = []
    if defaults.queue_name is not None:
        patch += set_keys(obj, ("metadata", "labels"), {QUEUE_NAME_LABEL: defaults.queue_name})
    if defaults.suspend:
        if not isinstance(obj.get("spec"), Mapping):
            raise WrongKindError(f"request.object.spec: a {request.kind.kind} needs a spec")
        patch.append({"op": "add", "path": "/spec/suspend", "value": True})
    return patch


def pod_patch(request: AdmissionRequest, integrations: Integrations) -> JsonPatch:
    """The patch for a Pod being created: a Pod one of the `integrations` manages gets
    the managed label, its role hash, the admission gate and (unless its parent
    replaces it) the finalizer, those it lacks; otherwise nothing changes (Kueue's
    webhook for a disabled integration does nothing)."""
    if (request.kind.api_version, request.kind.kind) != POD:
        raise WrongKindError(f"only v1 Pods are mutated here, not {request.kind.kind}")
    pod = request.new
    if request.operation != "CREATE" or not is_managed(pod, integrations):
        return []
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        raise WrongKindError("request.object.spec: a Pod needs a spec")
    patch = set_keys(pod, ("metadata", "labels"), {MANAGED_LABEL: MANAGED_VALUE})
    # Kueue names the pod sets of a pod group by this hash (docs/cluster.md#pod-groups).
    patch += set_keys(pod, ("metadata", "annotations"), {ROLE_HASH_ANNOTATION: role_hash(spec)})
    finalizers = raw.metadata_of(pod).get("finalizers")
    if suspending_parent(pod):
        pass  # its parent replaces it once deleted: nothing to hold it for
    elif not isinstance(finalizers, list):
        patch.append({"op": "add", "path": "/metadata/finalizers", "value": [POD_FINALIZER]})
    elif POD_FINALIZER not in finalizers:
        patch.append({"op": "add", "path": "/metadata/finalizers/-", "value": POD_FINALIZER})
    if not has_gate(pod):
        gate = {"name": ADMISSION_GATE}
        if isinstance(spec.get("schedulingGates"), list):
            patch.append({"op": "add", "path": "/spec/schedulingGates/-", "value": gate})
        else:
            patch.append({"op": "add", "path": "/spec/schedulingGates", "value": [gate]})
    return patch


def parent_patch(
    request: AdmissionRequest,
    parent: PodParent,
    default_queue: DefaultQueueLookup,
    *,
    enabled: bool,
) -> JsonPatch:
    """The patch for a Deployment or StatefulSet (`parent`) being created or updated:
    with its integration `enabled`, the marks of its pod template (and the `default`
    LocalQueue on creation); otherwise nothing. NotSyncedError as for Jobs."""
    kind = parent.kind
    if (request.kind.api_version, request.kind.kind) != parent.type:
        raise WrongKindError(
            f"only {parent.api_version} {kind}s are mutated here, not {request.kind.kind}"
        )
    if not enabled:
        return []
    obj = request.new
    metadata = raw.metadata_of(obj)
    exists = False
    # Only a parent this webhook would mark reads the LocalQueues (so only it can wait
    # for the sync): not one that names its queue, nor another integration's.
    if (
        request.operation == "CREATE"
        and not raw.mapping(metadata.get("labels")).get(QUEUE_NAME_LABEL)
        and not managed_by_another(obj, parent)
    ):
        exists = default_queue(request.namespace or str(metadata.get("namespace") or ""))
    marks = parent_marks(obj, parent, default_queue_exists=exists)
    patch: JsonPatch = []
    if marks.queue_name is not None:
        patch += set_keys(obj, ("metadata", "labels"), {QUEUE_NAME_LABEL: marks.queue_name})
    if not marks.template_labels:
        return patch
    if not isinstance(raw.mapping(obj.get("spec")).get("template"), Mapping):
        raise WrongKindError(f"request.object.spec.template: a {kind} needs a pod template")
    marked = {"labels": marks.template_labels, "annotations": marks.template_annotations}
    return patch + set_keys(obj, ("spec", "template", "metadata"), marked)
