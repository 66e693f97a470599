"""The visibility server's view of the runtime's lookups, shared by both serve modes."""

from __future__ import annotations

from scheduler.runtime.engine import Engine
from scheduler.runtime.standing import standing
from visibility_server.http.position import NotPending, NotPendingLookup, NotPendingReason


def not_pending_lookup(engine: Engine) -> NotPendingLookup:
    """Classify a Workload the snapshot does not list as pending, from the engine's core
    (docs/visibility-api.md#pending-position): the same answer in both modes."""

    def lookup(namespace: str, name: str) -> NotPending | None:
        found = standing(engine.scheduler, namespace, name)
        if found is None:
            return None
        return NotPending(
            NotPendingReason(found.reason),
            creation=found.creation,
            cluster_queue=found.cluster_queue,
            local_queue=found.local_queue,
            why=found.why,
        )

    return lookup
