"""Kueue's Configuration (`config.kueue.x-k8s.io/v1beta1`, docs/scheduling.md#configuration).

This v1beta1 model is the internal form: `config_v1beta2.py` reads a v1beta2 document
into it. Defaults are applied here, so the core reads plain values. Two of them depend
on presence rather than on a value, as upstream: `waitForPodsReady.blockAdmission`
defaults to `enable`, and `queueVisibility.clusterQueues` omitted means `maxCount: 10`
while `clusterQueues: {}` means 0 (and `queueVisibility` itself being present is what
switches the feature on, deviation D7).
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field, model_validator

from scheduler.api.base import ApiModel, DurationMicros, Int32, TypedObject
from scheduler.api.quantity import QuantityField
from scheduler.api.transformations import RETAIN

CONFIG_V1BETA1: Final = "config.kueue.x-k8s.io/v1beta1"
QuotaCheckStrategy = Literal["BlockUndeclared", "IgnoreUndeclared"]
BLOCK_UNDECLARED: Final = "BlockUndeclared"
IGNORE_UNDECLARED: Final = "IgnoreUndeclared"
PreemptionStrategy = Literal["LessThanOrEqualToFinalShare", "LessThanInitialShare"]
DEFAULT_PREEMPTION_STRATEGIES: tuple[PreemptionStrategy, ...] = (
    "LessThanOrEqualToFinalShare",
    "LessThanInitialShare",
)
DEFAULT_PODS_READY_TIMEOUT_MICROS = 5 * 60 * 1_000_000
# Kueue's gate that turns waitForPodsReady off whatever the Configuration says.
DISABLE_WAIT_FOR_PODS_READY = "DisableWaitForPodsReady"


def _default_when_absent(data: Any, key: str, snake: str, value: Any) -> Any:
    """Fill a presence-dependent default into raw input (either JSON or Python name)."""
    if isinstance(data, dict) and key not in data and snake not in data:
        return {**data, key: value}
    return data


class RequeuingStrategy(ApiModel):
    timestamp: Literal["Eviction", "Creation"] = "Eviction"
    backoff_limit_count: Int32 | None = None  # None: requeue forever
    backoff_base_seconds: Int32 = 60
    backoff_max_seconds: Int32 = 3600


class WaitForPodsReady(ApiModel):
    enable: bool = False
    # Exact microseconds (the core's clock unit), decoded from Go durations ("5m").
    timeout: DurationMicros = DEFAULT_PODS_READY_TIMEOUT_MICROS
    block_admission: bool = False
    recovery_timeout: DurationMicros | None = None  # None: no recovery timeout
    requeuing_strategy: RequeuingStrategy = Field(default_factory=RequeuingStrategy)

    @model_validator(mode="before")
    @classmethod
    def _block_admission_follows_enable(cls, data: Any) -> Any:
        if isinstance(data, dict):
            enable = data.get("enable", False)
            return _default_when_absent(data, "blockAdmission", "block_admission", enable)
        return data

    @property
    def timeout_seconds(self) -> float:
        return self.timeout / 1_000_000

    @property
    def recovery_timeout_seconds(self) -> float | None:
        if self.recovery_timeout is None:
            return None
        return self.recovery_timeout / 1_000_000


class ClusterQueueVisibility(ApiModel):
    max_count: Int32 = 0  # `clusterQueues: {}`; an omitted block means 10 (see below)


class LocalQueueVisibility(ApiModel):
    """Extension D8 (docs/scheduling.md#localqueue-pending-list): per-LocalQueue pending lists."""

    max_count: Int32 = 10
    max_position: Int32 = 10


class QueueVisibility(ApiModel):
    update_interval_seconds: Int32 = 5
    cluster_queues: ClusterQueueVisibility = Field(default_factory=ClusterQueueVisibility)
    local_queues: LocalQueueVisibility | None = None  # None: extension off

    @model_validator(mode="before")
    @classmethod
    def _cluster_queues_default(cls, data: Any) -> Any:
        return _default_when_absent(data, "clusterQueues", "cluster_queues", {"maxCount": 10})


class FairSharingConfig(ApiModel):
    enable: bool = False
    preemption_strategies: list[PreemptionStrategy] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _default_strategies(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("enable") is not True:
            return data
        for key in ("preemptionStrategies", "preemption_strategies"):
            if data.get(key):
                return data
        cleaned = {k: v for k, v in data.items() if k != "preemption_strategies"}
        return {**cleaned, "preemptionStrategies": list(DEFAULT_PREEMPTION_STRATEGIES)}


class ResourceTransformationConfig(ApiModel):
    """One of `resources.transformations` (docs/scheduling.md#resource-transformations);
    the strategy is checked by validation, with Kueue's message."""

    input: str
    strategy: str = RETAIN
    multiply_by: str = ""
    outputs: dict[str, QuantityField] = Field(default_factory=dict)


class ResourcesConfig(ApiModel):
    # v1beta2's; v1beta1 takes it too, being the internal form (docs/api-versions.md).
    quota_check_strategy: QuotaCheckStrategy = BLOCK_UNDECLARED
    exclude_resource_prefixes: list[str] = Field(default_factory=list)
    transformations: list[ResourceTransformationConfig] = Field(default_factory=list)
    # Rejected by validation when non-empty: queuescope has no dynamic resource allocation.
    device_class_mappings: list[dict[str, Any]] = Field(default_factory=list)


class WorkloadRetentionPolicy(ApiModel):
    """When cluster mode deletes what (docs/cluster.md#object-retention). None: never;
    zero: at once."""

    after_finished: DurationMicros | None = None
    after_deactivated_by_kueue: DurationMicros | None = None


class ObjectRetentionPolicies(ApiModel):
    workloads: WorkloadRetentionPolicy | None = None


class ProcessSettings(TypedObject):
    """What both versions of the Configuration say about the process, its integrations
    and its features: none of it changes the scheduling core. All but
    `objectRetentionPolicies` (which cluster mode carries out) is accepted, after
    upstream's type checks, and ignored. Like upstream (strict decoding) there is no
    metadata."""

    kind: Literal["Configuration"] = "Configuration"

    namespace: str | None = None
    manage_jobs_without_queue_name: bool | None = None
    managed_jobs_namespace_selector: dict[str, Any] | None = None
    internal_cert_management: dict[str, Any] | None = None
    client_connection: dict[str, Any] | None = None
    integrations: dict[str, Any] | None = None
    multi_kueue: dict[str, Any] | None = None
    admission_fair_sharing: dict[str, Any] | None = None
    feature_gates: dict[str, bool] | None = None
    object_retention_policies: ObjectRetentionPolicies | None = None
    health: dict[str, Any] | None = None
    metrics: dict[str, Any] | None = None
    webhook: dict[str, Any] | None = None
    leader_election: dict[str, Any] | None = None
    controller: dict[str, Any] | None = None
    pprof_bind_address: str | None = None
    tls: dict[str, Any] | None = None

    def gate(self, name: str) -> bool:
        """Whether `featureGates` switches the gate `name` on (only the gates that
        docs/scheduling.md#fixed-feature-gates names are read)."""
        return bool((self.feature_gates or {}).get(name, False))


class Configuration(ProcessSettings):
    """Kueue's process configuration in v1beta1, which is also the internal form."""

    api_version: Literal["config.kueue.x-k8s.io/v1beta1"] = "config.kueue.x-k8s.io/v1beta1"

    wait_for_pods_ready: WaitForPodsReady = Field(default_factory=WaitForPodsReady)
    queue_visibility: QueueVisibility | None = None
    fair_sharing: FairSharingConfig = Field(default_factory=FairSharingConfig)
    resources: ResourcesConfig = Field(default_factory=ResourcesConfig)

    @property
    def waits_for_pods_ready(self) -> bool:
        """waitForPodsReady is on: enabled, and not switched off by Kueue's gate
        `DisableWaitForPodsReady` (which wins, as upstream)."""
        return self.wait_for_pods_ready.enable and not self.gate(DISABLE_WAIT_FOR_PODS_READY)
