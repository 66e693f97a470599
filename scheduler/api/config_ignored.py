"""What a Configuration asks for that queuescope does not do (docs/scheduling.md#configuration).

Kueue's configuration file carries sections that change behaviour in Kueue but are
accepted and ignored here, because the feature is not part of queuescope. A server that
starts with such a file says so, one warning each, rather than leaving an operator
switching from Kueue to find out later. The process sections (health, metrics, webhook,
leaderElection, ...) are not listed: `serve`'s flags do their job.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from scheduler.api.config import DISABLE_WAIT_FOR_PODS_READY, ProcessSettings
from scheduler.api.integrations import (
    DEPLOYMENT_FRAMEWORK,
    INTEGRATED,
    POD_BASED,
    listed_frameworks,
)

# The integrations carried out only against a cluster (their Pods come from its
# controllers), with the kind each names in its warning. A StatefulSet (a JobSet) is one
# Workload made from the object alone, so offline reads it too
# (docs/simulate.md#statefulsets, docs/simulate.md#jobsets).
_CLUSTER_ONLY = ((DEPLOYMENT_FRAMEWORK, "Deployments"),)


class IgnoredSetting(NamedTuple):
    path: str
    why: str


def ignored_settings(cfg: ProcessSettings, *, cluster_mode: bool = False) -> list[IgnoredSetting]:
    """The settings `cfg` has that queuescope does not carry out; `cluster_mode`: the
    server runs against a cluster (where objectRetentionPolicies is carried out)."""
    found: list[IgnoredSetting] = []
    if cfg.manage_jobs_without_queue_name:
        found.append(
            IgnoredSetting(
                "manageJobsWithoutQueueName",
                "Jobs without a queue name are not managed: they run unsuspended",
            )
        )
    retention = cfg.object_retention_policies
    workloads = retention.workloads if retention is not None else None
    if workloads is not None and not cluster_mode:
        for key, value in (
            ("afterFinished", workloads.after_finished),
            ("afterDeactivatedByKueue", workloads.after_deactivated_by_kueue),
        ):
            if value is not None:
                found.append(
                    IgnoredSetting(
                        f"objectRetentionPolicies.workloads.{key}",
                        "only cluster mode deletes objects: here the manifest files own them",
                    )
                )
    found += _integrations(cfg, cluster_mode=cluster_mode)
    if cfg.admission_fair_sharing is not None:
        found.append(
            IgnoredSetting("admissionFairSharing", "admission fair sharing is not implemented")
        )
    if cfg.multi_kueue is not None:
        found.append(IgnoredSetting("multiKueue", "MultiKueue is not implemented"))
    gates = sorted(g for g in cfg.feature_gates or {} if g != DISABLE_WAIT_FOR_PODS_READY)
    if gates:
        found.append(
            IgnoredSetting(
                "featureGates",
                f"the gates are fixed but {DISABLE_WAIT_FOR_PODS_READY}; not read: "
                + ", ".join(gates),
            )
        )
    return found


def _integrations(cfg: ProcessSettings, *, cluster_mode: bool) -> list[IgnoredSetting]:
    found: list[IgnoredSetting] = []
    listed = listed_frameworks(cfg)
    others = [f for f in listed if f not in INTEGRATED]
    others += list(_mapping(cfg.integrations).get("externalFrameworks") or [])
    if others:
        found.append(
            IgnoredSetting(
                "integrations.frameworks",
                f"only {', '.join(INTEGRATED)} are integrated; not {', '.join(map(str, others))}",
            )
        )
    pod_based = [f for f in POD_BASED if f in listed]
    for framework, kinds in _CLUSTER_ONLY:
        if framework in listed and not cluster_mode:
            found.append(
                IgnoredSetting(
                    "integrations.frameworks",
                    f"{framework}: {kinds} are integrated only in cluster mode",
                )
            )
    if pod_based and cfg.managed_jobs_namespace_selector is not None:
        found.append(
            IgnoredSetting(
                "managedJobsNamespaceSelector",
                "for Pods, Deployments and StatefulSets the mutating webhooks' "
                "namespaceSelector decides "
                "(kube-system and queuescope-system left out); edit it there",
            )
        )
    return found


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
