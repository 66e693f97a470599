"""Object metadata and conditions (meta/v1 ObjectMeta and Condition)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from scheduler.api.base import ApiModel, Int64, OmitEmptyModel, Timestamp, TypedObject
from scheduler.api.versions import KUEUE_V1BETA1, KUEUE_V1BETA2

ConditionStatus = Literal["True", "False", "Unknown"]


class TemplateMeta(OmitEmptyModel):
    """ObjectMeta with every field optional: the metadata of an embedded pod template.

    All of ObjectMeta's fields exist in the Kubernetes schema, so none of them is an
    "unknown field"; the scheduler itself only reads labels and annotations.
    """

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: Int64 | None = None
    creation_timestamp: Timestamp | None = None
    deletion_timestamp: Timestamp | None = None
    deletion_grace_period_seconds: Int64 | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    # Accepted and carried through untouched: they matter to controllers, not to quota.
    owner_references: list[dict[str, Any]] = Field(default_factory=list)
    finalizers: list[str] = Field(default_factory=list)
    managed_fields: list[dict[str, Any]] = Field(default_factory=list)
    self_link: str | None = None


class ObjectMeta(TemplateMeta):
    """Metadata of a top-level object: the name is what identifies it, so it is required."""

    name: str


class KubeObject(TypedObject):
    """A top-level Kubernetes object: `apiVersion`, `kind` and `metadata`."""

    metadata: ObjectMeta

    @property
    def namespaced_name(self) -> str:
        """`namespace/name` for namespaced objects, `name` otherwise (the usual display key)."""
        if self.metadata.namespace:
            return f"{self.metadata.namespace}/{self.metadata.name}"
        return self.metadata.name


class KueueV1Beta1Object(KubeObject):
    """An object of Kueue's API group in its v1beta1 form (docs/api-versions.md)."""

    api_version: Literal["kueue.x-k8s.io/v1beta1"] = KUEUE_V1BETA1


class KueueV1Beta2Object(KubeObject):
    """An object of Kueue's API group in its v1beta2 form (docs/api-versions.md)."""

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = KUEUE_V1BETA2


class Condition(ApiModel):
    """metav1.Condition."""

    type: str
    status: ConditionStatus
    reason: str
    message: str = ""
    last_transition_time: Timestamp
    observed_generation: Int64 | None = None

    @property
    def is_true(self) -> bool:
        return self.status == "True"


def find_condition(conditions: list[Condition], condition_type: str) -> Condition | None:
    for condition in conditions:
        if condition.type == condition_type:
            return condition
    return None


def condition_is_true(conditions: list[Condition], condition_type: str) -> bool:
    condition = find_condition(conditions, condition_type)
    return condition is not None and condition.is_true


__all__ = [
    "Condition",
    "ConditionStatus",
    "KubeObject",
    "ObjectMeta",
    "TemplateMeta",
    "condition_is_true",
    "find_condition",
]


def controller_reference(api_version: str, kind: str, name: str, uid: str) -> dict[str, Any]:
    """The owner reference an integration puts on the Workload it makes for an object:
    that object is its controller, and blocks the Workload's deletion by the garbage
    collector until it is gone."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
