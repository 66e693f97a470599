"""What the runtime asks the engine to do: object changes and job-integration signals.

Commands are plain immutable records queued on the engine and applied, in order, on
the engine's loop between scheduling cycles, so the core never sees two writers.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, TypeAlias


@dataclass(frozen=True, slots=True)
class ApplyObject:
    """Create or update an object (Namespace, ResourceFlavor, Cohort, ClusterQueue,
    LocalQueue, Workload); a Workload's status, if it carries none, stays the core's.

    `keep_status`: a known Workload keeps the core's status whatever the object says.
    The scheduling leader sets it for watch events: what the server holds is what it
    wrote itself, possibly older than what it has decided since."""

    obj: Any
    keep_status: bool = False


@dataclass(frozen=True, slots=True)
class DeleteObject:
    kind: str
    namespace: str | None
    name: str


@dataclass(frozen=True, slots=True)
class Finish:
    """The workload's job finished (docs/scheduling.md#finishing-and-deletion)."""

    key: str  # namespace/name
    failed: bool = False
    # The Finished condition's reason and message; "" for the Job integration's
    # (Succeeded / Failed with their messages).
    reason: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True)
class PodsReady:
    """All pods of the workload are ready (docs/scheduling.md#podsready-condition)."""

    key: str


@dataclass(frozen=True, slots=True)
class SetReclaimable:
    """How many pods of each pod set ended and no longer need their quota
    (`status.reclaimablePods`; a pod group's succeeded Pods, docs/cluster.md#pod-groups)."""

    key: str
    counts: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class SetWaitingForReplacements:
    """A pod group misses Pods, or is whole again (docs/cluster.md#pod-groups)."""

    key: str
    waiting: bool


@dataclass(frozen=True, slots=True)
class SetOnHold:
    """The owner holds the workload (`message` says why) or lets it go again (None):
    a StatefulSet scaled to zero and back (docs/cluster.md#statefulsets)."""

    key: str
    message: str | None


@dataclass(frozen=True, slots=True)
class SetActive:
    """`spec.active` changed: False deactivates (docs/scheduling.md#deactivation), True
    reactivates."""

    key: str
    active: bool


@dataclass(frozen=True, slots=True)
class MarkSynced:
    """Everything of the initial load was submitted before this: the snapshot may now
    say `synced` (the server answers 503 until then)."""


@dataclass(frozen=True, slots=True)
class Barrier:
    """Resolved once every command submitted before it has been applied."""

    done: asyncio.Future[None]


Command: TypeAlias = (
    ApplyObject
    | DeleteObject
    | Finish
    | PodsReady
    | SetReclaimable
    | SetWaitingForReplacements
    | SetOnHold
    | SetActive
    | MarkSynced
    | Barrier
)
