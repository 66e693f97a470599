"""The simulator's Scenario (`simulation.queuescope.io/v1alpha1`, docs/simulate.md).

Events reference workloads as "namespace/name" ("name" alone means the "default"
namespace, as for objects without a namespace). Two additions to docs/simulate.md, both
optional: `failed: true` on a `finish` event (the workload finishes with
Finished=True reason Failed instead of Succeeded), and `activate` (the reverse of
`deactivate`: sets spec.active=true).

`apply` holds a whole input document. It is decoded by `decode_object` before the
Scenario itself is validated (errors are reported under `spec.events[i].apply`), so
the model holds a typed object, never raw data.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, InstanceOf, SerializeAsAny

from scheduler.api.admissioncheck import CheckState
from scheduler.api.base import ApiModel, DurationMicros, Int32, Timestamp, TypedObject
from scheduler.api.meta import KubeObject

EventAction = Literal[
    "podsReady", "finish", "apply", "delete", "deactivate", "activate", "setCheckState"
]
EVENT_ACTIONS: tuple[EventAction, ...] = (
    "podsReady",
    "finish",
    "apply",
    "delete",
    "deactivate",
    "activate",
    "setCheckState",
)


def split_ref(ref: str) -> tuple[str, str]:
    """("namespace", "name") of a "namespace/name" reference; no namespace means "default"."""
    namespace, sep, name = ref.partition("/")
    if not sep:
        return "default", ref
    return namespace, name


class DeleteTarget(ApiModel):
    kind: str
    namespace: str | None = None
    name: str


class CheckStateChange(ApiModel):
    """What an admission check's controller does: set the check's state on a workload
    (docs/simulate.md, docs/scheduling.md#admission-checks)."""

    workload: str
    check: str
    state: CheckState
    message: str = ""
    requeue_after_seconds: Int32 | None = None


class ScenarioEvent(ApiModel):
    at: DurationMicros  # offset from spec.startTime, exact microseconds
    pods_ready: str | None = None
    finish: str | None = None
    failed: bool = False  # only with `finish`
    apply: SerializeAsAny[InstanceOf[TypedObject]] | None = None
    delete: DeleteTarget | None = None
    deactivate: str | None = None
    activate: str | None = None
    set_check_state: CheckStateChange | None = None

    @property
    def actions(self) -> list[EventAction]:
        """The actions set on this event (validation requires exactly one)."""
        values = {
            "podsReady": self.pods_ready,
            "finish": self.finish,
            "apply": self.apply,
            "delete": self.delete,
            "deactivate": self.deactivate,
            "activate": self.activate,
            "setCheckState": self.set_check_state,
        }
        return [action for action in EVENT_ACTIONS if values[action] is not None]

    @property
    def action(self) -> EventAction:
        return self.actions[0]

    @property
    def target(self) -> tuple[str, str] | None:
        """(namespace, name) of the workload a podsReady/finish/(de)activate event names."""
        change = self.set_check_state
        for ref in (
            self.pods_ready,
            self.finish,
            self.deactivate,
            self.activate,
            change.workload if change is not None else None,
        ):
            if ref is not None:
                return split_ref(ref)
        return None


class ScenarioSpec(ApiModel):
    start_time: Timestamp | None = None
    cycles: Int32 | None = None
    until_idle: bool | None = None
    events: list[ScenarioEvent] = Field(default_factory=list)


class Scenario(KubeObject):
    api_version: Literal["simulation.queuescope.io/v1alpha1"] = "simulation.queuescope.io/v1alpha1"
    kind: Literal["Scenario"] = "Scenario"
    spec: ScenarioSpec = Field(default_factory=ScenarioSpec)
