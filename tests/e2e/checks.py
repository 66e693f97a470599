"""The test's admission check controller (docs/scheduling.md#admission-checks).

queuescope never evaluates a check: an external controller does. `CheckController`
plays that controller as upstream's do, with its own field manager and a forced
server-side apply on the status subresource: it sets an AdmissionCheck's `Active`
condition and writes its entry of a Workload's `status.admissionChecks` (a map keyed by
the check's name, so it owns only its own entry).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tests.e2e.cluster import KUEUE
from tests.e2e.harness import ControlPlane

FIELD_MANAGER = "e2e-check-controller"


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class CheckController:
    """The external controller of the checks a test names (whatever their
    `controllerName`: the test decides which checks it plays the controller of)."""

    plane: ControlPlane
    applied: list[tuple[str, str, str]] = field(default_factory=list)  # (workload, check, state)

    def _apply_status(self, doc: dict[str, Any]) -> None:
        self.plane.kubectl(
            "apply",
            "--server-side",
            "--subresource=status",
            # Upstream's check controllers force ownership of their entry (their apply
            # patches are forced), whoever wrote it last.
            "--force-conflicts",
            f"--field-manager={FIELD_MANAGER}",
            "-f",
            "-",
            input=json.dumps(doc),
        )

    def report_active(self, check: str, active: bool = True) -> None:
        """The check's `Active` condition, as its controller reports readiness."""
        self._apply_status(
            {
                "apiVersion": KUEUE,
                "kind": "AdmissionCheck",
                "metadata": {"name": check},
                "status": {
                    "conditions": [
                        {
                            "type": "Active",
                            "status": "True" if active else "False",
                            "reason": "Active" if active else "Paused",
                            "message": "The e2e controller is ready"
                            if active
                            else "The e2e controller is paused",
                            "lastTransitionTime": now_rfc3339(),
                        }
                    ]
                },
            }
        )

    def set_state(  # noqa: PLR0913 - the fields of one status.admissionChecks entry
        self,
        workload: dict[str, Any],
        check: str,
        state: str,
        message: str = "",
        *,
        requeue_after_seconds: int | None = None,
        pod_set_updates: list[dict[str, Any]] | None = None,
    ) -> None:
        """Write this check's entry of the Workload's `status.admissionChecks`."""
        entry: dict[str, Any] = {
            "name": check,
            "state": state,
            "message": message,
            "lastTransitionTime": now_rfc3339(),
        }
        if requeue_after_seconds is not None:
            entry["requeueAfterSeconds"] = requeue_after_seconds
        if pod_set_updates is not None:
            entry["podSetUpdates"] = pod_set_updates
        meta = workload["metadata"]
        self._apply_status(
            {
                "apiVersion": KUEUE,
                "kind": "Workload",
                "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
                "status": {"admissionChecks": [entry]},
            }
        )
        self.applied.append((meta["name"], check, state))


def active(cq: dict[str, Any]) -> dict[str, Any] | None:
    for c in (cq.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Active":
            return dict(c)
    return None
