"""The validating webhook's decision: the same rules as `simulate`, `serve --embedded` and
the store (docs/cluster.md#admission-webhooks).

The kind of the request picks the model from the API layer's table
(`scheduler.api.kinds.KINDS`), so every kind the API layer knows is validated here without
a change to this module. The object is decoded as the store decodes what it lists
(`decode_live`: fields the model has no place for are pruned, then the strict model and
`scheduler.api.validation`; a v1beta2 object is checked as v1beta2 and converted), and an
UPDATE also runs `validate_update` against the old object. Whatever is denied here is
what the store would refuse to load; whatever is allowed, it loads.

Pods, Deployments, StatefulSets and JobSets (with the `pod`, `deployment`, `statefulset`
and `jobset.x-k8s.io/jobset` integrations on) are judged on the raw object by Kueue's
rules for them (`scheduler.api.pod_admission`, `scheduler.api.deployment_admission`,
`scheduler.api.statefulset_admission`, `scheduler.api.jobset_admission`): their other
fields are kube-apiserver's (JobSet's own webhook's) to check.

The Kueue kinds queuescope stores but does not act on (`scheduler.api.foreign`:
Topology, ProvisioningRequestConfig, MultiKueueConfig, MultiKueueCluster) are checked
with their own rules; any other kind of the group is allowed with a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.api.base import TypedObject
from scheduler.api.deployment_admission import (
    DEPLOYMENT,
    deployment_errors,
    deployment_update_errors,
    names_queue,
)
from scheduler.api.errors import ApiError, FieldError
from scheduler.api.foreign import decode_foreign, foreign_update_errors, is_foreign
from scheduler.api.integrations import Integrations
from scheduler.api.job import Job
from scheduler.api.jobset_admission import (
    JOBSET,
    jobset_errors,
    jobset_update_errors,
    removes_queue_name,
)
from scheduler.api.kinds import KINDS
from scheduler.api.live import decode_live
from scheduler.api.pod_admission import is_managed, pod_errors, pod_update_errors
from scheduler.api.statefulset_admission import (
    STATEFULSET,
    WorkloadInUse,
    statefulset_errors,
    statefulset_update_errors,
)
from scheduler.api.validation import validate_update
from scheduler.api.versions import KUEUE_GROUP
from visibility_server.webhooks.default_queue import DefaultQueueLookup
from visibility_server.webhooks.review import AdmissionRequest

log = logging.getLogger(__name__)

POD = ("v1", "Pod")


@dataclass(frozen=True)
class Verdict:
    errors: list[FieldError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def validate_request(
    request: AdmissionRequest,
    default_queue: DefaultQueueLookup,
    integrations: Integrations,
    workload_in_use: WorkloadInUse,
) -> Verdict:
    """The broken rules of a CREATE or UPDATE (empty: allowed). NotSyncedError when a
    Job (JobSet) rule needs the LocalQueues, or a StatefulSet rule the Workloads, before the
    server has read them. `integrations`: which Pods (Deployments, StatefulSets) are
    managed; the others are always allowed, as by Kueue's webhook for an integration
    that is off."""
    kind = request.kind
    if request.operation not in ("CREATE", "UPDATE") or request.sub_resource:
        return Verdict()
    if (kind.api_version, kind.kind) in (POD, DEPLOYMENT.type, STATEFULSET.type):
        rules = _raw_rules(kind.kind, integrations, workload_in_use)
        return _raw_verdict(request, *rules)
    if (kind.api_version, kind.kind) == JOBSET:
        return _raw_verdict(
            request,
            _managed_when(integrations.jobsets),
            jobset_errors,
            lambda old, new: jobset_update_errors(
                old,
                new,
                default_queue_exists=(
                    default_queue(request.namespace) if removes_queue_name(old, new) else False
                ),
            ),
        )
    if is_foreign(kind.api_version, kind.kind):
        return _verdict(request, decode_foreign, foreign_update_errors)
    if (kind.api_version, kind.kind) not in KINDS:
        return _not_ours(request)

    def update_errors(old: TypedObject, new: TypedObject) -> list[FieldError]:
        exists = default_queue(request.namespace) if _removes_queue_name(old, new) else False
        return validate_update(old, new, default_queue_exists=exists)

    return _verdict(request, decode_live, update_errors)


def _verdict(
    request: AdmissionRequest,
    decode: Callable[..., TypedObject],
    update_errors: Callable[[Any, Any], list[FieldError]],
) -> Verdict:
    """`decode` the new object (its rules), then on UPDATE `update_errors` against the old."""
    if request.old_object is not None and _being_deleted(request.old_object):
        # Only finalizers are left to remove: refusing would keep the object forever.
        return Verdict()
    try:
        new = decode(request.new, source=f"admission {request.uid}")
    except ApiError as err:
        return Verdict(errors=list(err.errors))
    if request.operation != "UPDATE" or request.old_object is None:
        return Verdict()
    try:
        old = decode(request.old_object, source=f"admission {request.uid} (old)")
    except ApiError as err:
        # Stored before these rules applied: the new object alone decides.
        log.info("admission %s: the old object does not decode (%s)", request.uid, err)
        return Verdict()
    return Verdict(errors=update_errors(old, new))


RawRules = Callable[[Mapping[str, Any]], list[FieldError]]
RawUpdateRules = Callable[[Mapping[str, Any], Mapping[str, Any]], list[FieldError]]
Managed = Callable[[Mapping[str, Any]], bool]


def _raw_rules(
    kind: str, integrations: Integrations, workload_in_use: WorkloadInUse
) -> tuple[Managed, RawRules, RawUpdateRules]:
    """Which Pods, Deployments or StatefulSets are managed, and Kueue's rules for them."""
    if kind == "Pod":
        return lambda pod: is_managed(pod, integrations), pod_errors, pod_update_errors
    if kind == STATEFULSET.kind:
        return (
            _managed_when(integrations.statefulsets),
            statefulset_errors,
            lambda old, new: statefulset_update_errors(old, new, workload_in_use),
        )
    return _managed_when(integrations.deployments), deployment_errors, deployment_update_errors


def _managed_when(enabled: bool) -> Managed:
    """A parent is managed when it names a LocalQueue and its integration is on."""
    return names_queue if enabled else (lambda _: False)


def _raw_verdict(
    request: AdmissionRequest,
    managed: Managed,
    errors: RawRules,
    update_errors: RawUpdateRules,
) -> Verdict:
    """Kueue's rules for an object one of its integrations manages, before or after the
    change (docs/cluster.md#plain-pods, docs/cluster.md#deployments,
    docs/cluster.md#statefulsets); others pass."""
    new, old = request.new, request.old_object
    if old is not None and _being_deleted(old):
        return Verdict()
    if old is not None and request.operation == "UPDATE":
        if not (managed(old) or managed(new)):
            return Verdict()
        return Verdict(errors=update_errors(old, new))
    return Verdict(errors=errors(new) if managed(new) else [])


def _being_deleted(obj: Mapping[str, Any]) -> bool:
    metadata = obj.get("metadata")
    return isinstance(metadata, Mapping) and bool(metadata.get("deletionTimestamp"))


def _not_ours(request: AdmissionRequest) -> Verdict:
    """A kind the API layer does not know: allowed; a Kueue one with a warning."""
    kind = request.kind
    if kind.group != KUEUE_GROUP:
        return Verdict()
    warning = f"{kind.kind} {kind.api_version} is not implemented by queuescope: not validated"
    return Verdict(warnings=[warning])


def _removes_queue_name(old: object, new: object) -> bool:
    """Only this Job update reads the LocalQueues (so only it can wait for the sync)."""
    return (
        isinstance(old, Job)
        and isinstance(new, Job)
        and bool(old.queue_name)
        and not new.queue_name
    )
