"""The mutating webhook's decision for batch/v1 Jobs: the JSONPatch that stores a Job
Kueue manages suspended, and names the `default` LocalQueue where that applies
(`scheduler.api.job_defaulting`; docs/cluster.md#admission-webhooks).

Works on the raw object: a Job that breaks a rule is the validating webhook's to deny,
and a patch must not depend on fields this server does not model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.api.job import QUEUE_NAME_LABEL
from scheduler.api.job_defaulting import job_defaults
from visibility_server.webhooks.default_queue import DefaultQueueLookup
from visibility_server.webhooks.responses import JsonPatch
from visibility_server.webhooks.review import AdmissionRequest

JOB = ("batch/v1", "Job")


class NotAJobError(ValueError):
    """The mutating webhook was sent something it does not mutate."""


def _pointer(*parts: str) -> str:
    """An RFC 6901 JSON pointer (`/` in a label key is `~1`)."""
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def job_patch(request: AdmissionRequest, default_queue: DefaultQueueLookup) -> JsonPatch:
    """The patch for a Job being created (empty: nothing to change). NotSyncedError when
    the defaulting needs the LocalQueues before the server has read them."""
    if (request.kind.api_version, request.kind.kind) != JOB:
        raise NotAJobError(f"only batch/v1 Jobs are mutated here, not {request.kind.kind}")
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
            raise NotAJobError("request.object.spec: a Job needs a spec")
        patch.append({"op": "add", "path": "/spec/suspend", "value": True})
    return patch
