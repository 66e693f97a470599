"""Decoding kueue.x-k8s.io/v1beta2 documents: v1beta2's rules and field names, the
internal form as result (docs/api-versions.md)."""

from __future__ import annotations

from scheduler.api import ClusterQueue, Workload
from scheduler.api.conversion import STASH_ANNOTATION, convert_document
from scheduler.api.source import wire_version
from scheduler.api.versions import KUEUE_V1BETA1, KUEUE_V1BETA2
from scheduler.runtime.kube.decode import decode_live
from tests.unit.api.support import decode, has_error, rejection

CQ = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  cohortName: team
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4, borrowingLimit: 1}]}]
"""

WORKLOAD = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: wl, namespace: ns}
spec:
  queueName: lq
  priority: 100
  priorityClassRef: {group: kueue.x-k8s.io, kind: WorkloadPriorityClass, name: high}
  podSets:
  - name: main
    count: 1
    template: {spec: {containers: [{name: c, resources: {requests: {cpu: 1}}}]}}
"""


def test_cluster_queue_decodes_into_the_internal_form() -> None:
    cq = decode(CQ)
    assert isinstance(cq, ClusterQueue)
    assert cq.api_version == KUEUE_V1BETA1
    assert wire_version(cq) == KUEUE_V1BETA2
    assert cq.spec.cohort == "team"
    assert cq.spec.flavor_fungibility.when_can_borrow != "TryNextFlavor"


def test_workload_priority_class_ref_is_read() -> None:
    wl = decode(WORKLOAD + "status: {accumulatedPastExecutionTimeSeconds: 12}\n")
    assert isinstance(wl, Workload)
    assert wl.spec.priority_class_name == "high"
    assert wl.spec.priority_class_source == "kueue.x-k8s.io/workloadpriorityclass"
    assert wl.status.accumulated_past_exexcution_time_seconds == 12


def test_v1beta1_spellings_are_refused_in_v1beta2() -> None:
    has_error(CQ.replace("cohortName: team", "cohort: team"), "spec.cohort", "")
    has_error(
        CQ + "  flavorFungibility: {whenCanBorrow: Borrow}\n",
        "spec.flavorFungibility.whenCanBorrow",
        "Unsupported value",
    )
    has_error(CQ + "  admissionChecks: [a]\n", "spec.admissionChecks", "")
    has_error(
        WORKLOAD + "status: {accumulatedPastExexcutionTimeSeconds: 1}\n",
        "status.accumulatedPastExexcutionTimeSeconds",
        "",
    )


def test_errors_found_on_the_internal_form_carry_v1beta2_names() -> None:
    has_error(CQ.replace("cohortName: team", "cohortName: Team_1"), "spec.cohortName", "Invalid")
    # borrowingLimit without a cohort: Kueue's rule, reported for the v1beta2 object.
    err = rejection(CQ.replace("  cohortName: team\n", ""))
    assert "borrowingLimit" in str(err)
    assert 'ClusterQueue "cq"' in str(err)


def test_priority_class_ref_rules() -> None:
    has_error(
        WORKLOAD.replace("kind: WorkloadPriorityClass", "kind: PriorityClass"),
        "spec.priorityClassRef",
        "only the WorkloadPriorityClass kind is allowed for the kueue.x-k8s.io group",
    )
    has_error(
        WORKLOAD.replace("  priority: 100\n", ""),
        "spec",
        "priority should not be nil when priorityClassRef is set",
    )
    has_error(WORKLOAD.replace("name: high", "name: High"), "spec.priorityClassRef.name", "")
    has_error(
        WORKLOAD.replace("group: kueue.x-k8s.io", "group: example.com"),
        "spec.priorityClassRef.group",
        "",
    )


def test_preemption_gates() -> None:
    gates = "  preemptionGates: [{name: a}, {name: a}]\n"
    has_error(WORKLOAD + gates, "spec.preemptionGates[1].name", "Duplicate value")
    many = "  preemptionGates: [" + ", ".join(f"{{name: g{i}}}" for i in range(9)) + "]\n"
    has_error(WORKLOAD + many, "spec.preemptionGates", "Too many: 9")
    wl = decode(WORKLOAD + "  preemptionGates: [{name: a}]\n")
    # Kept for the trip back to v1beta2 (the internal form has no field for it).
    assert STASH_ANNOTATION in wl.metadata.annotations
    back = convert_document(wl.to_dict(), KUEUE_V1BETA2)
    assert back["spec"]["preemptionGates"] == [{"name": "a"}]


def test_concurrent_admission_policy() -> None:
    policy = "  concurrentAdmissionPolicy: {migration: {mode: %s}}\n"
    has_error(
        CQ + policy % "Sometimes",
        "spec.concurrentAdmissionPolicy.migration.mode",
        "Unsupported value",
    )
    cq = decode(CQ + policy % "TryPreferredFlavors")
    assert STASH_ANNOTATION in cq.metadata.annotations


def test_v1beta1_takes_may_stop_search_and_preference() -> None:
    v1 = CQ.replace("v1beta2", "v1beta1").replace("cohortName", "cohort")
    cq = decode(v1 + "  flavorFungibility: {whenCanBorrow: MayStopSearch}\n")
    assert isinstance(cq, ClusterQueue)
    assert cq.spec.flavor_fungibility.when_can_borrow == "MayStopSearch"
    both = "  flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: TryNextFlavor, "
    decode(v1 + both + "preference: PreemptionOverBorrowing}\n")
    has_error(
        v1 + "  flavorFungibility: {preference: BorrowingOverPreemption}\n",
        "spec.flavorFungibility",
        "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor",
    )


def test_unsupported_kueue_kind_says_so() -> None:
    err = rejection(
        """
        apiVersion: kueue.x-k8s.io/v1beta2
        kind: Topology
        metadata: {name: default}
        """
    )
    assert err.path == "kind"
    assert str(err).startswith(
        'test.yaml: document 0 (Topology "default"): kind: kind Topology '
        "(kueue.x-k8s.io/v1beta2) is not supported by queuescope"
    )


def test_cluster_mode_decodes_v1beta2_as_the_server_serves_it() -> None:
    live = {
        "apiVersion": KUEUE_V1BETA2,
        "kind": "ClusterQueue",
        "metadata": {
            "name": "cq",
            "uid": "u-1",
            "resourceVersion": "42",
            "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
        },
        "spec": {
            "cohortName": "team",
            "flavorFungibility": {
                "whenCanBorrow": "MayStopSearch",
                "whenCanPreempt": "TryNextFlavor",
            },
            "someFieldOfANewerKueue": True,
        },
        "status": {"pendingWorkloads": 0, "flavorsUsage": []},
    }
    cq = decode_live(live, source="clusterqueues")
    assert isinstance(cq, ClusterQueue)
    assert cq.spec.cohort == "team"
    assert wire_version(cq) == KUEUE_V1BETA2


def test_v1beta2_length_limits() -> None:
    wpc = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\n"
    wpc += "metadata: {name: p}\nvalue: 1\ndescription: %s\n"
    has_error(wpc % ("x" * 2049), "description", "Too long: may not be more than 2048")
    decode(wpc % ("x" * 2048))
    constraints = ", ".join(["{topology: t, size: 1}"] * 4)
    request = f"    topologyRequest: {{podsetSliceRequiredTopologyConstraints: [{constraints}]}}\n"
    has_error(
        WORKLOAD + request,  # the last pod set of WORKLOAD gets the request
        "spec.podSets[0].topologyRequest.podsetSliceRequiredTopologyConstraints",
        "Too many: 4",
    )
