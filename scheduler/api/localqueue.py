"""LocalQueue (`kueue.x-k8s.io/v1beta1`, namespaced, docs/scheduling.md#localqueue)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from scheduler.api.base import ApiModel
from scheduler.api.clusterqueue import StopPolicy
from scheduler.api.meta import KueueV1Beta1Object


class LocalQueueSpec(ApiModel):
    # Empty behaves like a missing ClusterQueue (the queue is inactive), not an error.
    cluster_queue: str = ""
    stop_policy: StopPolicy = "None"
    # Accepted, ignored: Admission Fair Sharing is off (docs/scheduling.md#out-of-scope).
    fair_sharing: dict[str, Any] | None = None


class LocalQueue(KueueV1Beta1Object):
    namespaced: ClassVar[bool] = True

    kind: Literal["LocalQueue"] = "LocalQueue"
    spec: LocalQueueSpec = Field(default_factory=LocalQueueSpec)
    status: dict[str, Any] | None = None
