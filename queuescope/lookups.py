"""The visibility server's view of the runtime's lookups, shared by both serve modes."""

from __future__ import annotations

from scheduler.runtime.engine import Engine
from scheduler.runtime.standing import standing
from scheduler.runtime.workload_records import NotPending
from visibility_server.http.position import NotPendingLookup


def not_pending_lookup(engine: Engine) -> NotPendingLookup:
    """Classify a Workload the snapshot does not list as pending, from the engine's core
    (docs/visibility-api.md#pending-position): the same answer in both modes."""

    def lookup(namespace: str, name: str) -> NotPending | None:
        return standing(engine.scheduler, namespace, name)

    return lookup
