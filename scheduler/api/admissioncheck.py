"""AdmissionCheck (`kueue.x-k8s.io/v1beta1`, cluster-scoped, docs/scheduling.md#admission-checks).

An AdmissionCheck names a controller outside queuescope that decides, per Workload,
whether a quota reservation may turn into an admission (KEP-993's two-phase
admission). queuescope never evaluates a check itself: it reads the check's `Active`
condition (which gates the ClusterQueues that name it) and the per-Workload states the
controller writes into `Workload.status.admissionChecks`.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from scheduler.api.base import ApiModel, Int64
from scheduler.api.meta import Condition, KueueV1Beta1Object, condition_is_true

ADMISSION_CHECK_ACTIVE: Final = "Active"

CheckState = Literal["Pending", "Ready", "Retry", "Rejected"]
CHECK_STATES: tuple[CheckState, ...] = ("Pending", "Ready", "Retry", "Rejected")


class AdmissionCheckParametersReference(ApiModel):
    """The object holding the check's own configuration (the controller reads it)."""

    api_group: str
    kind: str
    name: str


class AdmissionCheckSpec(ApiModel):
    controller_name: str
    # v1beta1 only, deprecated and not read by queuescope (the delay of a retry comes
    # from the controller's `requeueAfterSeconds`); kept so objects round-trip.
    retry_delay_minutes: Int64 | None = 15
    parameters: AdmissionCheckParametersReference | None = None


class AdmissionCheckStatus(ApiModel):
    conditions: list[Condition] = Field(default_factory=list)


class AdmissionCheck(KueueV1Beta1Object):
    kind: Literal["AdmissionCheck"] = "AdmissionCheck"
    # Optional in the CRD (an object without one names no controller and stays inactive).
    spec: AdmissionCheckSpec | None = None
    status: AdmissionCheckStatus = Field(default_factory=AdmissionCheckStatus)

    @property
    def active(self) -> bool:
        """Whether the check's controller says it is ready to evaluate (`Active=True`)."""
        return condition_is_true(self.status.conditions, ADMISSION_CHECK_ACTIVE)


__all__ = [
    "ADMISSION_CHECK_ACTIVE",
    "CHECK_STATES",
    "AdmissionCheck",
    "AdmissionCheckParametersReference",
    "AdmissionCheckSpec",
    "AdmissionCheckStatus",
    "CheckState",
]
