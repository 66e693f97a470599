"""The what-if dry run (scheduler/core/what_if.py, docs/visibility-api.md#what-if).

Two properties carry most of the weight: a dry run changes nothing (a full dump of the
scheduler's object graph is equal before and after), and its answer is what really
happens when the workload is then created and the next cycle runs.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, cast

from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from scheduler.api.decode import decode_object
from scheduler.api.workload import Workload
from scheduler.core.config import SchedulerConfig, WaitForPodsReady
from scheduler.core.cycle import run_cycle
from scheduler.core.queue.fifo import FifoQueue
from scheduler.core.scheduler import Scheduler
from scheduler.core.what_if import (
    ADMITTED,
    INADMISSIBLE,
    PENDING,
    PREEMPTING,
    QUEUED,
    WhatIf,
    hypothetical,
    what_if,
)
from tests.unit.core.builders import (
    Cluster,
    Json,
    basic_cluster,
    flavor,
    local_queue,
    namespace,
    simple_cq,
    workload,
)

NS = "team-a"
CPU = "cpu"


def ask(c: Cluster, doc: Json) -> WhatIf:
    obj = decode_object(doc)
    assert isinstance(obj, Workload)
    return what_if(c.s, hypothetical(c.s, obj))


# ------------------------------------------------------------------ a full dump

# Memos of pure functions of the state, which any reader may fill: the ClusterQueues'
# inactive reasons (Scheduler), the offsets of a SortedRuns' runs, and the quota tree's
# children and ancestor chains (derived from its structure, shared with its clones).
_MEMOS = frozenset({"_inactive", "_starts", "_children", "_chains"})


def dump(value: object, seen: dict[int, int] | None = None) -> object:
    """Every value reachable from `value`, as nested tuples, dicts sorted by key."""
    seen = {} if seen is None else seen
    if value is None or isinstance(value, bool | int | float | str | bytes | enum.Enum):
        return value
    if _opaque_callable(value):
        return "<callable>"
    if id(value) in seen:
        return ("<seen>", seen[id(value)])
    seen[id(value)] = len(seen)
    if isinstance(value, Mapping):
        items = [(repr(k), dump(v, seen)) for k, v in value.items()]
        return ("map", tuple(sorted(items, key=lambda kv: kv[0])))
    if isinstance(value, set | frozenset):
        return ("set", tuple(sorted(repr(dump(v, seen)) for v in value)))
    return _dump_object(value, seen)


def _opaque_callable(value: object) -> bool:
    return callable(value) and not hasattr(value, "__dict__") and not hasattr(value, "__slots__")


def _dump_object(value: object, seen: dict[int, int]) -> object:
    if isinstance(value, list | tuple):
        return ("seq", tuple(dump(v, seen) for v in value))
    fields: dict[str, Any] = {}
    for cls in type(value).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if hasattr(value, slot):
                fields[slot] = getattr(value, slot)
    fields.update(getattr(value, "__dict__", {}))
    if type(value).__module__ == "builtins" or not fields:
        return ("obj", type(value).__name__, repr(value))
    parts = tuple(
        (name, dump(v, seen))
        for name, v in sorted(fields.items())
        if name not in _MEMOS and not (callable(v) and not hasattr(v, "__dict__"))
    )
    return (type(value).__name__, parts)


def unchanged(c: Cluster, doc: Json) -> WhatIf:
    before = dump(c.s)
    answer = ask(c, doc)
    assert dump(c.s) == before, "the dry run changed the scheduler's state"
    return answer


# ------------------------------------------------------------------ examples


def test_fits_now_with_flavors_and_no_borrowing() -> None:
    c = basic_cluster(4)
    answer = unchanged(c, workload(NS, "w", "lq-a", {CPU: "3"}))
    assert answer.decision == ADMITTED
    assert answer.cluster_queue == "cq-a"
    assert answer.mode == "Fit"
    assert [(p.name, p.count, p.flavors, p.requests) for p in answer.pod_sets] == [
        ("main", 1, (("cpu", "default"),), (("cpu", 3000),))
    ]
    assert answer.borrowed == ()
    assert answer.placement is not None
    assert answer.placement.position_in_cluster_queue == 0
    assert answer.placement.pending_in_cluster_queue == 1


def test_too_big_is_pending_with_quota_blockers() -> None:
    c = basic_cluster(4)
    c.apply(workload(NS, "running", "lq-a", {CPU: "3"}))
    c.cycle()
    answer = unchanged(c, workload(NS, "w", "lq-a", {CPU: "2"}))
    assert answer.decision == PENDING
    assert answer.head
    kinds = [(b.kind, b.flavor, b.resource, b.amount) for b in answer.why.blockers]
    assert kinds == [("Quota", "default", "cpu", "1")]
    assert "insufficient unused quota for cpu in flavor default, 1 more needed" in (
        answer.why.message
    )


def test_behind_an_older_head_is_queued_with_its_position() -> None:
    c = basic_cluster(4, strategy="StrictFIFO")
    c.apply(
        workload(NS, "big", "lq-a", {CPU: "8"}, created=1),
        workload(NS, "other", "lq-a", {CPU: "1"}, created=2, priority=-1),
    )
    c.advance(10)
    # StrictFIFO: `big` stays the head; a new workload of priority 0 goes after it.
    answer = unchanged(c, workload(NS, "w", "lq-a", {CPU: "1"}))
    assert answer.decision == QUEUED
    assert not answer.head
    assert answer.mode == "Fit"  # what it would get at the head
    assert answer.why.message == (
        "the next cycle examines another workload of ClusterQueue cq-a first"
    )
    assert answer.placement is not None
    assert answer.placement.position_in_cluster_queue == 1
    assert answer.placement.position_in_local_queue == 1
    assert answer.placement.pending_in_cluster_queue == 3


def test_higher_priority_goes_first_and_is_admitted() -> None:
    c = basic_cluster(4, strategy="StrictFIFO")
    c.apply(workload(NS, "big", "lq-a", {CPU: "8"}, created=1))
    c.advance(10)
    answer = unchanged(c, workload(NS, "w", "lq-a", {CPU: "1"}, priority=5))
    assert answer.placement is not None
    assert answer.placement.position_in_cluster_queue == 0
    assert answer.decision == ADMITTED


def test_best_effort_parked_workloads_are_not_ahead() -> None:
    c = basic_cluster(4)
    c.apply(workload(NS, "big", "lq-a", {CPU: "8"}, created=1))
    c.advance(10)
    c.cycle()  # `big` does not fit: parked (BestEffortFIFO)
    queue = c.s.queues.queue("cq-a")
    assert isinstance(queue, FifoQueue)
    assert queue.is_parked(f"{NS}/big")
    answer = unchanged(c, workload(NS, "w", "lq-a", {CPU: "1"}))
    assert answer.placement is not None
    assert answer.placement.position_in_cluster_queue == 1  # listed after `big`
    assert answer.decision == ADMITTED  # but popped first


def test_borrowing_reports_the_amount_taken_from_the_cohort() -> None:
    c = Cluster()
    c.apply(
        namespace(NS),
        flavor("default"),
        simple_cq("cq-a", 2, cohort="co"),
        simple_cq("cq-b", 4, cohort="co"),
        local_queue(NS, "lq-a", "cq-a"),
    )
    answer = unchanged(c, workload(NS, "w", "lq-a", {CPU: "5"}))
    assert answer.decision == ADMITTED
    assert [(b.flavor, b.resource, b.amount) for b in answer.borrowed] == [("default", "cpu", 3000)]


def test_preemption_names_the_victims() -> None:
    c = Cluster()
    c.apply(
        namespace(NS),
        flavor("default"),
        simple_cq("cq-a", 4, preemption={"withinClusterQueue": "LowerPriority"}),
        local_queue(NS, "lq-a", "cq-a"),
        workload(NS, "low", "lq-a", {CPU: "4"}, priority=1),
    )
    c.cycle()
    answer = unchanged(c, workload(NS, "w", "lq-a", {CPU: "2"}, priority=10))
    assert answer.decision == PREEMPTING
    assert [(v.namespace, v.name, v.cluster_queue, v.reason) for v in answer.victims] == [
        (NS, "low", "cq-a", "InClusterQueue")
    ]


def test_a_rival_head_of_the_cohort_that_goes_first_takes_the_quota() -> None:
    # cq-b's head does not borrow and goes first (classic entry order); the cohort's
    # spare quota is then gone for ours, which would borrow.
    c = Cluster()
    c.apply(
        namespace(NS),
        flavor("default"),
        simple_cq("cq-a", 0, cohort="co"),
        simple_cq("cq-b", 4, cohort="co"),
        local_queue(NS, "lq-a", "cq-a"),
        local_queue(NS, "lq-b", "cq-b"),
        workload(NS, "rival", "lq-b", {CPU: "4"}),
    )
    answer = unchanged(c, workload(NS, "w", "lq-a", {CPU: "4"}, priority=10))
    assert answer.decision == PENDING
    assert answer.why.message == "Workload no longer fits after processing another workload"


def test_missing_and_stopped_local_queues_are_inadmissible() -> None:
    c = basic_cluster(4)
    answer = unchanged(c, workload(NS, "w", "nope", {CPU: "1"}))
    assert answer.decision == INADMISSIBLE
    assert answer.placement is None
    assert answer.why.message == "LocalQueue nope doesn't exist"
    c.apply(local_queue(NS, "stopped", "cq-a", stop_policy="Hold"))
    answer = unchanged(c, workload(NS, "w", "stopped", {CPU: "1"}))
    assert answer.why.message == "LocalQueue stopped is inactive"


def test_namespace_mismatch_is_inadmissible_but_placed() -> None:
    c = Cluster()
    c.apply(
        namespace(NS),
        flavor("default"),
        simple_cq("cq-a", 4, selector={"matchLabels": {"team": "x"}}),
        local_queue(NS, "lq-a", "cq-a"),
    )
    answer = unchanged(c, workload(NS, "w", "lq-a", {CPU: "1"}))
    assert answer.decision == INADMISSIBLE
    assert answer.placement is not None
    assert answer.why.message == "Workload namespace doesn't match ClusterQueue selector"


def test_blocked_admission_waits() -> None:
    config = SchedulerConfig(
        wait_for_pods_ready=WaitForPodsReady(enable=True, block_admission=True)
    )
    c = basic_cluster(8, config=config)
    c.apply(workload(NS, "running", "lq-a", {CPU: "1"}))
    c.cycle()
    answer = unchanged(c, workload(NS, "w", "lq-a", {CPU: "1"}))
    assert answer.decision == PENDING
    assert "waiting for all admitted workloads" in answer.why.message


# ------------------------------------------------------------------ properties

_PREEMPTION = st.sampled_from(
    [
        None,
        {"withinClusterQueue": "LowerPriority"},
        {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
        {
            "reclaimWithinCohort": "LowerPriority",
            "borrowWithinCohort": {"policy": "LowerPriority"},
        },
    ]
)
_SPECS = st.fixed_dictionaries(
    {
        "quota_a": st.integers(0, 6),
        "quota_b": st.integers(0, 6),
        "strategy": st.sampled_from(["BestEffortFIFO", "StrictFIFO"]),
        "preemption": _PREEMPTION,
        "existing": st.lists(
            st.tuples(st.sampled_from("ab"), st.integers(1, 5), st.integers(-2, 2)),
            max_size=6,
        ),
        "cycles": st.integers(0, 6),
        "fair": st.booleans(),
        "block": st.booleans(),  # waitForPodsReady.blockAdmission; nothing becomes ready
        # (LocalQueue, cpu per pod, priority, pods, minimum pods or None)
        "new": st.tuples(
            st.sampled_from("ab"),
            st.integers(1, 4),
            st.integers(-2, 5),
            st.integers(1, 3),
            st.one_of(st.none(), st.just(1)),
        ),
    }
)


def _scenario(spec: dict[str, Any]) -> Cluster:
    wait = WaitForPodsReady(enable=True, block_admission=True) if spec.get("block") else None
    config = SchedulerConfig(fair_sharing=bool(spec.get("fair")))
    if wait is not None:
        config = SchedulerConfig(fair_sharing=config.fair_sharing, wait_for_pods_ready=wait)
    c = Cluster(config)
    c.apply(namespace(NS), flavor("default"))
    for name, quota in (("a", spec["quota_a"]), ("b", spec["quota_b"])):
        c.apply(
            simple_cq(
                f"cq-{name}",
                quota,
                cohort="co",
                strategy=spec["strategy"],
                preemption=spec["preemption"],
            ),
            local_queue(NS, f"lq-{name}", f"cq-{name}"),
        )
    for i, (queue, cpu, priority) in enumerate(spec["existing"]):
        c.apply(workload(NS, f"w{i}", f"lq-{queue}", {CPU: str(cpu)}, priority=priority))
        if i < spec["cycles"]:
            c.cycle()
    c.advance(60)  # a new workload comes after every existing one of its priority
    return c


_PREEMPTING: dict[str, Any] = {
    "quota_a": 4,
    "quota_b": 0,
    "strategy": "BestEffortFIFO",
    "preemption": {"withinClusterQueue": "LowerPriority"},
    "existing": [("a", 4, 0)],
    "cycles": 1,
    "fair": False,
    "block": False,
    "new": ("a", 2, 5, 1, None),
}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_SPECS)
@example(_PREEMPTING)
@example({**_PREEMPTING, "block": True})  # a preemptor preempts while admission is blocked
@example({**_PREEMPTING, "fair": True, "new": ("a", 2, 5, 3, 1)})  # partial admission
# a rival head admitted first in the same cycle blocks the rest of it (blockAdmission)
@example(
    {
        **_PREEMPTING,
        "quota_a": 0,
        "quota_b": 2,
        "preemption": None,
        "existing": [("b", 1, 0)],
        "cycles": 0,
        "block": True,
        "new": ("a", 1, 0, 1, None),
    }
)
def test_the_answer_is_what_the_next_cycle_does_and_nothing_changes(spec: dict[str, Any]) -> None:
    c = _scenario(spec)
    queue, cpu, priority, count, min_count = spec["new"]
    doc = workload(
        NS,
        "new",
        f"lq-{queue}",
        {CPU: str(cpu)},
        priority=priority,
        count=count,
        min_count=min_count,
    )
    answer = unchanged(c, doc)
    event(f"decision: {answer.decision}")
    event(f"partial: {bool(answer.pod_sets) and answer.pod_sets[0].count < count}")
    # Now create it for real (created at the same instant) and run the next cycle.
    doc["metadata"].pop("creationTimestamp")
    obj = decode_object(doc)
    c.s.set_workload(hypothetical(c.s, cast(Workload, obj)))
    key = f"{NS}/new"
    cq = f"cq-{queue}"
    listed = c.pending(cq)
    assert answer.placement is not None
    assert listed.index(key) == answer.placement.position_in_cluster_queue
    assert len(listed) == answer.placement.pending_in_cluster_queue
    lq = [k for k in listed if c.s.objects.workloads[k].queue_name == f"lq-{queue}"]
    assert lq.index(key) == answer.placement.position_in_local_queue
    stats = run_cycle(c.s)
    assert (key in stats.admitted) == (answer.decision == ADMITTED)
    admission = c.s.objects.workloads[key].admission
    if admission is not None:  # the flavors and counts (partial admission) it said
        assert [
            (p.name, p.count, tuple(sorted(p.flavors.items()))) for p in admission.pod_sets
        ] == [(p.name, p.count, p.flavors) for p in answer.pod_sets]
    new_uid = c.s.objects.workloads[key].uid
    preempted_for_it = set()
    for victim in stats.preempted:
        condition = c.s.objects.workloads[victim].conditions.get("Preempted")
        if condition is not None and new_uid in condition.message:
            preempted_for_it.add(victim)
    expected = {f"{v.namespace}/{v.name}" for v in answer.victims}
    assert preempted_for_it == (expected if answer.decision == PREEMPTING else set())
    examined = c.s.objects.workloads[key].conditions.get("QuotaReserved") is not None
    assert examined == answer.head


def test_a_dry_run_does_not_change_the_next_cycles() -> None:
    spec = {
        "quota_a": 2,
        "quota_b": 3,
        "strategy": "BestEffortFIFO",
        "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
        "existing": [("a", 2, 0), ("b", 3, 1), ("a", 4, 2), ("b", 1, -1)],
        "cycles": 1,
    }
    plain, probed = _scenario(spec), _scenario(spec)
    unchanged(probed, workload(NS, "probe", "lq-a", {CPU: "3"}, priority=3))
    for _ in range(3):
        assert run_cycle(plain.s) == run_cycle(probed.s)
        # (A dump would differ in the nomination cache's keys: they hold object ids.)
        assert [plain.status(k) for k in sorted(plain.s.objects.workloads)] == [
            probed.status(k) for k in sorted(probed.s.objects.workloads)
        ]
        for cq in ("cq-a", "cq-b"):
            assert plain.pending(cq) == probed.pending(cq)
            assert plain.cq_status(cq) == probed.cq_status(cq)


def test_the_scheduler_type_is_what_the_dump_walks() -> None:
    # The dump must see into the scheduler (not stop at an opaque repr).
    c = basic_cluster(4)
    walked = dump(c.s)
    assert isinstance(walked, tuple)
    assert walked[0] == Scheduler.__name__
    assert "_workloads" in dict(cast(tuple[tuple[str, object], ...], walked[1]))


def test_a_plugin_queue_places_by_its_own_order() -> None:
    # A plugin written against PendingQueue alone (newest first): the interface's default
    # insertion_position and peek place and examine the new workload by that order.
    plugin = "tests.unit.runtime.plugin_queue:NewestFirstQueue"
    c = basic_cluster(4, config=SchedulerConfig(default_queue_plugin=plugin))
    c.apply(
        workload(NS, "old", "lq-a", {CPU: "8"}, created=1),
        workload(NS, "older", "lq-a", {CPU: "1"}, created=0, priority=1),
    )
    c.advance(10)
    answer = unchanged(c, workload(NS, "w", "lq-a", {CPU: "1"}))
    assert answer.placement is not None
    # priority first (`older`), then the newest: ahead of `old`.
    assert answer.placement.position_in_cluster_queue == 1
    assert answer.decision == QUEUED  # `older` is popped first
    doc = workload(NS, "w", "lq-a", {CPU: "1"})
    doc["metadata"].pop("creationTimestamp")
    c.s.set_workload(hypothetical(c.s, cast(Workload, decode_object(doc))))
    assert c.pending("cq-a") == [f"{NS}/older", f"{NS}/w", f"{NS}/old"]
    assert f"{NS}/w" not in run_cycle(c.s).admitted
