"""The read model: the immutable snapshot of pending work the visibility server reads (KEP-168).

The runtime publishes a :class:`Snapshot` after each batch of changes; a request reads
the snapshot reference once and uses nothing else, so every answer comes from one
consistent state. Nothing in it is ever mutated after publication. Its parts live in
modules of their own: the per-workload records (:mod:`scheduler.runtime.workload_records`),
the chunked views of each ClusterQueue's pending order (:mod:`scheduler.runtime.pages`),
the quota forest (:mod:`scheduler.runtime.quota_snapshot`) and the admission velocities
behind the wait estimates (:mod:`scheduler.runtime.estimates`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from scheduler.forecast.fork import Setup
from scheduler.runtime.estimates import AdmissionVelocity
from scheduler.runtime.pages import ClusterQueueView, PageItem
from scheduler.runtime.quota_snapshot import EMPTY_QUOTA, QuotaSnapshot
from scheduler.runtime.workload_records import (
    FinishedWorkload,
    LocalQueueKey,
    RunningWorkload,
    WorkloadKey,
)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything a request may read, at one instant. Publish a new one; never mutate."""

    generation: int
    synced: bool
    views: Mapping[str, ClusterQueueView]
    # (namespace, LocalQueue name) -> its ClusterQueue name ("" when the CQ does not exist)
    local_queues: Mapping[LocalQueueKey, str]
    # pending workload -> the ClusterQueue whose view lists it
    workloads: Mapping[WorkloadKey, str]
    # The cohort forest with quota and usage, and each ClusterQueue's admission rate:
    # what the dashboard and the wait estimates read.
    quota: QuotaSnapshot = EMPTY_QUOTA
    velocities: Mapping[str, AdmissionVelocity] = field(
        default_factory=lambda: MappingProxyType({})
    )
    # What the forecast worker runs the core forward from, besides the pending entries'
    # facts (docs/forecasting.md#what-the-worker-is-fed): the configuration, the quota
    # holders, and the latest finishes (the last FINISHED_KEPT, oldest first). Each is
    # the previous snapshot's own object when it did not change.
    setup: Setup | None = None
    running: tuple[RunningWorkload, ...] = ()
    finished: tuple[FinishedWorkload, ...] = ()

    def view(self, cluster_queue: str) -> ClusterQueueView | None:
        return self.views.get(cluster_queue)

    def local_queue_view(self, namespace: str, name: str) -> tuple[bool, ClusterQueueView | None]:
        """(LocalQueue exists, the view of its ClusterQueue if that exists)."""
        cq = self.local_queues.get((namespace, name))
        if cq is None:
            return False, None
        return True, self.views.get(cq)

    def locate(self, namespace: str, name: str) -> PageItem | None:
        cq = self.workloads.get((namespace, name))
        view = self.views.get(cq) if cq is not None else None
        return None if view is None else view.position_of(namespace, name)


EMPTY_SNAPSHOT = Snapshot(
    generation=0,
    synced=False,
    views=MappingProxyType({}),
    local_queues=MappingProxyType({}),
    workloads=MappingProxyType({}),
)
