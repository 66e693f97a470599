"""Is a Workload still in use (it exists and is not on hold)? Read from the published
snapshot, for the StatefulSet rule that refuses a scale-up from zero while the Workload
of the previous scale-down is still there (docs/cluster.md#statefulsets).

Kueue reads the Workload from its cache and asks whether it is on hold (`QuotaReserved`
False for `OnHold`). The snapshot holds the Workloads the core knows, pending or holding
quota: those are in use. One it does not list (finished, or gone) is not. As for the
`default` LocalQueue (`default_queue.py`), the answer is as fresh as the last snapshot,
and before the initial sync it is `NotSyncedError` (a 503) rather than a guess.
"""

from __future__ import annotations

from scheduler.api.statefulset_admission import WorkloadInUse
from scheduler.runtime.snapshot import Snapshot
from visibility_server.webhooks.default_queue import NotSyncedError


def workload_in_use_lookup(snapshot: Snapshot) -> WorkloadInUse:
    """A lookup over one snapshot (immutable, so safe to read from a worker thread)."""

    def in_use(namespace: str, name: str) -> bool:
        if not snapshot.synced:
            raise NotSyncedError("the Workloads are not synced yet")
        if (namespace, name) in snapshot.workloads:
            return True  # pending
        return any(w.namespace == namespace and w.name == name for w in snapshot.running)

    return in_use
