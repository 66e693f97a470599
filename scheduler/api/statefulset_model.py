"""The apps/v1 StatefulSet model, apart from what the `statefulset` integration does
with it (`scheduler.api.statefulset`), so that the table of input kinds can hold it:
that integration's module needs the validation rules, which need the table.

Only `spec.replicas` and the pod template are read (docs/cluster.md#statefulsets); every
other spec field a real manifest carries is accepted as raw data, as a Job's are
(docs/simulate.md#statefulsets). Like a Pod's, its status is no part of a manifest.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from scheduler.api.base import ApiModel, Int32
from scheduler.api.plain_pod import QueuedByLabel
from scheduler.api.pod import PodTemplateSpec


class StatefulSetSpec(ApiModel):
    replicas: Int32 = 1
    template: PodTemplateSpec
    # Accepted, not read.
    service_name: str | None = None
    selector: dict[str, Any] | None = None
    pod_management_policy: str | None = None
    update_strategy: dict[str, Any] | None = None
    volume_claim_templates: list[dict[str, Any]] | None = None
    min_ready_seconds: Int32 | None = None
    revision_history_limit: Int32 | None = None
    persistent_volume_claim_retention_policy: dict[str, Any] | None = None
    ordinals: dict[str, Any] | None = None


class StatefulSet(QueuedByLabel):
    namespaced: ClassVar[bool] = True

    api_version: Literal["apps/v1"] = "apps/v1"
    kind: Literal["StatefulSet"] = "StatefulSet"
    spec: StatefulSetSpec  # the status is read raw, in cluster mode (runtime/kube/statefulsets.py)
