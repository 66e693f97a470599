"""Which Workload status differences are worth a write (docs/operations.md, "Workload
status writes").

The core renders a status for every workload it knows; the leader compares it with
the server's. Most differences are decisions (an admission, an eviction, `Finished`,
`spec.active`) and are written at once. One kind is not a decision: the
`QuotaReserved=False` condition a cycle leaves on a workload it could not admit (with
the `resourceRequests` rendered beside it), which says why the workload waits. Writing
that for every pending workload whenever a cycle looks at it is what made a start
over 100k pending Workloads write 100k times. So a *pending-only* difference is
written only when

* it is material: the server holds no `QuotaReserved` condition yet, or its status or
  reason differ, or the message differs by more than its quantities ("3 more needed"
  becoming "5 more needed" is not news; another resource or flavor is), or
  `resourceRequests` differ; a different `lastTransitionTime` or
  `observedGeneration` alone is never a reason to write, nor is a core that says less
  than the server (a new leader whose cycles have not reached the workload yet); and
* the workload is near the head: queued at a position below the window in its
  ClusterQueue, or not in any queue (inadmissible: nothing else would tell the user).

Everything else a reader may ask (the position, every pending workload's reason) is
answered by the visibility API from the core, never from written conditions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from scheduler.runtime.kube.normalize import normalized

QUOTA_RESERVED = "QuotaReserved"
DECISION = -1  # the rank of a write that carries a decision: before any pending one

# A number standing alone ("3 more needed", "(1 > 0)", "500m"), not part of a name
# such as "flavor-2" or "v1".
_QUANTITY = re.compile(r"(?<![\w.-])\d+(?:\.\d+)?[A-Za-z]*")


def mask_quantities(message: str) -> str:
    return _QUANTITY.sub("#", message)


def _pending_condition(status: Any) -> dict[str, Any] | None:
    for c in (status or {}).get("conditions") or []:
        if c.get("type") == QUOTA_RESERVED and c.get("status") == "False":
            return dict(c)
    return None


def _without_pending(status: Any) -> Any:
    """The status minus the pending condition and the resourceRequests beside it."""
    out = dict(status or {})
    out.pop("resourceRequests", None)
    conditions = [
        c
        for c in out.get("conditions") or []
        if not (c.get("type") == QUOTA_RESERVED and c.get("status") == "False")
    ]
    out["conditions"] = conditions
    return normalized(out)


def _gist(condition: dict[str, Any] | None) -> tuple[str, str, str] | None:
    if condition is None:
        return None
    return (
        str(condition.get("status", "")),
        str(condition.get("reason", "")),
        mask_quantities(str(condition.get("message", ""))),
    )


def _news(desired: dict[str, Any], current: dict[str, Any]) -> bool:
    """Whether the core's pending condition or resourceRequests tell a reader something
    the server's copy does not. A core that says less than the server (a new leader
    whose cycles have not looked at the workload yet) is no reason to erase it."""
    mine = _pending_condition(desired)
    requests = desired.get("resourceRequests")
    if mine is not None and _gist(mine) != _gist(_pending_condition(current)):
        return True
    return requests is not None and requests != current.get("resourceRequests")


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do with one workload's difference."""

    write: bool
    pending_only: bool = False  # the difference is the pending condition alone
    deferred: bool = False  # material, but beyond the head window: not now


NOTHING = Verdict(write=False)
DECIDE = Verdict(write=True)


def judge(desired: Any, current: Any, position: int | None, window: int) -> Verdict:
    """Whether the status `desired` (the core's) is worth writing over `current` (the
    server's) for a workload at `position` in its ClusterQueue (None: not queued)."""
    d, c = normalized(desired or {}), normalized(current or {})
    if d == c:
        return NOTHING
    if _without_pending(d) != _without_pending(c):
        return DECIDE
    if not _news(d, c):
        return Verdict(write=False, pending_only=True)
    if position is not None and position >= window:
        return Verdict(write=False, pending_only=True, deferred=True)
    return Verdict(write=True, pending_only=True)
