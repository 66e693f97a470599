"""Cohort (cluster-scoped, docs/scheduling.md#cohort), in its two accepted API versions.

`kueue.x-k8s.io/v1beta1` names the parent `spec.parentName`, `v1alpha1` names it
`spec.parent`. Both decode to `Cohort` with `spec.parent`; `CohortV1Alpha1` is a
subclass that only swaps the JSON name, so the other version's field name stays an
unknown field (rejected) and output echoes the version the user wrote.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field

from scheduler.api.base import ApiModel
from scheduler.api.meta import KubeObject
from scheduler.api.quota import FairSharing, ResourceGroup

COHORT_V1BETA1: Final = "kueue.x-k8s.io/v1beta1"
COHORT_V1ALPHA1: Final = "kueue.x-k8s.io/v1alpha1"


class CohortSpec(ApiModel):
    parent: str = Field(default="", alias="parentName")  # "" = a root cohort
    resource_groups: list[ResourceGroup] = Field(default_factory=list)
    fair_sharing: FairSharing = Field(default_factory=FairSharing)


class CohortSpecV1Alpha1(CohortSpec):
    parent: str = Field(default="", alias="parent")


class Cohort(KubeObject):
    api_version: Literal["kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1alpha1"] = COHORT_V1BETA1
    kind: Literal["Cohort"] = "Cohort"
    spec: CohortSpec = Field(default_factory=CohortSpec)
    status: dict[str, Any] | None = None


class CohortV1Alpha1(Cohort):
    api_version: Literal["kueue.x-k8s.io/v1alpha1"] = COHORT_V1ALPHA1
    spec: CohortSpecV1Alpha1 = Field(default_factory=CohortSpecV1Alpha1)
