"""Why a workload is pending, as data: the blockers of its last attempt.

The core decides why a head was not admitted (flavor assignment, the cycle's policies,
queue resolution) and records it here; the `QuotaReserved=False` message is rendered
from these records, never the other way round, so whoever reads the core (the
runtime's snapshots, the dashboard) gets the flavor, resource and amounts without
parsing text. The wording of the rendered messages is Kueue's (docs/scheduling.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final


class BlockerKind:
    """What kind of thing kept a workload from being admitted (plain strings: they go
    into JSON and YAML as they are)."""

    QUOTA: Final = "Quota"  # not enough unused quota now: `amount` more is needed
    CAPACITY: Final = "Capacity"  # beyond what the ClusterQueue could ever get (`amount`)
    TAINT: Final = "Taint"  # a flavor's taint the pod set does not tolerate
    NODE_AFFINITY: Final = "NodeAffinity"  # a flavor's node labels the pod set does not match
    FLAVOR_NOT_FOUND: Final = "FlavorNotFound"  # the ClusterQueue names a flavor that is missing
    POLICY: Final = "Policy"  # the ClusterQueue or LocalQueue, the namespace, validation, waiting
    PREEMPTION: Final = "Preemption"  # waiting for preempted workloads to leave
    ADMISSION_CHECK: Final = "AdmissionCheck"  # an admission check not Ready (`check`, `state`)
    OTHER: Final = "Other"  # anything else (an eviction, a selector error, a retry)


@dataclass(frozen=True, slots=True)
class Blocker:
    """One thing that kept a workload from being admitted at its last attempt.

    `message` is this blocker's part of the condition message. `flavor` and `resource`
    are empty where they do not apply; `amount` is the Kubernetes quantity the message
    prints (the shortfall for `Quota`, the maximum for `Capacity`), and `requested` and
    `available` the two scheduler values it was computed from (the requests of the pod
    sets considered so far, and the unused quota or the maximum capacity).
    """

    kind: str
    message: str
    flavor: str = ""
    resource: str = ""
    amount: str = ""
    requested: int | None = None
    available: int | None = None
    check: str = ""  # AdmissionCheck: its name
    state: str = ""  # AdmissionCheck: its state on the workload (Pending, Retry, ...)


@dataclass(frozen=True, slots=True)
class PodSetBlockers:
    """Why one pod set got no flavors: its blockers (ordered by their text, as Kueue
    prints them), or a selector error that stopped the scan."""

    pod_set: str
    blockers: tuple[Blocker, ...]
    error: bool = False  # the scan failed (a selector Kueue cannot evaluate)

    def render(self) -> str:
        if self.error:
            return f"failed to assign flavors to pod set {self.pod_set}: {self.blockers[0].message}"
        reasons = ", ".join(b.message for b in self.blockers)
        return f"couldn't assign flavors to pod set {self.pod_set}: {reasons}"


@dataclass(frozen=True, slots=True)
class PendingWhy:
    """Why a workload is pending after its last attempt, and the message rendered from it.

    Either one whole-message blocker (a policy, an eviction, a retry) or the pod sets
    that got no flavors; `preempting` counts the workloads being preempted for it.
    """

    pod_sets: tuple[PodSetBlockers, ...] = ()
    whole: Blocker | None = None
    preempting: int = 0
    # The admission checks it waits for, each its own blocker; `whole` holds the message.
    checks: tuple[Blocker, ...] = ()
    message: str = field(init=False, compare=False)
    # Every blocker, in the order the message names them. Built once: a cycle records one
    # PendingWhy for all the workloads blocked the same way, and every reader of them then
    # shares this tuple (docs/benchmarks.md, "Cluster-mode memory").
    blockers: tuple[Blocker, ...] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        body = self.whole.message if self.whole is not None else ""
        if self.pod_sets:
            body = "; ".join(ps.render() for ps in self.pod_sets)
        if self.preempting:
            body += f". {_preemption_text(self.preempting)}"
        object.__setattr__(self, "message", body)
        found = [b for ps in self.pod_sets for b in ps.blockers]
        if self.checks:
            found.extend(self.checks)
        elif not self.pod_sets and self.whole is not None:
            found.append(self.whole)
        if self.preempting:
            found.append(Blocker(BlockerKind.PREEMPTION, _preemption_text(self.preempting)))
        object.__setattr__(self, "blockers", tuple(found))

    def with_preemptions(self, count: int) -> PendingWhy:
        """The same blockers, now waiting for `count` preempted workloads to leave."""
        return PendingWhy(self.pod_sets, self.whole, count, self.checks)


def _preemption_text(count: int) -> str:
    return f"Pending the preemption of {count} workload(s)"


def policy(message: str) -> PendingWhy:
    """Pending because of a rule, not of quota (a stopped or inactive queue, ...)."""
    return PendingWhy(whole=Blocker(BlockerKind.POLICY, message))


def other(message: str) -> PendingWhy:
    """Pending for a reason that names no flavor or rule (an eviction, a retry)."""
    return PendingWhy(whole=Blocker(BlockerKind.OTHER, message))


def waiting_for_checks(message: str, checks: Sequence[tuple[str, str]]) -> PendingWhy:
    """Pending on admission checks: `message` as a whole, one blocker per (check, state)."""
    return PendingWhy(
        whole=Blocker(BlockerKind.OTHER, message),
        checks=tuple(
            Blocker(
                BlockerKind.ADMISSION_CHECK,
                f"waiting for admission check {name} ({state})",
                check=name,
                state=state,
            )
            for name, state in checks
        ),
    )


NOT_TRIED = PendingWhy()  # an entry the cycle has not nominated (the message is empty)
