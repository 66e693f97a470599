"""Why a workload is still pending: its last `QuotaReserved=False` condition, with the
blockers its message names parsed out (the flavor, resource and amount, or the policy).

The messages are the core's own, in Kueue's wording (scheduling.md §7.4, §6.3): a pod
set's reasons are joined with ", " after "couldn't assign flavors to pod set <name>: ",
and pod sets with "; ". Parsing runs once per workload revision, when its snapshot entry
is built, never per request.
"""

from __future__ import annotations

import re
from typing import Final

from scheduler.core.workload import QUOTA_RESERVED, WorkloadState
from scheduler.runtime.snapshot import Blocker, WhyPending

_POD_SET_PREFIX: Final = re.compile(
    r"^(?:couldn't|failed to) assign flavors to pod set [^:]+: (?P<rest>.*)$"
)
_PREEMPTION_SUFFIX: Final = re.compile(r"\. Pending the preemption of \d+ workload\(s\)$")
# One reason of a pod set; amounts and taints never contain ", " followed by a letter
# sequence matching a reason start, so splitting on ", " before a known start is safe.
_REASON_START: Final = re.compile(
    r", (?=insufficient |untolerated taint |flavor \S+ (?:doesn't|not found))"
)
_UNUSED: Final = re.compile(
    r"^insufficient unused quota for (?P<resource>\S+) in flavor (?P<flavor>\S+), "
    r"(?P<amount>\S+) more needed$"
)
_CAPACITY: Final = re.compile(
    r"^insufficient quota for (?P<resource>\S+) in flavor (?P<flavor>\S+), .*"
    r"> maximum capacity \((?P<amount>[^)]*)\)$"
)
_TAINT: Final = re.compile(r"^untolerated taint .* in flavor (?P<flavor>\S+)$")
_AFFINITY: Final = re.compile(r"^flavor (?P<flavor>\S+) doesn't match node affinity$")
_NOT_FOUND: Final = re.compile(r"^flavor (?P<flavor>\S+) not found$")
_POLICY_PREFIXES: Final = (
    "ClusterQueue ",
    "Workload namespace doesn't match",
    "resources validation failed",
    "waiting for all admitted workloads",
    "LocalQueue ",
)


def _reason(text: str) -> Blocker:
    if m := _UNUSED.match(text):
        return Blocker("Quota", text, m["flavor"], m["resource"], m["amount"])
    if m := _CAPACITY.match(text):
        return Blocker("Capacity", text, m["flavor"], m["resource"], m["amount"])
    if m := _TAINT.match(text):
        return Blocker("Taint", text, m["flavor"])
    if m := _AFFINITY.match(text):
        return Blocker("NodeAffinity", text, m["flavor"])
    if m := _NOT_FOUND.match(text):
        return Blocker("FlavorNotFound", text, m["flavor"])
    return Blocker("Other", text)


def blockers(message: str) -> tuple[Blocker, ...]:
    """The blockers a `QuotaReserved=False` message names, in message order."""
    if not message:
        return ()
    found: list[Blocker] = []
    preemption = _PREEMPTION_SUFFIX.search(message)
    body = message[: preemption.start()] if preemption else message
    if body.startswith(_POLICY_PREFIXES):
        found.append(Blocker("Policy", body))
    else:
        for pod_set in body.split("; "):
            m = _POD_SET_PREFIX.match(pod_set)
            if m is None:
                found.append(Blocker("Other", pod_set))
                continue
            found.extend(_reason(part) for part in _REASON_START.split(m["rest"]) if part)
    if preemption:
        found.append(Blocker("Preemption", message[preemption.start() + 2 :]))
    return tuple(found)


def why_pending(wl: WorkloadState) -> WhyPending | None:
    """The workload's last `QuotaReserved=False` condition, or None if it has none."""
    reserved = wl.conditions.get(QUOTA_RESERVED)
    if reserved is None or reserved.status != "False":
        return None
    return WhyPending(
        reason=reserved.reason,
        message=reserved.message,
        since=reserved.last_transition,
        blockers=blockers(reserved.message),
    )
