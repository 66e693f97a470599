"""Why pending as data: the condition message is rendered from the blockers."""

from __future__ import annotations

from scheduler.core.blockers import (
    Blocker,
    BlockerKind,
    PendingWhy,
    PodSetBlockers,
    other,
    policy,
)

QUOTA = Blocker(
    BlockerKind.QUOTA,
    "insufficient unused quota for cpu in flavor on-demand, 2500m more needed",
    "on-demand",
    "cpu",
    "2500m",
    requested=4500,
    available=2000,
)
TAINT = Blocker(BlockerKind.TAINT, "untolerated taint {gpu=true:NoSchedule} in flavor a100", "a100")


def test_pod_sets_render_in_kueue_wording_and_list_their_blockers_in_order() -> None:
    why = PendingWhy(
        (
            PodSetBlockers("main", (QUOTA, TAINT)),
            PodSetBlockers("side", (Blocker(BlockerKind.OTHER, "bad selector"),), error=True),
        )
    )
    assert why.message == (
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in "
        "flavor on-demand, 2500m more needed, untolerated taint {gpu=true:NoSchedule} in "
        "flavor a100; failed to assign flavors to pod set side: bad selector"
    )
    assert [b.kind for b in why.blockers] == ["Quota", "Taint", "Other"]


def test_preemption_is_a_suffix_and_a_last_blocker() -> None:
    why = PendingWhy((PodSetBlockers("main", (QUOTA,)),)).with_preemptions(2)
    assert why.message.endswith("2500m more needed. Pending the preemption of 2 workload(s)")
    assert why.blockers[-1] == Blocker("Preemption", "Pending the preemption of 2 workload(s)")
    assert why.with_preemptions(3).blockers[0] is QUOTA


def test_whole_message_blockers() -> None:
    assert policy("ClusterQueue cq is inactive").message == "ClusterQueue cq is inactive"
    assert policy("ClusterQueue cq is inactive").blockers == (
        Blocker("Policy", "ClusterQueue cq is inactive"),
    )
    evicted = other("Preempted to accommodate a workload")
    assert (evicted.message, [b.kind for b in evicted.blockers]) == (
        "Preempted to accommodate a workload",
        ["Other"],
    )
    assert PendingWhy().message == "" and PendingWhy().blockers == ()
