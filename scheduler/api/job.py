"""batch/v1 Job, and the Workload that Kueue's Job integration derives from it.

Only the Job fields the integration reads are typed; every other JobSpec field of
Kubernetes is accepted as raw data (they are real fields, so not "unknown"), which
keeps typos in the modelled ones detectable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from scheduler.api.base import ApiModel, Int32, Int64
from scheduler.api.meta import KubeObject
from scheduler.api.pod import PodTemplateSpec

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
JOB_MIN_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-min-parallelism"
# Kueue's maximum execution time of a job's Workload, in seconds
# (docs/cluster.md#maximum-execution-time).
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"


def max_exec_seconds(labels: Mapping[str, str]) -> int | None:
    """The Workload's `maximumExecutionTimeSeconds` from an object's labels, as Kueue
    reads it: a positive 32-bit integer, else none (the webhooks refuse other values)."""
    raw = labels.get(MAX_EXEC_TIME_LABEL)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        return None
    return value if 0 < value < 2**31 else None


class JobSpec(ApiModel):
    parallelism: Int32 = 1
    completions: Int32 | None = None
    suspend: bool = False
    template: PodTemplateSpec
    # Accepted, not read by the scheduler.
    active_deadline_seconds: Int64 | None = None
    backoff_limit: Int32 | None = None
    backoff_limit_per_index: Int32 | None = None
    max_failed_indexes: Int32 | None = None
    selector: dict[str, Any] | None = None
    manual_selector: bool | None = None
    ttl_seconds_after_finished: Int32 | None = None
    completion_mode: str | None = None
    pod_failure_policy: dict[str, Any] | None = None
    success_policy: dict[str, Any] | None = None
    pod_replacement_policy: str | None = None
    managed_by: str | None = None


class Job(KubeObject):
    namespaced: ClassVar[bool] = True

    api_version: Literal["batch/v1"] = "batch/v1"
    kind: Literal["Job"] = "Job"
    spec: JobSpec
    status: dict[str, Any] | None = None

    @property
    def queue_name(self) -> str | None:
        """The LocalQueue named by the queue-name label; None means Kueue ignores the Job."""
        return self.metadata.labels.get(QUEUE_NAME_LABEL)
