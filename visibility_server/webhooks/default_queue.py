"""Does a namespace have a LocalQueue named `default`? Read from the published snapshot.

The answer is as fresh as the last snapshot (milliseconds behind the store), as Kueue's
webhook reads its informer cache. Before the initial sync the snapshot does not know:
`NotSyncedError`, which the webhook answers 503 so that kube-apiserver applies the
webhook's failurePolicy rather than a guess.
"""

from __future__ import annotations

from collections.abc import Callable

from scheduler.api.job_defaulting import DEFAULT_LOCAL_QUEUE
from scheduler.runtime.snapshot import Snapshot

DefaultQueueLookup = Callable[[str], bool]


class NotSyncedError(Exception):
    """The server has not read the cluster's LocalQueues yet."""


def default_queue_lookup(snapshot: Snapshot) -> DefaultQueueLookup:
    """A lookup over one snapshot (immutable, so safe to read from a worker thread)."""

    def exists(namespace: str) -> bool:
        if not snapshot.synced:
            raise NotSyncedError("the LocalQueues are not synced yet")
        return (namespace, DEFAULT_LOCAL_QUEUE) in snapshot.local_queues

    return exists
