"""Priority classes (docs/scheduling.md#priority-resolution): WorkloadPriorityClass and Kubernetes'
PriorityClass.

Both carry `value` at the top level (no spec), as upstream.
"""

from __future__ import annotations

from typing import Literal

from scheduler.api.base import Int32
from scheduler.api.meta import KubeObject, KueueV1Beta1Object


class WorkloadPriorityClass(KueueV1Beta1Object):
    kind: Literal["WorkloadPriorityClass"] = "WorkloadPriorityClass"
    value: Int32
    description: str = ""


class PriorityClass(KubeObject):
    api_version: Literal["scheduling.k8s.io/v1"] = "scheduling.k8s.io/v1"
    kind: Literal["PriorityClass"] = "PriorityClass"
    value: Int32
    global_default: bool = False
    description: str = ""
    # Accepted, ignored: pod preemption by the kube-scheduler is not our concern.
    preemption_policy: Literal["PreemptLowerPriority", "Never"] | None = None
