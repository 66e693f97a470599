"""Workload rules (docs/scheduling.md#workload)."""

from __future__ import annotations

import textwrap

import pytest

from scheduler.api import Quantity, Workload
from tests.unit.api.support import decode, errors, has_error


def workload(body: str) -> str:
    return (
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: wl, namespace: ns}\n"
        + textwrap.dedent(body)
    )


def pod_sets(*items: str) -> str:
    return "spec:\n  podSets:\n" + "".join(f"  - {item}\n" for item in items)


SIMPLE = (
    "{name: main, count: 2, template: {spec: {containers: [{name: c, "
    "resources: {requests: {cpu: '1'}}}]}}}"
)

ADMITTED = """
spec:
  podSets:
  - name: main
    count: 3
    template: {spec: {containers: [{name: c, resources: {requests: {cpu: 500m}}}]}}
status:
  admission:
    clusterQueue: cq
    podSetAssignments:
    - name: main
      flavors: {cpu: default}
      resourceUsage: {cpu: 1500m}
      count: 3
  conditions:
  - type: QuotaReserved
    status: "True"
    reason: QuotaReserved
    message: Quota reserved in ClusterQueue cq
    lastTransitionTime: "2026-01-01T00:00:00Z"
  - type: Admitted
    status: "True"
    reason: Admitted
    message: The workload is admitted
    lastTransitionTime: "2026-01-01T00:00:00Z"
  reclaimablePods: [{name: main, count: 1}]
  requeueState: {count: 2, requeueAt: "2026-01-01T00:10:00Z"}
  accumulatedPastExexcutionTimeSeconds: 30
"""


def test_defaults() -> None:
    wl = decode(workload("spec:\n  podSets: [{template: {spec: {containers: [{name: c}]}}}]\n"))
    assert isinstance(wl, Workload)
    pod_set = wl.spec.pod_sets[0]
    assert (pod_set.name, pod_set.count, pod_set.min_count) == ("main", 1, None)
    spec = wl.spec
    assert (spec.queue_name, spec.priority, spec.priority_class_name) == ("", None, "")
    assert (spec.priority_class_source, spec.active) == ("", True)
    assert spec.maximum_execution_time_seconds is None
    status = wl.status
    assert status.admission is None
    assert status.conditions == []
    assert status.reclaimable_pods == []
    assert status.requeue_state is None
    assert not wl.has_quota_reservation


def test_admitted_workload() -> None:
    wl = decode(workload(ADMITTED))
    assert isinstance(wl, Workload)
    assert wl.has_quota_reservation
    admission = wl.status.admission
    assert admission is not None
    assignment = admission.pod_set_assignments[0]
    assert assignment.resource_usage == {"cpu": Quantity.parse("1.5")}
    assert assignment.flavors == {"cpu": "default"}
    assert wl.status.reclaimable_pods[0].count == 1
    assert wl.status.requeue_state is not None
    assert wl.status.requeue_state.count == 2
    assert wl.status.accumulated_past_exexcution_time_seconds == 30
    assert wl.to_dict()["status"]["accumulatedPastExexcutionTimeSeconds"] == 30


class TestPodSets:
    def test_at_least_one(self) -> None:
        has_error(workload("spec: {podSets: []}"), "spec.podSets", "must have at least 1 item")

    def test_at_most_eight(self) -> None:
        items = [SIMPLE.replace("main", f"p{i}") for i in range(9)]
        has_error(
            workload(pod_sets(*items)), "spec.podSets", "Too many: 9: must have at most 8 items"
        )

    def test_names_are_unique_labels(self) -> None:
        found = errors(workload(pod_sets(SIMPLE, SIMPLE.replace("main", "Main_1"))))
        assert found[0].path == "spec.podSets[1].name"
        assert "RFC 1123 label" in found[0].detail
        has_error(
            workload(pod_sets(SIMPLE, SIMPLE)), "spec.podSets[1].name", 'Duplicate value: "main"'
        )

    def test_count_not_negative(self) -> None:
        has_error(
            workload(pod_sets(SIMPLE.replace("count: 2", "count: -1"))),
            "spec.podSets[0].count",
            "must be greater than or equal to 0",
        )

    @pytest.mark.parametrize("min_count", [0, 3])
    def test_min_count_range(self, min_count: int) -> None:
        has_error(
            workload(pod_sets(SIMPLE.replace("count: 2", f"count: 2, minCount: {min_count}"))),
            "spec.podSets[0].minCount",
            "must be greater than or equal to 1 and less than or equal to count (2)",
        )

    def test_at_most_one_min_count(self) -> None:
        first = SIMPLE.replace("count: 2", "count: 2, minCount: 1")
        second = first.replace("main", "workers")
        has_error(
            workload(pod_sets(first, second)), "spec.podSets", "at most one podSet can use minCount"
        )

    @pytest.mark.parametrize(
        ("spec", "path"),
        [
            (
                "containers: [{name: c}, {name: x, resources: {requests: {pods: 1}}}]",
                "containers[1]",
            ),
            (
                "containers: [{name: c}], initContainers: [{name: x, resources: "
                "{limits: {pods: 1}}}]",
                "initContainers[0]",
            ),
        ],
    )
    def test_pods_resource_is_reserved(self, spec: str, path: str) -> None:
        found = errors(workload(pod_sets(f"{{template: {{spec: {{{spec}}}}}}}")))
        assert len(found) == 1
        assert found[0].path.startswith(f"spec.podSets[0].template.spec.{path}.resources.")
        assert found[0].path.endswith("[pods]")
        assert "the key is reserved for internal kueue use" in found[0].detail

    def test_negative_requests(self) -> None:
        has_error(
            workload(pod_sets(SIMPLE.replace("cpu: '1'", "cpu: '-1'"))),
            "spec.podSets[0].template.spec.containers[0].resources.requests[cpu]",
            "must be greater than or equal to 0",
        )

    def test_negative_overhead(self) -> None:
        has_error(
            workload(
                pod_sets("{template: {spec: {containers: [{name: c}], overhead: {memory: -1Mi}}}}")
            ),
            "spec.podSets[0].template.spec.overhead[memory]",
            "must be greater than or equal to 0",
        )

    def test_request_outside_int64(self) -> None:
        has_error(
            workload(pod_sets(SIMPLE.replace("cpu: '1'", "cpu: 10E"))),
            "spec.podSets[0].template.spec.containers[0].resources.requests[cpu]",
            "does not fit in a signed 64-bit integer",
        )

    def test_total_request_outside_int64(self) -> None:
        has_error(
            workload(
                pod_sets(SIMPLE.replace("cpu: '1'", "memory: 5E").replace("count: 2", "count: 2"))
            ),
            "spec.podSets[0]",
            "does not fit in a signed 64-bit integer",
        )


class TestSpec:
    def test_priority_class_name_needs_priority(self) -> None:
        has_error(
            workload(pod_sets(SIMPLE) + "  priorityClassName: high\n"),
            "spec.priority",
            "priority should not be nil when priorityClassName is set",
        )
        decode(workload(pod_sets(SIMPLE) + "  priorityClassName: high\n  priority: 100\n"))

    def test_priority_class_source_enum(self) -> None:
        has_error(
            workload(pod_sets(SIMPLE) + "  priorityClassSource: kueue\n"),
            "spec.priorityClassSource",
            "Unsupported value",
        )

    def test_priority_is_int32(self) -> None:
        has_error(
            workload(pod_sets(SIMPLE) + "  priority: -2147483649\n"), "spec.priority", "32-bit"
        )

    def test_maximum_execution_time(self) -> None:
        has_error(
            workload(pod_sets(SIMPLE) + "  maximumExecutionTimeSeconds: 0\n"),
            "spec.maximumExecutionTimeSeconds",
            "must be greater than or equal to 1",
        )

    def test_queue_name_format(self) -> None:
        has_error(
            workload(pod_sets(SIMPLE) + "  queueName: Q\n"), "spec.queueName", "RFC 1123 subdomain"
        )


class TestStatus:
    def test_quota_reserved_requires_admission(self) -> None:
        body = (
            ADMITTED.split("  admission:", maxsplit=1)[0]
            + "  conditions:"
            + ADMITTED.split("  conditions:")[1]
        )
        has_error(workload(body), "status.admission", "must be set when QuotaReserved is True")

    def test_one_assignment_per_pod_set(self) -> None:
        body = ADMITTED.replace("  - name: main\n    count: 3", "  - name: main\n    count: 3", 1)
        body = body.replace(
            "  podSets:\n",
            "  podSets:\n  - name: other\n    template: {spec: {containers: [{name: c}]}}\n",
        )
        has_error(
            workload(body),
            "status.admission.podSetAssignments",
            "must have the same number of podSets",
        )

    def test_assignment_names_exist(self) -> None:
        body = ADMITTED.replace(
            "    - name: main\n      flavors", "    - name: nope\n      flavors"
        )
        has_error(workload(body), "status.admission.podSetAssignments[0].name", 'Not found: "nope"')

    def test_usage_is_a_multiple_of_count(self) -> None:
        has_error(
            workload(ADMITTED.replace("cpu: 1500m}", "cpu: 1501m}")),
            "status.admission.podSetAssignments[0].resourceUsage[cpu]",
            "is not a multiple of 3",
        )

    def test_admission_rules_apply_only_while_reserved(self) -> None:
        body = ADMITTED.replace(
            'type: QuotaReserved\n    status: "True"', 'type: QuotaReserved\n    status: "False"'
        )
        decode(workload(body.replace("cpu: 1500m}", "cpu: 1501m}")))

    def test_reclaimable_pods(self) -> None:
        has_error(
            workload(ADMITTED.replace("[{name: main, count: 1}]", "[{name: nope, count: 1}]")),
            "status.reclaimablePods[0].name",
            'Not found: "nope"',
        )
        has_error(
            workload(ADMITTED.replace("[{name: main, count: 1}]", "[{name: main, count: 4}]")),
            "status.reclaimablePods[0].count",
            "should be less or equal to 3",
        )
        many = "[" + ", ".join("{name: main, count: 0}" for _ in range(9)) + "]"
        has_error(
            workload(ADMITTED.replace("[{name: main, count: 1}]", many)),
            "status.reclaimablePods",
            "Too many: 9",
        )

    def test_conditions_are_valid_kubernetes_conditions(self) -> None:
        has_error(
            workload(ADMITTED.replace("reason: Admitted", "reason: 'not valid'")),
            "status.conditions[1].reason",
            "a condition reason must start with alphabetic character",
        )
        has_error(
            workload(ADMITTED.replace("type: Admitted", "type: QuotaReserved")),
            "status.conditions[1].type",
            'Duplicate value: "QuotaReserved"',
        )
        has_error(
            workload(
                ADMITTED.replace(
                    'status: "True"\n    reason: Admitted', 'status: "Maybe"\n    reason: Admitted'
                )
            ),
            "status.conditions[1].status",
            'supported values: "True", "False", "Unknown"',
        )
        has_error(
            workload(
                ADMITTED.replace(
                    '    lastTransitionTime: "2026-01-01T00:00:00Z"\n  reclaimable', "  reclaimable"
                )
            ),
            "status.conditions[1].lastTransitionTime",
            "Required value",
        )
