"""Immutability rules applied when an object is replaced (docs/scheduling.md#localqueue, #workload,
#resourceflavor)."""

from __future__ import annotations

from scheduler.api import LocalQueue, ResourceFlavor, Workload, validate_update
from tests.unit.api.support import decode

RESERVED_WORKLOAD = """
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: wl, namespace: ns}
spec:
  queueName: lq
  priorityClassName: high
  priority: 10
  priorityClassSource: kueue.x-k8s.io/workloadpriorityclass
  podSets:
  - name: main
    count: 2
    template: {spec: {containers: [{name: c, resources: {requests: {cpu: '1'}}}]}}
status:
  admission:
    clusterQueue: cq
    podSetAssignments: [{name: main, flavors: {cpu: f}, resourceUsage: {cpu: '2'}, count: 2}]
  conditions:
  - type: QuotaReserved
    status: "True"
    reason: QuotaReserved
    lastTransitionTime: "2026-01-01T00:00:00Z"
  reclaimablePods: [{name: main, count: 1}]
"""


def workload(text: str) -> Workload:
    obj = decode(text)
    assert isinstance(obj, Workload)
    return obj


def paths(old: object, new: object) -> list[str]:
    assert isinstance(old, LocalQueue | Workload | ResourceFlavor)
    assert isinstance(new, LocalQueue | Workload | ResourceFlavor)
    return [e.path for e in validate_update(old, new)]


def test_local_queue_cluster_queue_is_immutable() -> None:
    lq = (
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: "
        "{name: q}\nspec: {clusterQueue: %s}\n"
    )
    old, new = decode(lq % "a"), decode(lq % "b")
    errors = validate_update(old, new)
    assert [(e.path, e.detail) for e in errors] == [("spec.clusterQueue", "field is immutable")]
    stopped = decode(lq.replace("clusterQueue: %s}", "clusterQueue: a, stopPolicy: Hold}"))
    assert validate_update(old, stopped) == []


def test_reserved_workload_fields_are_immutable() -> None:
    old = workload(RESERVED_WORKLOAD)
    changed = workload(
        RESERVED_WORKLOAD.replace("queueName: lq", "queueName: other")
        .replace("priorityClassName: high", "priorityClassName: low")
        .replace(
            "priorityClassSource: kueue.x-k8s.io/workloadpriorityclass",
            "priorityClassSource: scheduling.k8s.io/priorityclass",
        )
        .replace("cpu: '1'", "cpu: '2'")
        .replace("resourceUsage: {cpu: '2'}", "resourceUsage: {cpu: '4'}")
    )
    assert paths(old, changed) == [
        "spec.podSets",
        "spec.queueName",
        "spec.priorityClassName",
        "spec.priorityClassSource",
    ]
    # Priority itself and activation may change.
    assert paths(old, workload(RESERVED_WORKLOAD.replace("priority: 10", "priority: 20"))) == []


def test_a_reserved_workload_may_change_its_workload_priority_class() -> None:
    """Kueue v0.19.2: a running workload's WorkloadPriorityClass (and so its priority)
    may change; the class may not go, nor become a pod PriorityClass, and the maximum
    execution time is fixed."""
    old = workload(RESERVED_WORKLOAD)
    renamed = RESERVED_WORKLOAD.replace("priorityClassName: high", "priorityClassName: low")
    assert paths(old, workload(renamed.replace("priority: 10", "priority: 1"))) == []
    dropped = RESERVED_WORKLOAD.replace("  priorityClassName: high\n", "").replace(
        "  priorityClassSource: kueue.x-k8s.io/workloadpriorityclass\n", ""
    )
    assert paths(old, workload(dropped)) == ["spec.priorityClassSource"]
    bounded = RESERVED_WORKLOAD.replace(
        "priority: 10", "priority: 10\n  maximumExecutionTimeSeconds: 60"
    )
    assert paths(old, workload(bounded)) == ["spec.maximumExecutionTimeSeconds"]


def test_update_errors_name_the_fields_of_the_version_written() -> None:
    old = workload(RESERVED_WORKLOAD)
    v1beta2 = (
        RESERVED_WORKLOAD.replace("v1beta1", "v1beta2")
        .replace("queueName: lq", "queueName: other")
        .replace("  priorityClassName: high\n", "")
        .replace(
            "  priorityClassSource: kueue.x-k8s.io/workloadpriorityclass\n",
            "  priorityClassRef: {group: scheduling.k8s.io, kind: PriorityClass, name: low}\n",
        )
    )
    assert paths(old, workload(v1beta2)) == [
        "spec.queueName",
        "spec.priorityClassRef.name",
        "spec.priorityClassRef",
    ]


def test_fields_are_mutable_without_reservation() -> None:
    pending = RESERVED_WORKLOAD.replace('status: "True"', 'status: "False"')
    old = workload(pending)
    new = workload(
        pending.replace("queueName: lq", "queueName: other").replace(
            "count: 2\n    template", "count: 3\n    template"
        )
    )
    assert paths(old, new) == []


def test_reservation_known_to_the_caller_overrides_the_status() -> None:
    # The runtime and the simulator keep reservations in the core: they pass `reserved`.
    pending = RESERVED_WORKLOAD.replace('status: "True"', 'status: "False"')
    moved = pending.replace("queueName: lq", "queueName: other")
    errors = validate_update(workload(pending), workload(moved), reserved=True)
    assert [(e.path, e.detail) for e in errors] == [("spec.queueName", "field is immutable")]
    old = workload(RESERVED_WORKLOAD)
    moved_reserved = workload(RESERVED_WORKLOAD.replace("queueName: lq", "queueName: other"))
    assert validate_update(old, moved_reserved, reserved=False) == []


def test_reclaimable_pods_may_not_decrease_while_reserved() -> None:
    old = workload(RESERVED_WORKLOAD)
    more = workload(RESERVED_WORKLOAD.replace("count: 1}]", "count: 2}]"))
    assert paths(old, more) == []
    fewer = workload(
        RESERVED_WORKLOAD.replace("[{name: main, count: 1}]", "[{name: main, count: 0}]")
    )
    errors = validate_update(old, fewer)
    assert [e.path for e in errors] == ["status.reclaimablePods[main].count"]
    assert "cannot be less than 1" in errors[0].detail
    gone = workload(
        RESERVED_WORKLOAD.replace(
            "reclaimablePods: [{name: main, count: 1}]", "reclaimablePods: []"
        )
    )
    assert [(e.path, e.detail) for e in validate_update(old, gone)] == [
        ("status.reclaimablePods[main]", "Required value: cannot be removed")
    ]


def test_flavor_spec_immutable_once_topology_is_set() -> None:
    rf = (
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: "
        "{name: f}\nspec: {nodeLabels: {pool: %s}%s}\n"
    )
    plain_old, plain_new = decode(rf % ("a", "")), decode(rf % ("b", ""))
    assert validate_update(plain_old, plain_new) == []
    tas_old, tas_new = (
        decode(rf % ("a", ", topologyName: t")),
        decode(rf % ("b", ", topologyName: t")),
    )
    errors = validate_update(tas_old, tas_new)
    assert [(e.path, e.detail) for e in errors] == [
        ("spec", "resourceFlavorSpec are immutable when topologyName is set")
    ]
    assert validate_update(tas_old, decode(rf % ("a", ", topologyName: t"))) == []
