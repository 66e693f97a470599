"""Manifest objects as the scheduler receives them, the way the simulator prepares them.

A Workload without a uid gets the simulator's deterministic uid (a UUID-5 of
``namespace/name``, :mod:`scheduler.core.metadata`) and, without a creationTimestamp,
the real time at which the runtime first saw it; Jobs with the queue-name label become
the Workload Kueue's Job integration would create (`job_to_workload`), after the same
defaults are filled on the Job, and so do Pods with the `pod` integration on and
StatefulSets with the `statefulset` integration on (`scheduler.api.workload_sources`).
Several objects seen together get timestamps 1 ms apart in document order, as the
simulator spaces them, so their queue order follows the manifests.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from scheduler.api import (
    AdmissionCheck,
    ClusterQueue,
    Cohort,
    Job,
    LocalQueue,
    Namespace,
    PriorityClass,
    ResourceFlavor,
    Workload,
    WorkloadPriorityClass,
)
from scheduler.api.integrations import NO_INTEGRATIONS, Integrations
from scheduler.api.jobset_model import JobSet
from scheduler.api.plain_pod import Pod
from scheduler.api.statefulset_model import StatefulSet
from scheduler.api.workload_sources import WORKLOAD_SOURCES, makes_workload, source_workload
from scheduler.core.clock import Clock, Instant
from scheduler.core.metadata import fill_metadata

ObjectKey = tuple[str, str, str]
"""(kind, namespace or "", name)."""

STAMP_SPACING: Instant = 1000  # µs between objects first seen together (as the simulator)

# Dependency order for applying (and, reversed, for deleting); within a rank, document
# order. Priority classes are not applied to the scheduler: they resolve Job priorities.
APPLY_RANK: dict[str, int] = {
    "Namespace": 0,
    "WorkloadPriorityClass": 1,
    "PriorityClass": 1,
    "ResourceFlavor": 2,
    "AdmissionCheck": 2,
    "Cohort": 3,
    "ClusterQueue": 4,
    "LocalQueue": 5,
    "Workload": 6,
}

SCHEDULER_KINDS = (
    Namespace,
    ResourceFlavor,
    AdmissionCheck,
    Cohort,
    ClusterQueue,
    LocalQueue,
    Workload,
    Job,
    Pod,
    StatefulSet,
    JobSet,
)


def object_key(obj: Any) -> ObjectKey:
    meta = obj.metadata
    namespaced = bool(getattr(type(obj), "namespaced", False))
    namespace = (meta.namespace or "default") if namespaced else ""
    return (str(obj.kind), namespace, str(meta.name))


def prepare(
    obj: Any,
    first_seen: Instant,
    workload_priority_classes: Mapping[str, WorkloadPriorityClass],
    priority_classes: Mapping[str, PriorityClass],
    *,
    integrations: Integrations = NO_INTEGRATIONS,
) -> Any | None:
    """The object to apply, or None for a Job, Pod or StatefulSet its integration would
    make no Workload of (no queue-name label; no replicas). Raises ApiError when its
    priority class is missing, and for a Pod or StatefulSet that names a queue while
    its integration is off (`integrations`)."""
    if isinstance(obj, WORKLOAD_SOURCES):
        if not makes_workload(obj):
            return None
        return source_workload(
            fill_metadata(obj, first_seen),
            workload_priority_classes,
            priority_classes,
            integrations=integrations,
        )
    if isinstance(obj, Workload):
        return fill_metadata(obj, first_seen)
    return obj


class FirstSight:
    """Real-clock instants at which objects were first seen, spaced so that objects
    seen together keep their document order, and strictly increasing overall."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._last: Instant | None = None
        self._seen: dict[ObjectKey, Instant] = {}

    def of(self, key: ObjectKey) -> Instant:
        found = self._seen.get(key)
        if found is not None:
            return found
        now = self._clock.now()
        stamp = now if self._last is None else max(now, self._last + STAMP_SPACING)
        self._last = stamp
        self._seen[key] = stamp
        return stamp

    def retain(self, keys: Iterable[ObjectKey]) -> None:
        """Forget every object not in `keys`: one that is gone and comes back later is
        a new object, with a new time."""
        keep = set(keys)
        for key in [k for k in self._seen if k not in keep]:
            del self._seen[key]
