"""Plain, immutable views of the configured objects, as the core uses them.

Built once per spec change from the API objects, so the hot paths read plain
attributes instead of walking pydantic models.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scheduler.core.quota import ResourceQuota
from scheduler.core.resources import FlavorResource


@dataclass(frozen=True, slots=True)
class ResourceGroupInfo:
    covered: tuple[str, ...]
    flavors: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FlavorInfo:
    name: str
    node_labels: dict[str, str]
    taints: tuple[dict[str, Any], ...]
    tolerations: tuple[dict[str, Any], ...]


@dataclass(frozen=True, slots=True)
class PreemptionPolicy:
    within_cluster_queue: str = "Never"
    reclaim_within_cohort: str = "Never"
    borrow_within_cohort: str = "Never"
    max_priority_threshold: int | None = None


@dataclass(frozen=True, slots=True)
class ClusterQueueInfo:
    name: str
    cohort: str | None
    groups: tuple[ResourceGroupInfo, ...]
    quotas: dict[FlavorResource, ResourceQuota]
    strategy: str = "BestEffortFIFO"
    queue_plugin: str | None = None
    namespace_selector: dict[str, Any] | None = None
    when_can_borrow: str = "Borrow"
    when_can_preempt: str = "TryNextFlavor"
    # flavorFungibility.preference: None behaves as BorrowingOverPreemption.
    fungibility_preference: str | None = None
    preemption: PreemptionPolicy = field(default_factory=PreemptionPolicy)
    stop_policy: str = "None"
    weight: float = 1.0
    # Every check the queue names, in spec order, and the flavors each applies to
    # (empty: every flavor of the queue).
    admission_checks: tuple[str, ...] = ()
    check_flavors: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def group_for(self, resource: str) -> ResourceGroupInfo | None:
        for group in self.groups:
            if resource in group.covered:
                return group
        return None

    @property
    def covers_pods(self) -> bool:
        return self.group_for("pods") is not None

    def flavor_names(self) -> list[str]:
        return [f for g in self.groups for f in g.flavors]


@dataclass(frozen=True, slots=True)
class AdmissionCheckInfo:
    """An AdmissionCheck as the core needs it: whether its controller reports Active."""

    name: str
    controller: str
    active: bool


@dataclass(frozen=True, slots=True)
class LocalQueueInfo:
    namespace: str
    name: str
    cluster_queue: str
    stop_policy: str = "None"

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"
