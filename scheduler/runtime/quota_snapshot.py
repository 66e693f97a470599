"""The cohort forest with quotas and usage, as a snapshot carries it (the dashboard reads it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ResourceUsage:
    """One (flavor, resource) of a ClusterQueue or Cohort, in scheduler values (cpu in
    milli-units, everything else in base units).

    For a ClusterQueue `usage` is the quota its workloads hold and `subtree_quota`
    equals `nominal`. For a Cohort, `subtree_quota` is what the cohort's subtree offers
    to its members (its own nominal quota plus what its children lend) and `usage` is
    what members use of that shared part (docs/scheduling.md#per-node-quantities's SQ and U).
    """

    flavor: str
    resource: str
    nominal: int
    usage: int
    subtree_quota: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None

    @property
    def borrowed(self) -> int:
        """Quota used above the node's own nominal quota (ClusterQueues)."""
        return max(0, self.usage - self.nominal)

    @property
    def lendable(self) -> int:
        """Unused nominal quota that the cohort may use: capped by the lending limit."""
        idle = max(0, self.nominal - self.usage)
        return idle if self.lending_limit is None else min(idle, self.lending_limit)


@dataclass(frozen=True, slots=True)
class ClusterQueueQuota:
    name: str
    cohort: str  # "" without one
    active: bool
    inactive_reasons: tuple[str, ...]
    strategy: str
    reserving: int  # workloads holding quota
    resources: tuple[ResourceUsage, ...]  # in resource-group then flavor order


@dataclass(frozen=True, slots=True)
class CohortQuota:
    name: str
    parent: str  # "" for a root
    resources: tuple[ResourceUsage, ...]  # by (flavor, resource)


@dataclass(frozen=True, slots=True)
class QuotaSnapshot:
    """The cohort forest with quotas and usage, captured with the pending views."""

    cluster_queues: tuple[ClusterQueueQuota, ...] = ()  # by name
    cohorts: tuple[CohortQuota, ...] = ()  # by name

    def cluster_queue(self, name: str) -> ClusterQueueQuota | None:
        return next((cq for cq in self.cluster_queues if cq.name == name), None)


EMPTY_QUOTA = QuotaSnapshot()
