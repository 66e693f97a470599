"""The Configuration `serve` runs with, and what it says of the settings queuescope ignores
(docs/scheduling.md#configuration)."""

from __future__ import annotations

import logging
import textwrap
from pathlib import Path

import pytest

from queuescope.configuration import load_configuration
from scheduler.api import ApiError, Configuration
from scheduler.api.config_ignored import IgnoredSetting, ignored_settings
from scheduler.api.integrations import Integrations, enabled_integrations
from tests.unit.api.support import decode

KUEUE_LIKE = """\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
health: {healthProbeBindAddress: ':8081'}
metrics: {bindAddress: ':8443'}
webhook: {port: 9443}
leaderElection: {leaderElect: true}
controller: {groupKindConcurrency: {Job.batch: 5}}
clientConnection: {qps: 300, burst: 500}
integrations:
  frameworks: [batch/job, kubeflow.org/mpijob, pod]
  externalFrameworks: [Foo.v1.example.com]
"""


EMBEDDED_RETENTION = "only cluster mode deletes objects: here the manifest files own them"
RETENTION = "objectRetentionPolicies: {workloads: {afterFinished: 1h, afterDeactivatedByKueue: 0s}}"


def configuration(text: str) -> Configuration:
    obj = decode(text)
    assert isinstance(obj, Configuration)
    return obj


def test_process_sections_are_not_reported() -> None:
    text = KUEUE_LIKE.replace("  frameworks: [batch/job, kubeflow.org/mpijob, pod]\n", "")
    text = text.replace(
        "  externalFrameworks: [Foo.v1.example.com]\n", "  frameworks: [batch/job]\n"
    )
    assert ignored_settings(configuration(text)) == []


def test_each_ignored_setting_is_named() -> None:
    cfg = configuration(
        KUEUE_LIKE
        + RETENTION
        + "\n"
        + textwrap.dedent(
            """\
            manageJobsWithoutQueueName: true
            admissionFairSharing: {usageHalfLifeTime: 168h, usageSamplingInterval: 5m}
            multiKueue: {gcInterval: 1m}
            featureGates: {DisableWaitForPodsReady: true, TopologyAwareScheduling: true}
            """
        )
    )
    assert ignored_settings(cfg) == [
        IgnoredSetting(
            "manageJobsWithoutQueueName",
            "Jobs without a queue name are not managed: they run unsuspended",
        ),
        IgnoredSetting("objectRetentionPolicies.workloads.afterFinished", EMBEDDED_RETENTION),
        IgnoredSetting(
            "objectRetentionPolicies.workloads.afterDeactivatedByKueue", EMBEDDED_RETENTION
        ),
        IgnoredSetting(
            "integrations.frameworks",
            "only batch/job, pod, deployment, statefulset, jobset.x-k8s.io/jobset are integrated; "
            "not kubeflow.org/mpijob, Foo.v1.example.com",
        ),
        IgnoredSetting("admissionFairSharing", "admission fair sharing is not implemented"),
        IgnoredSetting("multiKueue", "MultiKueue is not implemented"),
        IgnoredSetting(
            "featureGates",
            "the gates are fixed but DisableWaitForPodsReady; not read: TopologyAwareScheduling",
        ),
    ]


def test_cluster_mode_carries_out_the_retention_policies() -> None:
    cfg = configuration(KUEUE_LIKE.replace("pod]", "batch/job]") + RETENTION + "\n")
    assert [s.path for s in ignored_settings(cfg)] == [
        "objectRetentionPolicies.workloads.afterFinished",
        "objectRetentionPolicies.workloads.afterDeactivatedByKueue",
        "integrations.frameworks",
    ]
    assert [s.path for s in ignored_settings(cfg, cluster_mode=True)] == ["integrations.frameworks"]


def test_false_and_unset_values_are_not_reported() -> None:
    cfg = configuration(
        "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"
        "manageJobsWithoutQueueName: false\nobjectRetentionPolicies: {workloads: {}}\n"
    )
    assert ignored_settings(cfg) == []


def test_serve_logs_what_it_ignores(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(KUEUE_LIKE)
    with caplog.at_level(logging.WARNING, logger="queuescope.configuration"):
        cfg = load_configuration(str(path))
    assert cfg is not None and cfg.waits_for_pods_ready
    assert [r.getMessage() for r in caplog.records] == [
        "event=configuration-setting-ignored setting=integrations.frameworks why='only "
        "batch/job, pod, deployment, statefulset, jobset.x-k8s.io/jobset are integrated; "
        "not kubeflow.org/mpijob, Foo.v1.example.com'",
    ]


def test_cluster_mode_runs_the_pod_integration() -> None:
    cfg = configuration(KUEUE_LIKE)
    assert enabled_integrations(cfg) == Integrations(plain=True)
    assert [s.why for s in ignored_settings(cfg, cluster_mode=True)] == [
        "only batch/job, pod, deployment, statefulset, jobset.x-k8s.io/jobset are integrated; "
        "not kubeflow.org/mpijob, Foo.v1.example.com"
    ]
    selector = "managedJobsNamespaceSelector: {matchLabels: {team: a}}\n"
    assert [
        s.path for s in ignored_settings(configuration(KUEUE_LIKE + selector), cluster_mode=True)
    ] == [
        "integrations.frameworks",
        "managedJobsNamespaceSelector",
    ]
    # Kueue's default: batch/job alone.
    assert not enabled_integrations(configuration(KUEUE_LIKE.replace("pod]", "batch/job]"))).pods
    assert not enabled_integrations(None).pods
    both = configuration(KUEUE_LIKE.replace("pod]", "pod, deployment]"))
    assert enabled_integrations(both) == Integrations(plain=True, deployments=True)
    assert [s.why for s in ignored_settings(both)][1] == (
        "deployment: Deployments are integrated only in cluster mode"
    )
    deployments = configuration(KUEUE_LIKE.replace("pod]", "deployment]"))
    assert enabled_integrations(deployments) == Integrations(deployments=True)


def test_statefulsets_are_integrated_in_both_modes() -> None:
    """Offline reads StatefulSets too (docs/simulate.md#statefulsets): no warning either way."""
    statefulsets = configuration(KUEUE_LIKE.replace("pod]", "statefulset]"))
    assert enabled_integrations(statefulsets) == Integrations(statefulsets=True)
    assert enabled_integrations(statefulsets).pods
    only_others = [
        "only batch/job, pod, deployment, statefulset, jobset.x-k8s.io/jobset are integrated; "
        "not kubeflow.org/mpijob, Foo.v1.example.com"
    ]
    assert [s.why for s in ignored_settings(statefulsets)] == only_others
    assert [s.why for s in ignored_settings(statefulsets, cluster_mode=True)] == only_others
    every = configuration(KUEUE_LIKE.replace("pod]", "pod, deployment, statefulset]"))
    assert enabled_integrations(every) == Integrations(
        plain=True, deployments=True, statefulsets=True
    )
    assert [s.why for s in ignored_settings(every)][1:] == [
        "deployment: Deployments are integrated only in cluster mode",
    ]
    assert [s.why for s in ignored_settings(every, cluster_mode=True)] == only_others
    selector = "managedJobsNamespaceSelector: {matchLabels: {team: a}}\n"
    ignored = ignored_settings(configuration(KUEUE_LIKE + selector), cluster_mode=True)
    assert ignored[-1] == IgnoredSetting(
        "managedJobsNamespaceSelector",
        "for Pods, Deployments and StatefulSets the mutating webhooks' namespaceSelector "
        "decides (kube-system and queuescope-system left out); edit it there",
    )


def test_a_config_file_without_a_configuration_is_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n")
    with pytest.raises(ApiError, match="the file holds no Configuration") as info:
        load_configuration(str(path))
    assert info.value.source == str(path)


def test_at_most_one_configuration(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(KUEUE_LIKE + "---\n" + KUEUE_LIKE)
    with pytest.raises(ApiError, match="at most one Configuration"):
        load_configuration(str(path))


def test_the_embedded_manifests_may_hold_it(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n")
    assert load_configuration(None, [str(tmp_path)]) is None
    (tmp_path / "b.yaml").write_text(KUEUE_LIKE)
    found = load_configuration(None, [str(tmp_path)])
    assert found is not None and found.waits_for_pods_ready
    assert load_configuration(None) is None
