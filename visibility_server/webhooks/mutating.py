"""The mutating webhooks' decisions: for batch/v1 Jobs, the JSONPatch that stores a Job
Kueue manages suspended, and names the `default` LocalQueue where that applies
(`scheduler.api.job_defaulting`; docs/cluster.md#admission-webhooks); for Pods, with the
`pod` integration on, the one that holds a managed Pod behind the admission gate
(`scheduler.api.pod_admission`; docs/cluster.md#plain-pods).

Works on the raw object: a Job that breaks a rule is the validating webhook's to deny,
and a patch must not depend on fields this server does not model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.api.job import QUEUE_NAME_LABEL
from scheduler.api.job_defaulting import job_defaults
from scheduler.api.plain_pod import ADMISSION_GATE, MANAGED_LABEL, MANAGED_VALUE, POD_FINALIZER
from scheduler.api.pod_admission import has_gate, is_managed
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


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def job_patch(request: AdmissionRequest, default_queue: DefaultQueueLookup) -> JsonPatch:
    """The patch for a Job being created (empty: nothing to change). NotSyncedError when
    the defaulting needs the LocalQueues before the server has read them."""
    if (request.kind.api_version, request.kind.kind) != JOB:
        raise WrongKindError(f"only batch/v1 Jobs are mutated here, not {request.kind.kind}")
    if request.operation != "CREATE":
        return []
    job = request.new
    metadata = _mapping(job.get("metadata"))
    labels = {str(k): str(v) for k, v in _mapping(metadata.get("labels")).items()}
    spec = _mapping(job.get("spec"))
    namespace = request.namespace or str(metadata.get("namespace") or "")
    exists = False if labels.get(QUEUE_NAME_LABEL) else default_queue(namespace)
    defaults = job_defaults(labels, spec.get("suspend") is True, default_queue_exists=exists)
    patch: JsonPatch = []
    if defaults.queue_name is not None:
        if isinstance(metadata.get("labels"), Mapping):
            path = _pointer("metadata", "labels", QUEUE_NAME_LABEL)
            patch.append({"op": "add", "path": path, "value": defaults.queue_name})
        else:
            value = {QUEUE_NAME_LABEL: defaults.queue_name}
            patch.append({"op": "add", "path": "/metadata/labels", "value": value})
    if defaults.suspend:
        if not isinstance(job.get("spec"), Mapping):
            raise WrongKindError("request.object.spec: a Job needs a spec")
        patch.append({"op": "add", "path": "/spec/suspend", "value": True})
    return patch


def pod_patch(request: AdmissionRequest, *, enabled: bool) -> JsonPatch:
    """The patch for a Pod being created: with the integration `enabled`, a managed Pod
    gets the managed label, the finalizer and the admission gate (those it lacks);
    otherwise nothing changes (Kueue's webhook for a disabled integration does nothing)."""
    if (request.kind.api_version, request.kind.kind) != POD:
        raise WrongKindError(f"only v1 Pods are mutated here, not {request.kind.kind}")
    pod = request.new
    if request.operation != "CREATE" or not enabled or not is_managed(pod):
        return []
    metadata = _mapping(pod.get("metadata"))
    patch: JsonPatch = []
    if _mapping(metadata.get("labels")).get(MANAGED_LABEL) != MANAGED_VALUE:
        path = _pointer("metadata", "labels", MANAGED_LABEL)  # the queue-name label is there
        patch.append({"op": "add", "path": path, "value": MANAGED_VALUE})
    finalizers = metadata.get("finalizers")
    if not isinstance(finalizers, list):
        patch.append({"op": "add", "path": "/metadata/finalizers", "value": [POD_FINALIZER]})
    elif POD_FINALIZER not in finalizers:
        patch.append({"op": "add", "path": "/metadata/finalizers/-", "value": POD_FINALIZER})
    if not has_gate(pod):
        spec = pod.get("spec")
        if not isinstance(spec, Mapping):
            raise WrongKindError("request.object.spec: a Pod needs a spec")
        gate = {"name": ADMISSION_GATE}
        if isinstance(spec.get("schedulingGates"), list):
            patch.append({"op": "add", "path": "/spec/schedulingGates/-", "value": gate})
        else:
            patch.append({"op": "add", "path": "/spec/schedulingGates", "value": [gate]})
    return patch
