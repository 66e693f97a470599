"""Configuration defaults and validation (docs/scheduling.md#configuration)."""

from __future__ import annotations

import textwrap

import pytest

from scheduler.api import Configuration
from tests.unit.api.support import decode, has_error


def config(body: str = "") -> str:
    return "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n" + textwrap.dedent(
        body
    )


def load(body: str = "") -> Configuration:
    obj = decode(config(body))
    assert isinstance(obj, Configuration)
    return obj


def test_empty_configuration_defaults() -> None:
    cfg = load()
    wait = cfg.wait_for_pods_ready
    assert (wait.enable, wait.block_admission) == (False, False)
    assert cfg.queue_visibility is None
    assert (cfg.fair_sharing.enable, cfg.fair_sharing.preemption_strategies) == (False, [])
    assert cfg.resources.exclude_resource_prefixes == []


class TestWaitForPodsReady:
    def test_enabled_defaults(self) -> None:
        wait = load("waitForPodsReady: {enable: true}").wait_for_pods_ready
        assert wait.timeout == 300_000_000  # microseconds
        assert wait.timeout_seconds == 300.0
        assert wait.block_admission is True
        assert wait.recovery_timeout is None
        strategy = wait.requeuing_strategy
        assert strategy.timestamp == "Eviction"
        assert strategy.backoff_limit_count is None
        assert (strategy.backoff_base_seconds, strategy.backoff_max_seconds) == (60, 3600)

    def test_block_admission_can_be_turned_off(self) -> None:
        wait = load("waitForPodsReady: {enable: true, blockAdmission: false}").wait_for_pods_ready
        assert wait.block_admission is False

    @pytest.mark.parametrize(
        ("timeout", "micros"),
        [("30s", 30_000_000), ("1h2m3s", 3_723_000_000), ("0", 0), ("0s", 0), ("1.5m", 90_000_000)],
    )
    def test_go_durations(self, timeout: str, micros: int) -> None:
        wait = load(
            f"waitForPodsReady: {{enable: true, timeout: '{timeout}', recoveryTimeout: 1m}}"
        ).wait_for_pods_ready
        assert wait.timeout == micros
        assert wait.recovery_timeout == 60_000_000
        assert wait.recovery_timeout_seconds == 60.0

    def test_bare_zero_is_a_duration(self) -> None:
        assert load("waitForPodsReady: {enable: true, timeout: 0}").wait_for_pods_ready.timeout == 0

    def test_numbers_need_a_unit(self) -> None:
        has_error(
            config("waitForPodsReady: {enable: true, timeout: 300}"),
            "waitForPodsReady.timeout",
            "a unit is required",
        )

    def test_bad_duration(self) -> None:
        has_error(
            config("waitForPodsReady: {timeout: 5 minutes}"),
            "waitForPodsReady.timeout",
            "unknown unit",
        )

    def test_requeuing_strategy(self) -> None:
        wait = load(
            """
            waitForPodsReady:
              enable: true
              requeuingStrategy:
                timestamp: Creation
                backoffLimitCount: 3
                backoffBaseSeconds: 30
                backoffMaxSeconds: 100
            """
        ).wait_for_pods_ready
        strategy = wait.requeuing_strategy
        assert (strategy.timestamp, strategy.backoff_limit_count) == ("Creation", 3)
        assert (strategy.backoff_base_seconds, strategy.backoff_max_seconds) == (30, 100)

    def test_timestamp_enum(self) -> None:
        has_error(
            config("waitForPodsReady: {requeuingStrategy: {timestamp: Admission}}"),
            "waitForPodsReady.requeuingStrategy.timestamp",
            'supported values: "Eviction", "Creation"',
        )

    @pytest.mark.parametrize(
        ("field", "value", "path"),
        [
            ("timeout", "-1s", "waitForPodsReady.timeout"),
            ("recoveryTimeout", "-1m", "waitForPodsReady.recoveryTimeout"),
            (
                "requeuingStrategy",
                "{backoffLimitCount: -1}",
                "waitForPodsReady.requeuingStrategy.backoffLimitCount",
            ),
            (
                "requeuingStrategy",
                "{backoffBaseSeconds: -1}",
                "waitForPodsReady.requeuingStrategy.backoffBaseSeconds",
            ),
            (
                "requeuingStrategy",
                "{backoffMaxSeconds: -1}",
                "waitForPodsReady.requeuingStrategy.backoffMaxSeconds",
            ),
        ],
    )
    def test_negative_values_rejected_only_when_enabled(
        self, field: str, value: str, path: str
    ) -> None:
        has_error(
            config(f"waitForPodsReady: {{enable: true, {field}: {value}}}"),
            path,
            "greater than or equal to 0",
        )
        load(f"waitForPodsReady: {{enable: false, {field}: {value}}}")


class TestQueueVisibility:
    def test_absent_means_off(self) -> None:
        assert load().queue_visibility is None

    def test_cluster_queues_omitted_means_ten(self) -> None:
        visibility = load("queueVisibility: {}").queue_visibility
        assert visibility is not None
        assert visibility.update_interval_seconds == 5
        assert visibility.cluster_queues.max_count == 10
        assert visibility.local_queues is None

    def test_cluster_queues_empty_means_zero(self) -> None:
        visibility = load("queueVisibility: {clusterQueues: {}}").queue_visibility
        assert visibility is not None
        assert visibility.cluster_queues.max_count == 0

    def test_local_queue_extension(self) -> None:
        visibility = load("queueVisibility: {localQueues: {}}").queue_visibility
        assert visibility is not None
        assert visibility.local_queues is not None
        assert (visibility.local_queues.max_count, visibility.local_queues.max_position) == (10, 10)

    @pytest.mark.parametrize(
        ("body", "path", "message"),
        [
            (
                "{updateIntervalSeconds: 0}",
                "queueVisibility.updateIntervalSeconds",
                "greater than or equal to 1",
            ),
            (
                "{clusterQueues: {maxCount: 4001}}",
                "queueVisibility.clusterQueues.maxCount",
                "less than or equal to 4000",
            ),
            (
                "{clusterQueues: {maxCount: -1}}",
                "queueVisibility.clusterQueues.maxCount",
                "greater than or equal to 0",
            ),
            (
                "{localQueues: {maxCount: 4001}}",
                "queueVisibility.localQueues.maxCount",
                "less than or equal to 4000",
            ),
            (
                "{localQueues: {maxPosition: -1}}",
                "queueVisibility.localQueues.maxPosition",
                "greater than or equal to 0",
            ),
        ],
    )
    def test_validation(self, body: str, path: str, message: str) -> None:
        has_error(config(f"queueVisibility: {body}"), path, message)


class TestFairSharing:
    def test_enabled_without_strategies_gets_both(self) -> None:
        fs = load("fairSharing: {enable: true}").fair_sharing
        assert fs.preemption_strategies == ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]

    @pytest.mark.parametrize(
        "strategies",
        [
            ["LessThanOrEqualToFinalShare"],
            ["LessThanInitialShare"],
            ["LessThanOrEqualToFinalShare", "LessThanInitialShare"],
        ],
    )
    def test_valid_strategies(self, strategies: list[str]) -> None:
        fs = load(
            f"fairSharing: {{enable: true, preemptionStrategies: [{', '.join(strategies)}]}}"
        ).fair_sharing
        assert fs.preemption_strategies == strategies

    def test_reversed_order_rejected(self) -> None:
        has_error(
            config(
                "fairSharing: {enable: true, preemptionStrategies: "
                "[LessThanInitialShare, LessThanOrEqualToFinalShare]}"
            ),
            "fairSharing.preemptionStrategies",
            "must be [LessThanOrEqualToFinalShare], [LessThanInitialShare], or",
        )

    def test_unknown_strategy(self) -> None:
        has_error(
            config("fairSharing: {preemptionStrategies: [Whatever]}"),
            "fairSharing.preemptionStrategies[0]",
            "Unsupported value",
        )


def test_transformations_are_read_with_kueues_default_strategy() -> None:
    cfg = load(
        """
        resources:
          transformations:
          - input: nvidia.com/gpucores
            strategy: Replace
            multiplyBy: nvidia.com/gpu
            outputs: {nvidia.com/total-gpucores: "1"}
          - input: nvidia.com/mig-1g.5gb
            outputs: {example.com/accelerator-memory: 5Gi}
        """
    )
    assert cfg.resources is not None
    replace, retain = cfg.resources.transformations
    assert (replace.strategy, replace.multiply_by) == ("Replace", "nvidia.com/gpu")
    assert str(replace.outputs["nvidia.com/total-gpucores"]) == "1"
    assert (retain.strategy, retain.multiply_by) == ("Retain", "")


def test_a_transformations_strategy_kueue_does_not_know() -> None:
    has_error(
        config("resources: {transformations: [{input: nvidia.com/mig-1g.5gb, strategy: Drop}]}"),
        "resources.transformations[0].strategy",
        'Unsupported value: "Drop": supported values: "Retain", "Replace"',
    )


def test_a_transformations_input_named_twice() -> None:
    has_error(
        config("resources: {transformations: [{input: example.com/a}, {input: example.com/a}]}"),
        "resources.transformations[1].input",
        'Duplicate value: "example.com/a"',
    )


def test_ignored_sections_are_accepted() -> None:
    cfg = load(
        """
        namespace: kueue-system
        manageJobsWithoutQueueName: false
        managedJobsNamespaceSelector: {matchLabels: {a: b}}
        health: {healthProbeBindAddress: ":8081"}
        metrics: {bindAddress: ":8443"}
        webhook: {port: 9443}
        leaderElection: {leaderElect: true}
        controller: {groupKindConcurrency: {Job.batch: 5}}
        clientConnection: {qps: 50, burst: 100}
        internalCertManagement: {enable: false}
        integrations: {frameworks: [batch/job]}
        multiKueue: {gcInterval: 1m}
        admissionFairSharing: {usageHalfLifeTime: 168h}
        featureGates: {TopologyAwareScheduling: false}
        objectRetentionPolicies: {}
        resources: {excludeResourcePrefixes: [example.com/]}
        """
    )
    assert cfg.resources.exclude_resource_prefixes == ["example.com/"]


def test_configuration_has_no_metadata() -> None:
    has_error(config("metadata: {name: c}"), "metadata", "unknown field")


def test_unknown_top_level_field() -> None:
    has_error(config("waitForPodReady: {enable: true}"), "waitForPodReady", "unknown field")


class TestObjectRetentionPolicies:
    """docs/cluster.md#object-retention: read in both versions, never negative."""

    @pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
    def test_durations_read_in_both_versions(self, version: str) -> None:
        text = (
            f"apiVersion: config.kueue.x-k8s.io/{version}\nkind: Configuration\n"
            "objectRetentionPolicies: {workloads: {afterFinished: 1h, "
            "afterDeactivatedByKueue: 0s}}\n"
        )
        obj = decode(text)
        assert isinstance(obj, Configuration)
        retention = obj.object_retention_policies
        assert retention is not None and retention.workloads is not None
        assert retention.workloads.after_finished == 3600 * 1_000_000
        assert retention.workloads.after_deactivated_by_kueue == 0

    @pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
    @pytest.mark.parametrize("field", ["afterFinished", "afterDeactivatedByKueue"])
    def test_negative_rejected(self, version: str, field: str) -> None:
        text = (
            f"apiVersion: config.kueue.x-k8s.io/{version}\nkind: Configuration\n"
            f"objectRetentionPolicies: {{workloads: {{{field}: -5m}}}}\n"
        )
        has_error(
            text,
            f"objectRetentionPolicies.workloads.{field}",
            'Invalid value: "-5m0s": must be greater than or equal to 0',
        )

    def test_unknown_fields_named(self) -> None:
        has_error(
            config("objectRetentionPolicies: {jobs: {afterFinished: 1h}}"),
            "objectRetentionPolicies.jobs",
            "unknown field",
        )
        has_error(
            config("objectRetentionPolicies: {workloads: {afterFinish: 1h}}"),
            "objectRetentionPolicies.workloads.afterFinish",
            "unknown field",
        )

    def test_not_a_duration(self) -> None:
        has_error(
            config("objectRetentionPolicies: {workloads: {afterFinished: soon}}"),
            "objectRetentionPolicies.workloads.afterFinished",
            "soon",
        )
