"""Kueue's Configuration in `config.kueue.x-k8s.io/v1beta2` (docs/scheduling.md#configuration).

v1beta2 is the version of Kueue v0.19.2's own manifests and Helm chart. A v1beta2
document is decoded strictly with this wire model, checked by the rules only v1beta2
has, and read into the internal form (the v1beta1 model of `config.py`) with v1beta2's
defaults, which are not v1beta1's:

- `waitForPodsReady` has no `enable`: it is on unless Kueue's gate
  `DisableWaitForPodsReady` is set, whether the block is written or not;
- its `timeout` is 30 minutes when unset or zero, `blockAdmission` false when unset,
  and `recoveryTimeout` the timeout when unset;
- `fairSharing` has no `enable`: present means on, and `preemptionStrategies` is then
  required;
- `queueVisibility` is gone (an unknown field), `resources.quotaCheckStrategy` and
  `visibilityServer` are new.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field

from scheduler.api.base import ApiModel, DurationMicros
from scheduler.api.config import (
    CONFIG_V1BETA1,
    PreemptionStrategy,
    ProcessSettings,
    RequeuingStrategy,
    ResourcesConfig,
)
from scheduler.api.durations import format_duration

CONFIG_V1BETA2: Final = "config.kueue.x-k8s.io/v1beta2"
# v1beta1 fields a v1beta2 document may carry over by habit: what v1beta2 says instead,
# added to the "unknown field" error.
V1BETA1_ONLY_FIELDS: Final = {
    "waitForPodsReady.enable": "v1beta2 has no enable: waitForPodsReady is on unless the "
    "feature gate DisableWaitForPodsReady is set",
    "fairSharing.enable": "v1beta2 has no enable: fair sharing is on when fairSharing is present",
    "queueVisibility": "v1beta2 has no queue visibility in status; use the visibility API, "
    "or write the Configuration in v1beta1",
}
# Not v1beta1's 5 minutes (config.py).
V1BETA2_PODS_READY_TIMEOUT_MICROS: Final = 30 * 60 * 1_000_000


class WaitForPodsReadyV1Beta2(ApiModel):
    timeout: DurationMicros = 0  # zero: the default, 30 minutes
    block_admission: bool | None = None
    requeuing_strategy: RequeuingStrategy | None = None
    recovery_timeout: DurationMicros | None = None  # None: the timeout


class FairSharingV1Beta2(ApiModel):
    preemption_strategies: list[PreemptionStrategy] = Field(default_factory=list)


class ConfigurationV1Beta2(ProcessSettings):
    api_version: Literal["config.kueue.x-k8s.io/v1beta2"] = "config.kueue.x-k8s.io/v1beta2"

    wait_for_pods_ready: WaitForPodsReadyV1Beta2 | None = None
    fair_sharing: FairSharingV1Beta2 | None = None
    resources: ResourcesConfig | None = None
    visibility_server: dict[str, Any] | None = None  # Kueue's own visibility server


def internal_configuration(obj: ConfigurationV1Beta2) -> dict[str, Any]:
    """The v1beta1 document that says what `obj` says, v1beta2's defaults applied."""
    document = obj.model_dump(
        mode="json",
        by_alias=True,
        exclude_none=True,
        exclude={"api_version", "wait_for_pods_ready", "fair_sharing", "resources"},
    )
    document["apiVersion"] = CONFIG_V1BETA1
    document.pop("visibilityServer", None)
    document["waitForPodsReady"] = _wait_for_pods_ready(
        obj.wait_for_pods_ready or WaitForPodsReadyV1Beta2()
    )
    if obj.fair_sharing is not None:
        strategies = list(obj.fair_sharing.preemption_strategies)
        document["fairSharing"] = {"enable": True, "preemptionStrategies": strategies}
    if obj.resources is not None:
        document["resources"] = obj.resources.to_dict()
    return document


def _wait_for_pods_ready(wait: WaitForPodsReadyV1Beta2) -> dict[str, Any]:
    timeout = wait.timeout or V1BETA2_PODS_READY_TIMEOUT_MICROS
    recovery = timeout if wait.recovery_timeout is None else wait.recovery_timeout
    block: dict[str, Any] = {
        "enable": True,
        "timeout": format_duration(timeout),
        "blockAdmission": bool(wait.block_admission),
        "recoveryTimeout": format_duration(recovery),
    }
    if wait.requeuing_strategy is not None:
        block["requeuingStrategy"] = wait.requeuing_strategy.to_dict()
    return block
