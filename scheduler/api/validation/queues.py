"""ClusterQueue, Cohort and LocalQueue rules (docs/scheduling.md#api-objects)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from scheduler.api.clusterqueue import ClusterQueue, FlavorFungibility
from scheduler.api.cohort import Cohort
from scheduler.api.errors import FieldError
from scheduler.api.localqueue import LocalQueue
from scheduler.api.quantity import Quantity
from scheduler.api.quota import FairSharing, ResourceGroup, ResourceQuota
from scheduler.api.validation.common import (
    at_most,
    duplicate,
    invalid,
    item_count,
    quantity,
    resource_name,
    subdomain,
)
from scheduler.api.validation.paths import child, index
from scheduler.api.validation.selector import validate_label_selector

MAX_RESOURCE_GROUPS = 16
MAX_COVERED_RESOURCES = 16
MAX_FLAVORS = 16
MAX_RESOURCES = 16
_MIN_POSITIVE_WEIGHT = Fraction(1, 10**9)


def validate_resource_groups(
    path: str,
    groups: Sequence[ResourceGroup],
    *,
    parent_field: str,
    has_parent: bool,
    lending_within_nominal: bool,
) -> list[FieldError]:
    """Shared by ClusterQueues (`parent_field="cohort"`) and Cohorts (`"parent"`)."""
    errors = at_most(path, groups, MAX_RESOURCE_GROUPS)
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    limits = _LimitRules(
        has_parent, f"must be nil when {parent_field} is empty", lending_within_nominal
    )
    for g, group in enumerate(groups):
        group_path = index(path, g)
        covered_path = child(group_path, "coveredResources")
        errors += item_count(covered_path, group.covered_resources, 1, MAX_COVERED_RESOURCES)
        for r, name in enumerate(group.covered_resources):
            errors += resource_name(index(covered_path, r), name)
            if name in seen_resources:
                errors.append(duplicate(index(covered_path, r), name))
            seen_resources.add(name)
        flavors_path = child(group_path, "flavors")
        errors += item_count(flavors_path, group.flavors, 1, MAX_FLAVORS)
        for f, flavor in enumerate(group.flavors):
            flavor_path = index(flavors_path, f)
            errors += subdomain(child(flavor_path, "name"), flavor.name)
            if flavor.name in seen_flavors:
                errors.append(duplicate(child(flavor_path, "name"), flavor.name))
            seen_flavors.add(flavor.name)
            resources_path = child(flavor_path, "resources")
            errors += item_count(resources_path, flavor.resources, 1, MAX_RESOURCES)
            if len(flavor.resources) != len(group.covered_resources):
                errors.append(
                    FieldError(
                        resources_path,
                        "must have the same number of resources as the coveredResources",
                    )
                )
            for r, quota in enumerate(flavor.resources):
                quota_path = index(resources_path, r)
                if r < len(group.covered_resources) and quota.name != group.covered_resources[r]:
                    errors.append(
                        invalid(
                            child(quota_path, "name"),
                            quota.name,
                            "must match the name in coveredResources "
                            f'("{group.covered_resources[r]}")',
                        )
                    )
                errors += quantity(
                    child(quota_path, "nominalQuota"), quota.name, quota.nominal_quota
                )
                errors += _limit_errors(quota_path, quota, limits)
    return errors


@dataclass(frozen=True)
class _LimitRules:
    """What the borrowing and lending limits of a quota must respect."""

    has_parent: bool
    without_parent: str  # the message when a limit is set without a parent
    lending_within_nominal: bool


def _limit_errors(quota_path: str, quota: ResourceQuota, rules: _LimitRules) -> list[FieldError]:
    errors: list[FieldError] = []
    if quota.borrowing_limit is not None:
        limit_path = child(quota_path, "borrowingLimit")
        if not rules.has_parent:
            errors.append(FieldError(limit_path, rules.without_parent))
        errors += quantity(limit_path, quota.name, quota.borrowing_limit)
    if quota.lending_limit is not None:
        limit_path = child(quota_path, "lendingLimit")
        if not rules.has_parent:
            errors.append(FieldError(limit_path, rules.without_parent))
        errors += quantity(limit_path, quota.name, quota.lending_limit)
        if rules.lending_within_nominal and quota.lending_limit > quota.nominal_quota:
            errors.append(FieldError(limit_path, "must be less than or equal to the nominalQuota"))
    return errors


def validate_weight(path: str, fair_sharing: FairSharing) -> list[FieldError]:
    weight: Quantity = fair_sharing.weight
    if weight.value < 0:
        return [invalid(path, str(weight), "must be greater than or equal to 0")]
    if weight.value != 0 and weight.value <= _MIN_POSITIVE_WEIGHT:
        return [invalid(path, str(weight), "must be 0 or greater than 1n (0.000000001)")]
    return []


def validate_fungibility(fungibility: FlavorFungibility) -> list[FieldError]:
    if fungibility.preference is not None and not (
        fungibility.when_can_borrow == "TryNextFlavor"
        and fungibility.when_can_preempt == "TryNextFlavor"
    ):
        return [
            FieldError(
                "spec.flavorFungibility",
                "preference can only be set when both whenCanBorrow and whenCanPreempt "
                "are TryNextFlavor",
            )
        ]
    return []


def _parent_and_groups(
    parent_path: str,
    parent: str,
    groups: Sequence[ResourceGroup],
    *,
    parent_field: str,
    lending_within_nominal: bool,
) -> list[FieldError]:
    """The parent's name (a ClusterQueue's cohort, a Cohort's parent) and the resource
    groups whose limits depend on having one."""
    errors = subdomain(parent_path, parent) if parent else []
    errors += validate_resource_groups(
        "spec.resourceGroups",
        groups,
        parent_field=parent_field,
        has_parent=bool(parent),
        lending_within_nominal=lending_within_nominal,
    )
    return errors


def validate_cluster_queue(cq: ClusterQueue) -> list[FieldError]:
    spec = cq.spec
    errors = _parent_and_groups(
        "spec.cohort",
        spec.cohort,
        spec.resource_groups,
        parent_field="cohort",
        lending_within_nominal=True,
    )
    errors += validate_label_selector("spec.namespaceSelector", spec.namespace_selector)
    preemption = spec.preemption
    if (
        preemption.reclaim_within_cohort == "Never"
        and preemption.borrow_within_cohort.policy != "Never"
    ):
        errors.append(
            FieldError(
                "spec.preemption", "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"
            )
        )
    errors += validate_fungibility(spec.flavor_fungibility)
    errors += validate_weight("spec.fairSharing.weight", spec.fair_sharing)
    strategy = spec.admission_checks_strategy
    if spec.admission_checks and strategy is not None:
        errors.append(
            FieldError(
                "spec", "Either AdmissionChecks or AdmissionCheckStrategy can be set, but not both"
            )
        )
    for i, check in enumerate(spec.admission_checks):
        errors += subdomain(index("spec.admissionChecks", i), check)
    if strategy is not None:
        for i, rule in enumerate(strategy.admission_checks):
            errors += subdomain(
                f"spec.admissionChecksStrategy.admissionChecks[{i}].name", rule.name
            )
    return errors


def validate_cohort(cohort: Cohort) -> list[FieldError]:
    spec = cohort.spec
    # The parent field has a different JSON name in each version.
    parent_path = "spec.parent" if cohort.api_version.endswith("v1alpha1") else "spec.parentName"
    errors = _parent_and_groups(
        parent_path,
        spec.parent,
        spec.resource_groups,
        parent_field="parent",
        lending_within_nominal=False,
    )
    errors += validate_weight("spec.fairSharing.weight", spec.fair_sharing)
    return errors


def validate_local_queue(queue: LocalQueue) -> list[FieldError]:
    if queue.spec.cluster_queue:
        return subdomain("spec.clusterQueue", queue.spec.cluster_queue)
    return []
