"""Quota declarations shared by ClusterQueues and Cohorts (docs/scheduling.md#clusterqueue,
#cohort)."""

from __future__ import annotations

from pydantic import Field

from scheduler.api.base import ApiModel
from scheduler.api.quantity import Quantity, QuantityField


class ResourceQuota(ApiModel):
    name: str
    nominal_quota: QuantityField
    borrowing_limit: QuantityField | None = None  # None: unlimited
    lending_limit: QuantityField | None = None  # None: lend everything


class FlavorQuotas(ApiModel):
    name: str
    resources: list[ResourceQuota]


class ResourceGroup(ApiModel):
    covered_resources: list[str]
    # Spec order is the order in which flavors are tried.
    flavors: list[FlavorQuotas]


def _default_weight() -> Quantity:
    return Quantity(1)


class FairSharing(ApiModel):
    weight: QuantityField = Field(default_factory=_default_weight)
