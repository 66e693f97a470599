"""Configuration rules (docs/scheduling.md#configuration)."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.api.config import IGNORE_UNDECLARED, Configuration, ResourceTransformationConfig
from scheduler.api.config_v1beta2 import ConfigurationV1Beta2
from scheduler.api.durations import format_duration
from scheduler.api.errors import FieldError
from scheduler.api.transformations import STRATEGIES
from scheduler.api.validation.common import at_least, invalid, required

MAX_VISIBILITY_COUNT = 4000
_ALLOWED_STRATEGIES = (
    ["LessThanOrEqualToFinalShare"],
    ["LessThanInitialShare"],
    ["LessThanOrEqualToFinalShare", "LessThanInitialShare"],
)


def validate_configuration(config: Configuration) -> list[FieldError]:
    errors: list[FieldError] = []
    wait = config.wait_for_pods_ready
    # Upstream validates these sub-fields only when the feature is on.
    if config.waits_for_pods_ready:
        path = "waitForPodsReady"
        errors += _not_negative(f"{path}.timeout", wait.timeout)
        errors += _not_negative(f"{path}.recoveryTimeout", wait.recovery_timeout)
        strategy = wait.requeuing_strategy
        errors += at_least(
            f"{path}.requeuingStrategy.backoffLimitCount", strategy.backoff_limit_count, 0
        )
        errors += at_least(
            f"{path}.requeuingStrategy.backoffBaseSeconds", strategy.backoff_base_seconds, 0
        )
        errors += at_least(
            f"{path}.requeuingStrategy.backoffMaxSeconds", strategy.backoff_max_seconds, 0
        )
    visibility = config.queue_visibility
    if visibility is not None:
        path = "queueVisibility"
        errors += at_least(f"{path}.updateIntervalSeconds", visibility.update_interval_seconds, 1)
        errors += _count(f"{path}.clusterQueues.maxCount", visibility.cluster_queues.max_count)
        local = visibility.local_queues
        if local is not None:
            errors += _count(f"{path}.localQueues.maxCount", local.max_count)
            errors += at_least(f"{path}.localQueues.maxPosition", local.max_position, 0)
    strategies = list(config.fair_sharing.preemption_strategies)
    if strategies and strategies not in _ALLOWED_STRATEGIES:
        errors.append(
            invalid(
                "fairSharing.preemptionStrategies",
                ", ".join(strategies),
                "must be [LessThanOrEqualToFinalShare], [LessThanInitialShare], or "
                "[LessThanOrEqualToFinalShare, LessThanInitialShare]",
            )
        )
    errors += _transformation_errors(config.resources.transformations)
    if config.resources.device_class_mappings:
        errors.append(
            FieldError(
                "resources.deviceClassMappings",
                "not supported: dynamic resource allocation is not implemented by queuescope",
            )
        )
    resources = config.resources
    if resources.quota_check_strategy == IGNORE_UNDECLARED and resources.exclude_resource_prefixes:
        errors.append(
            invalid(
                "resources.quotaCheckStrategy",
                IGNORE_UNDECLARED,
                "excludeResourcePrefixes is not allowed when quotaCheckStrategy is "
                "IgnoreUndeclared",
            )
        )
    for i, prefix in enumerate(config.resources.exclude_resource_prefixes):
        if not prefix:
            errors.append(
                invalid(f"resources.excludeResourcePrefixes[{i}]", prefix, "must be non-empty")
            )
    retention = config.object_retention_policies
    if retention is not None and retention.workloads is not None:
        path = "objectRetentionPolicies.workloads"
        errors += _not_negative(f"{path}.afterFinished", retention.workloads.after_finished)
        errors += _not_negative(
            f"{path}.afterDeactivatedByKueue", retention.workloads.after_deactivated_by_kueue
        )
    return errors


def _not_negative(path: str, micros: int | None) -> list[FieldError]:
    """A Go duration that must not be negative, printed as upstream prints it."""
    if micros is not None and micros < 0:
        return [invalid(path, format_duration(micros), "must be greater than or equal to 0")]
    return []


def _count(path: str, value: int) -> list[FieldError]:
    if value > MAX_VISIBILITY_COUNT:
        return [invalid(path, value, f"must be less than or equal to {MAX_VISIBILITY_COUNT}")]
    return at_least(path, value, 0)


def validate_configuration_v1beta2(obj: object) -> list[FieldError]:
    """The rules the internal form cannot see; the shared ones run on it afterwards."""
    if not isinstance(obj, ConfigurationV1Beta2):
        return []
    errors: list[FieldError] = []
    if obj.fair_sharing is not None and not obj.fair_sharing.preemption_strategies:
        errors.append(required("fairSharing.preemptionStrategies", "must be specified"))
    return errors


def _transformation_errors(
    transformations: Sequence[ResourceTransformationConfig],
) -> list[FieldError]:
    """Kueue's rules: a strategy Kueue knows, each input once."""
    errors: list[FieldError] = []
    seen: set[str] = set()
    for i, transformation in enumerate(transformations):
        path = f"resources.transformations[{i}]"
        if transformation.strategy not in STRATEGIES:
            supported = ", ".join(f'"{s}"' for s in STRATEGIES)
            problem = f'Unsupported value: "{transformation.strategy}"'
            errors.append(
                FieldError(f"{path}.strategy", f"{problem}: supported values: {supported}")
            )
        if transformation.input in seen:
            errors.append(FieldError(f"{path}.input", f'Duplicate value: "{transformation.input}"'))
        seen.add(transformation.input)
    return errors
