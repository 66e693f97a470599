"""ClusterQueue (`kueue.x-k8s.io/v1beta1`, cluster-scoped, docs/scheduling.md#clusterqueue).

Every optional sub-object that Kueue defaults (`flavorFungibility`, `preemption`,
`borrowWithinCohort`, `fairSharing`) is always present here with its defaults, so
the core reads policies without None checks.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from scheduler.api.base import ApiModel, Int32
from scheduler.api.meta import KueueV1Beta1Object
from scheduler.api.quota import FairSharing, ResourceGroup

QueueingStrategy = Literal["StrictFIFO", "BestEffortFIFO"]
StopPolicy = Literal["None", "Hold", "HoldAndDrain"]
WithinClusterQueuePolicy = Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"]
ReclaimWithinCohortPolicy = Literal["Never", "LowerPriority", "Any"]
BorrowWithinCohortPolicyName = Literal["Never", "LowerPriority"]


# `MayStopSearch` is Kueue's current name for "stop at this flavor"; v1beta1 also keeps
# the older `Borrow` / `Preempt` (docs/api-versions.md). The core only tells
# TryNextFlavor from the rest.
WhenCanBorrow = Literal["MayStopSearch", "TryNextFlavor", "Borrow"]
WhenCanPreempt = Literal["MayStopSearch", "TryNextFlavor", "Preempt"]
FlavorFungibilityPreference = Literal["BorrowingOverPreemption", "PreemptionOverBorrowing"]


class FlavorFungibility(ApiModel):
    # Kueue v0.19's v1beta1 defaults whenCanBorrow to MayStopSearch; queuescope keeps
    # printing `Borrow`, the same behaviour, so v1beta1 output stays as it was.
    when_can_borrow: WhenCanBorrow = "Borrow"
    when_can_preempt: WhenCanPreempt = "TryNextFlavor"
    # Only with both policies TryNextFlavor: which flavor wins (docs/api-versions.md).
    preference: FlavorFungibilityPreference | None = None


class BorrowWithinCohort(ApiModel):
    policy: BorrowWithinCohortPolicyName = "Never"
    max_priority_threshold: Int32 | None = None


class ClusterQueuePreemption(ApiModel):
    within_cluster_queue: WithinClusterQueuePolicy = "Never"
    reclaim_within_cohort: ReclaimWithinCohortPolicy = "Never"
    borrow_within_cohort: BorrowWithinCohort = Field(default_factory=BorrowWithinCohort)


class AdmissionCheckStrategyRule(ApiModel):
    name: str
    on_flavors: list[str] = Field(default_factory=list)


class AdmissionChecksStrategy(ApiModel):
    admission_checks: list[AdmissionCheckStrategyRule] = Field(default_factory=list)


class AdmissionScope(ApiModel):
    """Accepted, ignored: Admission Fair Sharing is off (docs/scheduling.md#out-of-scope); only the
    enum is checked."""

    admission_mode: Literal["UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing"]


class ClusterQueueSpec(ApiModel):
    resource_groups: list[ResourceGroup] = Field(default_factory=list)
    cohort: str = ""
    queueing_strategy: QueueingStrategy = "BestEffortFIFO"
    # Raw LabelSelector. None (omitted) matches no namespace; {} matches all.
    namespace_selector: dict[str, Any] | None = None
    flavor_fungibility: FlavorFungibility = Field(default_factory=FlavorFungibility)
    preemption: ClusterQueuePreemption = Field(default_factory=ClusterQueuePreemption)
    admission_checks: list[str] = Field(default_factory=list)
    admission_checks_strategy: AdmissionChecksStrategy | None = None
    stop_policy: StopPolicy = "None"
    fair_sharing: FairSharing = Field(default_factory=FairSharing)
    admission_scope: AdmissionScope | None = None


class ClusterQueue(KueueV1Beta1Object):
    kind: Literal["ClusterQueue"] = "ClusterQueue"
    spec: ClusterQueueSpec = Field(default_factory=ClusterQueueSpec)
    # Accepted so that `kubectl get -o yaml` output can be fed back; the core recomputes it.
    status: dict[str, Any] | None = None

    @property
    def admission_check_names(self) -> list[str]:
        """Every admission check named, directly or through the strategy, in spec order."""
        names = list(self.spec.admission_checks)
        strategy = self.spec.admission_checks_strategy
        if strategy is not None:
            names.extend(rule.name for rule in strategy.admission_checks if rule.name not in names)
        return names
