"""jobset.x-k8s.io/v1alpha2 JobSet, the model alone (as `statefulset_model` is for
StatefulSets), so that the table of input kinds can hold it; what the `jobset`
integration makes of one is `scheduler.api.jobset`'s.

Only what Kueue's JobSet integration reads is typed: each replicated Job's name, its
`replicas` and its Job template (a batch/v1 JobSpec, as a Job's), and `spec.suspend`;
every other JobSet field is accepted as raw data (docs/cluster.md#jobsets).
"""

from __future__ import annotations

from typing import Any, ClassVar, Final, Literal

from pydantic import Field

from scheduler.api.base import ApiModel, Int32
from scheduler.api.job import JobSpec
from scheduler.api.meta import TemplateMeta
from scheduler.api.plain_pod import QueuedByLabel

JOBSET_API_VERSION: Final = "jobset.x-k8s.io/v1alpha2"


def pods_per_replica(parallelism: int | None, completions: int | None) -> int:
    """Kueue's count of one replica's Pods: its Job's parallelism (1 unset), at most its
    completions."""
    count = 1 if parallelism is None else parallelism
    return count if completions is None else min(count, completions)


class JobTemplateSpec(ApiModel):
    metadata: TemplateMeta = Field(default_factory=TemplateMeta)
    spec: JobSpec


class ReplicatedJob(ApiModel):
    name: str
    replicas: Int32 = 1
    template: JobTemplateSpec
    # Accepted, not read.
    group_name: str | None = None
    depends_on: list[dict[str, Any]] | None = None

    @property
    def pods_per_replica(self) -> int:
        spec = self.template.spec
        return pods_per_replica(spec.parallelism, spec.completions)


class JobSetSpec(ApiModel):
    replicated_jobs: list[ReplicatedJob] = Field(default_factory=list)
    suspend: bool = False
    # Accepted, not read.
    managed_by: str | None = None
    network: dict[str, Any] | None = None
    success_policy: dict[str, Any] | None = None
    failure_policy: dict[str, Any] | None = None
    startup_policy: dict[str, Any] | None = None
    coordinator: dict[str, Any] | None = None
    ttl_seconds_after_finished: Int32 | None = None
    volume_claim_policies: list[dict[str, Any]] | None = None


class JobSet(QueuedByLabel):
    namespaced: ClassVar[bool] = True

    api_version: Literal["jobset.x-k8s.io/v1alpha2"] = JOBSET_API_VERSION
    kind: Literal["JobSet"] = "JobSet"
    spec: JobSetSpec
    status: dict[str, Any] | None = None  # read raw, in cluster mode (runtime/kube/jobsets.py)
