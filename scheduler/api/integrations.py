"""Which of Kueue's integrations a Configuration turns on (its
`integrations.frameworks`), among those queuescope has (docs/cluster.md#plain-pods,
docs/cluster.md#deployments, docs/cluster.md#statefulsets, docs/cluster.md#jobsets)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from scheduler.api.config import ProcessSettings

JOB_FRAMEWORK: Final = "batch/job"  # always on (docs/scheduling.md#configuration)
POD_FRAMEWORK: Final = "pod"  # plain Pods, in cluster mode
DEPLOYMENT_FRAMEWORK: Final = "deployment"  # a Deployment's Pods, each its own workload
STATEFULSET_FRAMEWORK: Final = "statefulset"  # a StatefulSet's Pods, through the Pod path
JOBSET_FRAMEWORK: Final = "jobset.x-k8s.io/jobset"  # a JobSet, suspended as a Job is
INTEGRATED: Final = (
    JOB_FRAMEWORK,
    POD_FRAMEWORK,
    DEPLOYMENT_FRAMEWORK,
    STATEFULSET_FRAMEWORK,
    JOBSET_FRAMEWORK,
)
# The integrations whose workloads are Pods, which need a cluster's Pods.
POD_BASED: Final = (POD_FRAMEWORK, DEPLOYMENT_FRAMEWORK, STATEFULSET_FRAMEWORK)


@dataclass(frozen=True, slots=True)
class Integrations:
    """Which integrations besides Jobs' are on. Which Pods the webhooks and the Pod
    controller manage: plain Pods that name a LocalQueue (`pod` listed), and the Pods of
    Deployments and StatefulSets that do (`deployment`, `statefulset` listed; Kueue
    turns the `pod` integration on with each, for those Pods only); and whether JobSets
    that name a LocalQueue are (`jobset.x-k8s.io/jobset` listed)."""

    plain: bool = False
    deployments: bool = False
    statefulsets: bool = False
    jobsets: bool = False

    @property
    def pods(self) -> bool:
        """Are some Pods managed?"""
        return self.plain or self.deployments or self.statefulsets


NO_INTEGRATIONS: Final = Integrations()
PLAIN_PODS: Final = Integrations(plain=True)


def listed_frameworks(cfg: ProcessSettings | None) -> list[str]:
    """`integrations.frameworks` as written (Kueue's default: batch/job alone)."""
    integrations: Any = cfg.integrations if cfg is not None else None
    if not isinstance(integrations, dict):
        return [JOB_FRAMEWORK]
    return [str(f) for f in integrations.get("frameworks") or [JOB_FRAMEWORK]]


def enabled_integrations(cfg: ProcessSettings | None) -> Integrations:
    listed = listed_frameworks(cfg)
    return Integrations(
        plain=POD_FRAMEWORK in listed,
        deployments=DEPLOYMENT_FRAMEWORK in listed,
        statefulsets=STATEFULSET_FRAMEWORK in listed,
        jobsets=JOBSET_FRAMEWORK in listed,
    )
