"""The metadata defaults a Workload or Job gets when its manifest leaves them out.

The simulator and the embedded runtime both accept manifests without a uid, a
namespace or a creationTimestamp: the uid is a UUID-5 of ``namespace/name`` (so a
replay gives the same uids every time), the namespace ``default``, and the creation
time the instant the caller says the object was first seen.
"""

from __future__ import annotations

import uuid
from typing import Any

from scheduler.core.clock import Instant, datetime_from_instant

UID_NAMESPACE = uuid.UUID("6f1f8e8e-3b7a-4c1e-9a43-0d7c55c1a001")


def deterministic_uid(namespace: str, name: str) -> str:
    return str(uuid.uuid5(UID_NAMESPACE, f"{namespace}/{name}"))


def fill_metadata(obj: Any, first_seen: Instant) -> Any:
    """`obj` (a Workload or Job) with the missing defaults filled; itself if none is."""
    meta = obj.metadata
    updates: dict[str, Any] = {}
    namespace = meta.namespace or "default"
    if meta.namespace is None:
        updates["namespace"] = namespace
    if not meta.uid:
        updates["uid"] = deterministic_uid(namespace, meta.name)
    if meta.creation_timestamp is None:
        updates["creation_timestamp"] = datetime_from_instant(first_seen)
    if not updates:
        return obj
    return obj.model_copy(update={"metadata": meta.model_copy(update=updates)})
