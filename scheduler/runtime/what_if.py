"""The what-if dry run as the server asks for it: a request body in, plain JSON out
(docs/visibility-api.md#what-if).

The body is a batch/v1 Job, a v1 Pod (with the `pod` integration on), an apps/v1
StatefulSet (with the `statefulset` integration on), a JobSet (with the
`jobset.x-k8s.io/jobset` integration on) or a Kueue Workload (v1beta1 or v1beta2), in
JSON or YAML. It goes through the same decoding,
conversion and integration as every object the runtime ingests (`scheduler.api.decode`,
`scheduler.api.workload_sources`), then through
`scheduler.core.what_if` against the live scheduler. This runs on the event loop, in one
synchronous step, between the engine's steps, so the state it reads is consistent.

Errors are `DryRunError`s carrying the HTTP status the server answers: 400 for a body
that is not one YAML or JSON object, 422 for an object that is not a valid Job, Pod,
StatefulSet, JobSet or Workload for this LocalQueue (naming the field).
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import yaml

from scheduler.api.decode import decode_object
from scheduler.api.dry_run import DryRunError, FieldCause
from scheduler.api.errors import ApiError
from scheduler.api.integrations import NO_INTEGRATIONS, Integrations
from scheduler.api.job import QUEUE_NAME_LABEL
from scheduler.api.priority import PriorityClass, WorkloadPriorityClass
from scheduler.api.quantity import format_resource
from scheduler.api.workload import Workload
from scheduler.api.workload_sources import WORKLOAD_SOURCES, source_workload
from scheduler.core.blockers import PendingWhy
from scheduler.core.scheduler import Scheduler
from scheduler.core.what_if import WhatIf, hypothetical, what_if
from scheduler.runtime.snapshot import Snapshot

SOURCE: Final = "request body"
# Kubernetes objects nest a few dozen levels at most; deeper is refused before decoding.
MAX_DEPTH: Final = 100
GENERATED_SUFFIX: Final = "what-if"
# The kinds whose queue is their label (a Workload's is `spec.queueName`).
OWNER_KINDS: Final = ("Job", "Pod", "StatefulSet", "JobSet")
NO_REPLICAS: Final = "a StatefulSet of no replicas makes no Workload: there is nothing to admit"

PriorityClasses = tuple[Mapping[str, WorkloadPriorityClass], Mapping[str, PriorityClass]]


@dataclass(frozen=True, slots=True)
class Prepared:
    """A decoded request: the Workload asked about, for the LocalQueue of the path."""

    workload: Workload
    local_queue: str


class WhatIfService:
    """The dry run of one request, in two steps: `decoder(namespace, local_queue)` gives
    a function that turns the body into a `Prepared` workload, pure and safe to run in a
    worker thread (a large body takes tens of ms to validate); `answer(prepared)` runs
    the core's dry run on the event loop, where the scheduler's state lives."""

    def __init__(
        self,
        scheduler: Scheduler,
        priority_classes: Callable[[], PriorityClasses],
        snapshot: Callable[[], Snapshot] | None = None,
        *,
        integrations: Integrations = NO_INTEGRATIONS,
    ) -> None:
        """With `snapshot` (the engine's published one), the LocalQueue position is read
        from its per-LocalQueue index in O(log n) instead of counted in the core in
        O(position): about 25 ms at 100k pending, too long for the event loop. The index
        is at most one publish interval older than the core's state. `integrations`:
        those on (a Pod or StatefulSet whose integration is off is refused: it would
        not be queued)."""
        self._scheduler = scheduler
        self._integrations = integrations
        self._priority_classes = priority_classes
        self._snapshot = snapshot

    def local_queue_exists(self, namespace: str, name: str) -> bool:
        return f"{namespace}/{name}" in self._scheduler.objects.local_queues

    def decoder(self, namespace: str, local_queue: str) -> Callable[[bytes], Prepared]:
        """Called on the event loop: the priority classes are copied here, so the
        returned function reads nothing the loop changes."""
        wpcs, pcs = self._priority_classes()
        classes = (dict(wpcs), dict(pcs))
        integrations = self._integrations

        def decode(body: bytes) -> Prepared:
            data = _prepared(_parse(body), namespace, local_queue)
            return Prepared(_workload(data, classes, integrations), local_queue)

        return decode

    def answer(self, prepared: Prepared) -> dict[str, Any]:
        s = self._scheduler
        workload, local_queue = prepared.workload, prepared.local_queue
        wl = hypothetical(s, workload)
        if wl.key in s.objects.workloads:
            # A name taken by an existing Workload: the dry run is of a new one.
            renamed = workload.metadata.model_copy(
                update={"name": f"{workload.metadata.name}-{GENERATED_SUFFIX}", "uid": ""}
            )
            wl = hypothetical(s, workload.model_copy(update={"metadata": renamed}))
        result = what_if(s, wl, count_local_queue=self._snapshot is None)
        out = render(result, wl.namespace, wl.name, wl.priority, local_queue, s.now())
        if self._snapshot is not None and result.placement is not None:
            out["positionInLocalQueue"] = self._local_position(result, wl.namespace, local_queue)
        return out

    def dry_run(self, namespace: str, local_queue: str, body: bytes) -> dict[str, Any]:
        """Both steps at once (tests, and callers without a loop to keep free)."""
        return self.answer(self.decoder(namespace, local_queue)(body))

    def _local_position(self, result: WhatIf, namespace: str, local_queue: str) -> int:
        """How many of the LocalQueue's workloads the published snapshot lists before the
        ClusterQueue position the workload would take."""
        assert self._snapshot is not None and result.placement is not None
        assert result.cluster_queue is not None
        view = self._snapshot().view(result.cluster_queue)
        if view is None:
            return 0
        indexes = view.local_queue_indexes(namespace, local_queue)
        return bisect_left(indexes, result.placement.position_in_cluster_queue)


def _workload(
    data: dict[str, Any], classes: PriorityClasses, integrations: Integrations
) -> Workload:
    try:
        obj = decode_object(data, source=SOURCE)
        if isinstance(obj, WORKLOAD_SOURCES):
            made = source_workload(obj, *classes, integrations=integrations)
            if made is None:
                # The request's LocalQueue is always named: only no replicas makes none.
                raise _mismatch("spec.replicas", NO_REPLICAS)
            return made
    except ApiError as err:
        causes = tuple(FieldCause(e.path or "", e.detail) for e in err.errors)
        raise DryRunError(422, str(err), causes) from None
    except RecursionError:
        raise DryRunError(400, "the body is nested too deeply") from None
    if not isinstance(obj, Workload):
        message = (
            "the body must be a batch/v1 Job, a v1 Pod, an apps/v1 StatefulSet, a JobSet or a "
            "Workload, "
            f"not a {obj.kind}"
        )
        raise DryRunError(422, message, (FieldCause("kind", message),))
    return obj


def _parse(body: bytes) -> dict[str, Any]:
    """One JSON or YAML object (kubectl sends a YAML file's bytes as they are)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise DryRunError(400, "the body is not UTF-8 text") from None
    try:
        data = json.loads(text)
    except RecursionError:
        raise DryRunError(400, "the body is nested too deeply") from None
    except ValueError:
        data = _one_yaml_document(text)
    if not isinstance(data, dict):
        raise DryRunError(400, "the body must be a JSON or YAML object (a Job or a Workload)")
    if _depth(data) > MAX_DEPTH:
        raise DryRunError(400, f"the body is nested deeper than {MAX_DEPTH} levels")
    return data


def _depth(value: Any) -> int:
    """How deeply `value` nests (iteratively: a hostile body must not exhaust the stack)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        if level > MAX_DEPTH:
            break
        children = (
            node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        )
        stack.extend((child, level + 1) for child in children)
    return deepest


def _one_yaml_document(text: str) -> Any:
    """Aliases are refused: a few of them nested make a small body expand exponentially
    as later steps walk it ("billion laughs")."""
    try:
        if any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(text)):
            raise DryRunError(400, "YAML aliases (*name) are not accepted in the body")
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        raise DryRunError(400, f"the body is neither JSON nor YAML: {err}") from None
    except RecursionError:
        raise DryRunError(400, "the body is nested too deeply") from None
    if len(documents) != 1:
        raise DryRunError(400, f"the body must hold one object, it holds {len(documents)}")
    return documents[0]


def _prepared(data: dict[str, Any], namespace: str, local_queue: str) -> dict[str, Any]:
    """The object with the request's namespace and LocalQueue filled in where it has none;
    a different one is refused, naming the field (as kube-apiserver refuses a body whose
    namespace differs from the path's)."""
    data = dict(data)
    meta = data.get("metadata")
    meta = dict(meta) if isinstance(meta, dict) else {}
    data["metadata"] = meta
    own_namespace = meta.get("namespace")
    if own_namespace not in (None, "", namespace):
        raise _mismatch("metadata.namespace", f"must be {namespace!r}, the request's namespace")
    meta["namespace"] = namespace
    if not meta.get("name"):
        meta["name"] = f"{meta.get('generateName') or ''}{GENERATED_SUFFIX}"
    if data.get("kind") in OWNER_KINDS:
        labels = meta.get("labels")
        labels = dict(labels) if isinstance(labels, dict) else {}
        named = labels.get(QUEUE_NAME_LABEL)
        if named not in (None, "", local_queue):
            raise _mismatch(
                f"metadata.labels[{QUEUE_NAME_LABEL}]",
                f"must be {local_queue!r}, the LocalQueue of the request",
            )
        labels[QUEUE_NAME_LABEL] = local_queue
        meta["labels"] = labels
    elif data.get("kind") == "Workload" and isinstance(data.get("spec"), dict):
        spec = dict(data["spec"])
        if spec.get("queueName") not in (None, "", local_queue):
            raise _mismatch(
                "spec.queueName", f"must be {local_queue!r}, the LocalQueue of the request"
            )
        spec["queueName"] = local_queue
        data["spec"] = spec
    return data


def _mismatch(field: str, detail: str) -> DryRunError:
    return DryRunError(422, f"{field}: Invalid value: {detail}", (FieldCause(field, detail),))


def render(  # noqa: PLR0913 - the answer and what names the workload it is about
    result: WhatIf,
    namespace: str,
    name: str,
    priority: int,
    local_queue: str,
    now: int,
) -> dict[str, Any]:
    """The answer's fields (docs/visibility-api.md#what-if), before the server adds the
    envelope, the visible victims and the start estimate."""
    out: dict[str, Any] = {
        "workload": {
            "name": name,
            "namespace": namespace,
            "priority": priority,
            "localQueueName": local_queue,
        },
        "evaluatedAt": now,
        "decision": result.decision,
        "admitted": result.admitted,
        "atHead": result.head,
    }
    if result.cluster_queue is not None:
        out["workload"]["clusterQueueName"] = result.cluster_queue
    if result.placement is not None:
        p = result.placement
        out["positionInClusterQueue"] = p.position_in_cluster_queue
        if p.position_in_local_queue is not None:
            out["positionInLocalQueue"] = p.position_in_local_queue
        out["pendingWorkloadsInClusterQueue"] = p.pending_in_cluster_queue
        out["pendingWorkloadsInLocalQueue"] = p.pending_in_local_queue
    if result.mode:
        out["assignment"] = {
            "mode": result.mode,
            "podSets": [
                {
                    "name": ps.name,
                    "count": ps.count,
                    "flavors": dict(ps.flavors),
                    "resourceUsage": {r: format_resource(r, v) for r, v in ps.requests},
                }
                for ps in result.pod_sets
            ],
        }
    out["borrowing"] = [
        {
            "flavor": b.flavor,
            "resource": b.resource,
            "amount": format_resource(b.resource, b.amount),
        }
        for b in result.borrowed
    ]
    out["victims"] = [
        {
            "namespace": v.namespace,
            "name": v.name,
            "clusterQueueName": v.cluster_queue,
            "priority": v.priority,
            "reason": v.reason,
        }
        for v in result.victims
    ]
    if not result.admitted and result.decision != "Preempting":
        out["pendingReason"] = _blockers(result.why)
    return out


def _blockers(why: PendingWhy) -> dict[str, Any]:
    blockers = []
    for b in why.blockers:
        item: dict[str, Any] = {"kind": b.kind}
        for key, value in (("flavor", b.flavor), ("resource", b.resource), ("amount", b.amount)):
            if value:
                item[key] = value
        item["message"] = b.message
        blockers.append(item)
    return {"message": why.message, "blockers": blockers}
