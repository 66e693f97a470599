"""The Configuration in config.kueue.x-k8s.io/v1beta2 (docs/scheduling.md#configuration).

Its defaults are Kueue v0.19.2's for v1beta2, not v1beta1's: waitForPodsReady is on unless
the gate DisableWaitForPodsReady says otherwise, with a 30 minute timeout, no blocking and
the timeout as recovery timeout; fairSharing is on when present.
"""

from __future__ import annotations

import textwrap

import pytest

from scheduler.api import Configuration
from scheduler.api.source import wire_version
from scheduler.core.ingest import scheduler_config
from tests.unit.api.support import decode, errors, has_error

MINUTE = 60 * 1_000_000


def config(body: str = "", version: str = "v1beta2") -> str:
    return f"apiVersion: config.kueue.x-k8s.io/{version}\nkind: Configuration\n" + (
        textwrap.dedent(body)
    )


def load(body: str = "", version: str = "v1beta2") -> Configuration:
    obj = decode(config(body, version))
    assert isinstance(obj, Configuration)
    return obj


def test_read_into_the_internal_form_remembering_its_version() -> None:
    cfg = load()
    assert cfg.api_version == "config.kueue.x-k8s.io/v1beta1"
    assert wire_version(cfg) == "config.kueue.x-k8s.io/v1beta2"


class TestWaitForPodsReady:
    def test_on_when_not_written(self) -> None:
        cfg = load()
        wait = cfg.wait_for_pods_ready
        assert cfg.waits_for_pods_ready
        assert (wait.timeout, wait.recovery_timeout) == (30 * MINUTE, 30 * MINUTE)
        assert wait.block_admission is False
        strategy = wait.requeuing_strategy
        assert (strategy.timestamp, strategy.backoff_limit_count) == ("Eviction", None)
        assert (strategy.backoff_base_seconds, strategy.backoff_max_seconds) == (60, 3600)
        core = scheduler_config(cfg).wait_for_pods_ready
        assert (core.enable, core.timeout_micros, core.block_admission) == (
            True,
            30 * MINUTE,
            False,
        )

    def test_an_empty_block_is_the_same(self) -> None:
        assert load("waitForPodsReady: {}") == load()

    @pytest.mark.parametrize("timeout", ["0s", "0"])
    def test_a_zero_timeout_is_the_default(self, timeout: str) -> None:
        wait = load(f"waitForPodsReady: {{timeout: '{timeout}'}}").wait_for_pods_ready
        assert wait.timeout == 30 * MINUTE

    def test_the_recovery_timeout_follows_the_timeout(self) -> None:
        wait = load("waitForPodsReady: {timeout: 4m, blockAdmission: true}").wait_for_pods_ready
        assert (wait.timeout, wait.recovery_timeout, wait.block_admission) == (
            4 * MINUTE,
            4 * MINUTE,
            True,
        )
        wait = load("waitForPodsReady: {timeout: 4m, recoveryTimeout: 90s}").wait_for_pods_ready
        assert (wait.timeout, wait.recovery_timeout) == (4 * MINUTE, 90_000_000)

    def test_requeuing_strategy(self) -> None:
        strategy = load(
            """
            waitForPodsReady:
              requeuingStrategy: {timestamp: Creation, backoffLimitCount: 3, backoffBaseSeconds: 5}
            """
        ).wait_for_pods_ready.requeuing_strategy
        assert (strategy.timestamp, strategy.backoff_limit_count) == ("Creation", 3)
        assert (strategy.backoff_base_seconds, strategy.backoff_max_seconds) == (5, 3600)

    def test_the_gate_turns_it_off(self) -> None:
        cfg = load("featureGates: {DisableWaitForPodsReady: true}")
        assert not cfg.waits_for_pods_ready
        assert scheduler_config(cfg).wait_for_pods_ready.enable is False
        assert load("featureGates: {DisableWaitForPodsReady: false}").waits_for_pods_ready

    def test_the_gate_wins_in_v1beta1_too(self) -> None:
        cfg = load(
            "waitForPodsReady: {enable: true}\nfeatureGates: {DisableWaitForPodsReady: true}",
            "v1beta1",
        )
        assert not cfg.waits_for_pods_ready
        assert scheduler_config(cfg).wait_for_pods_ready.enable is False
        # Switched off, its values are not checked (upstream validates only when on).
        load(
            "waitForPodsReady: {enable: true, timeout: -1s}\n"
            "featureGates: {DisableWaitForPodsReady: true}",
            "v1beta1",
        )

    def test_enable_is_not_a_v1beta2_field(self) -> None:
        has_error(
            config("waitForPodsReady: {enable: true}"),
            "waitForPodsReady.enable",
            'unknown field "enable" (v1beta2 has no enable: waitForPodsReady is on unless',
        )

    @pytest.mark.parametrize(
        ("body", "path"),
        [
            ("{timeout: -1s}", "waitForPodsReady.timeout"),
            ("{recoveryTimeout: -1m}", "waitForPodsReady.recoveryTimeout"),
            (
                "{requeuingStrategy: {backoffLimitCount: -1}}",
                "waitForPodsReady.requeuingStrategy.backoffLimitCount",
            ),
            (
                "{requeuingStrategy: {backoffMaxSeconds: -1}}",
                "waitForPodsReady.requeuingStrategy.backoffMaxSeconds",
            ),
        ],
    )
    def test_negative_values(self, body: str, path: str) -> None:
        has_error(config(f"waitForPodsReady: {body}"), path, "greater than or equal to 0")

    def test_timestamp_enum(self) -> None:
        has_error(
            config("waitForPodsReady: {requeuingStrategy: {timestamp: Admission}}"),
            "waitForPodsReady.requeuingStrategy.timestamp",
            'supported values: "Eviction", "Creation"',
        )


class TestFairSharing:
    def test_absent_means_off(self) -> None:
        cfg = load()
        assert (cfg.fair_sharing.enable, scheduler_config(cfg).fair_sharing) == (False, False)

    def test_present_means_on(self) -> None:
        cfg = load("fairSharing: {preemptionStrategies: [LessThanInitialShare]}")
        assert cfg.fair_sharing.enable
        core = scheduler_config(cfg)
        assert (core.fair_sharing, core.fair_sharing_strategies) == (
            True,
            ("LessThanInitialShare",),
        )

    @pytest.mark.parametrize("body", ["{}", "{preemptionStrategies: []}"])
    def test_strategies_are_required(self, body: str) -> None:
        has_error(
            config(f"fairSharing: {body}"),
            "fairSharing.preemptionStrategies",
            "Required value: must be specified",
        )

    def test_the_shared_rules_apply(self) -> None:
        has_error(
            config(
                "fairSharing: {preemptionStrategies: "
                "[LessThanInitialShare, LessThanOrEqualToFinalShare]}"
            ),
            "fairSharing.preemptionStrategies",
            "must be [LessThanOrEqualToFinalShare], [LessThanInitialShare], or",
        )

    def test_enable_is_not_a_v1beta2_field(self) -> None:
        has_error(
            config("fairSharing: {enable: true}"),
            "fairSharing.enable",
            'unknown field "enable" (v1beta2 has no enable: fair sharing is on when',
        )


class TestResources:
    def test_block_undeclared_is_the_default(self) -> None:
        cfg = load("resources: {excludeResourcePrefixes: [ex.com/]}")
        assert cfg.resources.quota_check_strategy == "BlockUndeclared"
        core = scheduler_config(cfg)
        assert (core.exclude_resource_prefixes, core.ignore_undeclared_resources) == (
            ("ex.com/",),
            False,
        )
        assert scheduler_config(load()).ignore_undeclared_resources is False

    @pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
    def test_ignore_undeclared(self, version: str) -> None:
        cfg = load("resources: {quotaCheckStrategy: IgnoreUndeclared}", version)
        assert scheduler_config(cfg).ignore_undeclared_resources is True

    def test_ignore_undeclared_excludes_nothing_else(self) -> None:
        has_error(
            config(
                "resources: {quotaCheckStrategy: IgnoreUndeclared, excludeResourcePrefixes: [a/]}"
            ),
            "resources.quotaCheckStrategy",
            "excludeResourcePrefixes is not allowed when quotaCheckStrategy is IgnoreUndeclared",
        )

    def test_unknown_strategy(self) -> None:
        has_error(
            config("resources: {quotaCheckStrategy: Whatever}"),
            "resources.quotaCheckStrategy",
            "Unsupported value",
        )

    @pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
    def test_device_class_mappings_are_not_supported(self, version: str) -> None:
        has_error(
            config(
                "resources: {deviceClassMappings: [{name: gpus, deviceClassNames: [gpu.ex.com]}]}",
                version,
            ),
            "resources.deviceClassMappings",
            "not supported: dynamic resource allocation",
        )

    def test_transformations_reach_the_core(self) -> None:
        obj = decode(
            config(
                "resources: {transformations: [{input: nvidia.com/gpumem, strategy: Replace,"
                " multiplyBy: nvidia.com/gpu, outputs: {nvidia.com/total-gpumem: '1'}}]}"
            )
        )
        assert isinstance(obj, Configuration)
        [transformation] = scheduler_config(obj).transformations
        assert transformation.input == "nvidia.com/gpumem"
        assert not transformation.retain
        assert transformation.multiply_by == "nvidia.com/gpu"
        assert transformation.outputs == (("nvidia.com/total-gpumem", 1),)


def test_queue_visibility_is_gone() -> None:
    has_error(
        config("queueVisibility: {}"),
        "queueVisibility",
        'unknown field "queueVisibility" (v1beta2 has no queue visibility in status',
    )


def test_every_error_at_once() -> None:
    found = {
        e.path
        for e in errors(
            config(
                """
                waitForPodsReady: {timeout: -1s}
                fairSharing: {preemptionStrategies: [LessThanInitialShare, LessThanInitialShare]}
                resources: {quotaCheckStrategy: IgnoreUndeclared, excludeResourcePrefixes: [a/]}
                """
            )
        )
    }
    assert found == {
        "waitForPodsReady.timeout",
        "waitForPodsReady.recoveryTimeout",  # the timeout, by default (as in Kueue)
        "fairSharing.preemptionStrategies",
        "resources.quotaCheckStrategy",
    }


def test_process_sections_are_accepted_and_ignored() -> None:
    cfg = load(
        """
        namespace: kueue-system
        health: {healthProbeBindAddress: ":8081"}
        metrics: {bindAddress: ":8443", customLabels: [{name: team, sourceKind: ClusterQueue}]}
        webhook: {port: 9443}
        leaderElection: {leaderElect: true, resourceName: c1f6bfd2.kueue.x-k8s.io}
        controller: {groupKindConcurrency: {Job.batch: 5}}
        clientConnection: {qps: 300, burst: 500}
        integrations: {frameworks: [batch/job, pod]}
        tls: {minVersion: VersionTLS13}
        visibilityServer: {bindPort: 8082}
        """
    )
    assert cfg.namespace == "kueue-system"
    assert cfg.waits_for_pods_ready
