"""The priority classes a new Workload's priority resolves with, decoded from the store
(docs/scheduling.md#priority-resolution): both integrations and the what-if dry run."""

from __future__ import annotations

from typing import Any, Final

from scheduler.api import PriorityClass, WorkloadPriorityClass
from scheduler.api.decode import ApiError
from scheduler.api.live import decode_live
from scheduler.runtime.kube.resources import PRIORITY_CLASSES, WORKLOAD_PRIORITY_CLASSES, Resource
from scheduler.runtime.kube.store import KubeStore

PriorityClasses = tuple[dict[str, WorkloadPriorityClass], dict[str, PriorityClass]]
# The kinds whose arrival may let an object that waits for its class have a Workload.
PRIORITY_KINDS: Final = frozenset((WORKLOAD_PRIORITY_CLASSES.kind, PRIORITY_CLASSES.kind))


def _decoded(store: KubeStore, resource: Resource, model: type[Any]) -> dict[str, Any]:
    """Name -> object; one that does not decode is left out (the store reports it)."""
    out: dict[str, Any] = {}
    for raw in store.items(resource):
        try:
            obj = decode_live(raw, source=resource.plural)
        except ApiError:
            continue
        if isinstance(obj, model):
            out[obj.metadata.name] = obj
    return out


def priority_classes(store: KubeStore) -> PriorityClasses:
    """(WorkloadPriorityClasses, PriorityClasses) by name."""
    return (
        _decoded(store, WORKLOAD_PRIORITY_CLASSES, WorkloadPriorityClass),
        _decoded(store, PRIORITY_CLASSES, PriorityClass),
    )
