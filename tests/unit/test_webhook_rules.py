"""One bad object per rule of `scheduler/api/validation`, denied by the validating webhook.

The same table runs on the real kube-apiserver through `kubectl apply`
(tests/e2e/test_webhooks.py). Here each object goes to the webhook alone, through
the app, so every case proves that OUR rules deny it (on the real cluster, a few are
refused earlier by kube-apiserver's own validation or the CRD schema, which also names the
field). Status rules are not here: kube-apiserver drops `status` on create and the webhook
is not sent status writes (docs/operations.md, "Admission webhooks").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from scheduler.api.foreign import FOREIGN_KINDS
from scheduler.api.kinds import KINDS
from scheduler.api.versions import KUEUE_GROUP
from tests.unit.visibility_server.http.support import app_for, client

V2 = "kueue.x-k8s.io/v1beta2"
V1 = "kueue.x-k8s.io/v1beta1"
NS = "webhook-rules"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
RG = "spec.resourceGroups[0]"
RQ = f"{RG}.flavors[0].resources[0]"
PS = "spec.podSets[0]"
CONTAINER = f"{PS}.template.spec.containers[0]"


@dataclass(frozen=True)
class Case:
    id: str
    manifest: dict[str, Any]
    field: str  # the path the denial must name

    @property
    def kind(self) -> str:
        return str(self.manifest["kind"])

    @property
    def api_version(self) -> str:
        return str(self.manifest["apiVersion"])


def _obj(
    api_version: str,
    kind: str,
    name: str,
    spec: Any = None,
    *,
    namespaced: bool = False,
    **meta: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, **meta}
    if namespaced:
        metadata["namespace"] = NS
    doc: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": metadata}
    if spec is not None:
        doc["spec"] = spec
    return doc


def flavor(spec: dict[str, Any], name: str = "rf-bad") -> dict[str, Any]:
    return _obj(V2, "ResourceFlavor", name, spec)


def quota(**limits: Any) -> dict[str, Any]:
    return {"name": "cpu", "nominalQuota": "1", **limits}


def group(covered: list[str] | None = None, flavors: list[Any] | None = None) -> dict[str, Any]:
    return {
        "coveredResources": ["cpu"] if covered is None else covered,
        "flavors": [{"name": "f", "resources": [quota()]}] if flavors is None else flavors,
    }


def cq(spec: dict[str, Any], version: str = V2) -> dict[str, Any]:
    return _obj(version, "ClusterQueue", "cq-bad", spec)


def cq_quota(cohort: str = "", **limits: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceGroups": [group(flavors=[{"name": "f", "resources": [quota(**limits)]}])]
    }
    if cohort:
        spec["cohortName"] = cohort
    return cq(spec)


def cohort(spec: dict[str, Any]) -> dict[str, Any]:
    return _obj(V2, "Cohort", "cohort-bad", spec)


def check(spec: dict[str, Any], version: str = V2) -> dict[str, Any]:
    return _obj(version, "AdmissionCheck", "ac-bad", {"controllerName": "example.com/c", **spec})


def pod_template(**container: Any) -> dict[str, Any]:
    base = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
    return {"spec": {"containers": [{**base, **container}], "restartPolicy": "Never"}}


def pod_set(name: str = "main", count: int = 1, **extra: Any) -> dict[str, Any]:
    return {"name": name, "count": count, "template": pod_template(), **extra}


def workload(spec: dict[str, Any], version: str = V2, **meta: Any) -> dict[str, Any]:
    return _obj(version, "Workload", "wl-bad", {"queueName": "lq", **spec}, namespaced=True, **meta)


def wl_pod_sets(*sets: dict[str, Any]) -> dict[str, Any]:
    return workload({"podSets": list(sets)})


def job(
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    name: str = "job-bad",
    **spec: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"labels": {QUEUE_LABEL: "lq", **(labels or {})}}
    if annotations:
        meta["annotations"] = annotations
    template = spec.pop("template", pod_template())
    body = {"parallelism": 1, "completions": 1, "suspend": True, "template": template, **spec}
    return _obj("batch/v1", "Job", name, body, namespaced=True, **meta)


def _many(n: int, make: Any) -> list[Any]:
    return [make(i) for i in range(n)]


def topology(*labels: str) -> dict[str, Any]:
    return _obj(V2, "Topology", "topo-bad", {"levels": [{"nodeLabel": x} for x in labels]})


def prc(spec: dict[str, Any]) -> dict[str, Any]:
    return _obj(V2, "ProvisioningRequestConfig", "prc-bad", {"provisioningClassName": "c", **spec})


def mk_config(clusters: list[str]) -> dict[str, Any]:
    return _obj(V2, "MultiKueueConfig", "mkconf-bad", {"clusters": clusters})


def mk_cluster(source: dict[str, Any]) -> dict[str, Any]:
    return _obj(V2, "MultiKueueCluster", "mkc-bad", {"clusterSource": source})


def selector(key: str = "cloud.example.com/pool", detail: str = "pool") -> dict[str, Any]:
    return {"key": key, "valueFromProvisioningClassDetail": detail}


SECRET = {"location": "worker-secret", "locationType": "Secret"}


CASES: list[Case] = [
    # -- metadata (every kind; ResourceFlavor stands for them) --------------------------
    Case("meta-name", flavor({}, name="Bad_Name"), "metadata.name"),
    Case(
        "meta-label-key",
        _obj(V2, "ResourceFlavor", "rf-l", {}, labels={"bad key!": "v"}),
        "metadata.labels",
    ),
    Case(
        "meta-label-value",
        _obj(V2, "ResourceFlavor", "rf-lv", {}, labels={"k": "bad value!"}),
        "metadata.labels",
    ),
    Case(
        "meta-annotation-key",
        _obj(V2, "ResourceFlavor", "rf-a", {}, annotations={"bad key!": "v"}),
        "metadata.annotations",
    ),
    Case(
        "meta-annotations-size",
        _obj(V2, "ResourceFlavor", "rf-as", {}, annotations={"k": "x" * (256 * 1024)}),
        "metadata.annotations",
    ),
    # -- ResourceFlavor -----------------------------------------------------------------
    Case("rf-node-label", flavor({"nodeLabels": {"bad key!": "v"}}), "spec.nodeLabels"),
    Case(
        "rf-node-labels-too-many",
        flavor({"nodeLabels": {f"k{i}": "v" for i in range(9)}}),
        "spec.nodeLabels",
    ),
    Case(
        "rf-taint-key",
        flavor({"nodeTaints": [{"key": "bad key!", "effect": "NoSchedule"}]}),
        "spec.nodeTaints[0].key",
    ),
    Case(
        "rf-taint-value",
        flavor({"nodeTaints": [{"key": "k", "value": "bad value!", "effect": "NoSchedule"}]}),
        "spec.nodeTaints[0].value",
    ),
    Case(
        "rf-taint-effect",
        flavor({"nodeTaints": [{"key": "k", "effect": "Sometimes"}]}),
        "spec.nodeTaints[0].effect",
    ),
    Case(
        "rf-taint-duplicate",
        flavor({"nodeTaints": [{"key": "k", "effect": "NoSchedule"}] * 2}),
        "spec.nodeTaints[1].effect",
    ),
    Case(
        "rf-taints-too-many",
        flavor({"nodeTaints": _many(9, lambda i: {"key": f"k{i}", "effect": "NoSchedule"})}),
        "spec.nodeTaints",
    ),
    Case(
        "rf-toleration-empty-key",
        flavor({"tolerations": [{"operator": "Equal", "value": "v"}]}),
        "spec.tolerations[0].operator",
    ),
    Case(
        "rf-toleration-key",
        flavor({"tolerations": [{"key": "bad key!", "operator": "Exists"}]}),
        "spec.tolerations[0].key",
    ),
    Case(
        "rf-toleration-seconds",
        flavor(
            {
                "tolerations": [
                    {
                        "key": "k",
                        "operator": "Exists",
                        "effect": "NoSchedule",
                        "tolerationSeconds": 5,
                    }
                ]
            }
        ),
        "spec.tolerations[0].effect",
    ),
    Case(
        "rf-toleration-exists-value",
        flavor({"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}),
        "spec.tolerations[0].operator",
    ),
    Case(
        "rf-toleration-value",
        flavor({"tolerations": [{"key": "k", "operator": "Equal", "value": "bad value!"}]}),
        "spec.tolerations[0].value",
    ),
    Case(
        "rf-toleration-operator",
        flavor({"tolerations": [{"key": "k", "operator": "Maybe"}]}),
        "spec.tolerations[0].operator",
    ),
    Case(
        "rf-toleration-effect",
        flavor({"tolerations": [{"key": "k", "operator": "Exists", "effect": "Sometimes"}]}),
        "spec.tolerations[0].effect",
    ),
    Case(
        "rf-tolerations-too-many",
        flavor({"tolerations": _many(9, lambda i: {"key": f"k{i}", "operator": "Exists"})}),
        "spec.tolerations",
    ),
    Case(
        "rf-topology-name",
        flavor({"topologyName": "Bad_Topology", "nodeLabels": {"k": "v"}}),
        "spec.topologyName",
    ),
    Case("rf-topology-without-labels", flavor({"topologyName": "t"}), "spec"),
    # -- ClusterQueue -------------------------------------------------------------------
    Case(
        "cq-groups-too-many",
        cq(
            {
                "resourceGroups": _many(
                    17,
                    lambda i: group(
                        [f"r{i}"],
                        [{"name": f"f{i}", "resources": [{"name": f"r{i}", "nominalQuota": "1"}]}],
                    ),
                )
            }
        ),
        "spec.resourceGroups",
    ),
    Case(
        "cq-covered-empty",
        cq({"resourceGroups": [group([], [{"name": "f", "resources": []}])]}),
        f"{RG}.coveredResources",
    ),
    Case(
        "cq-covered-too-many",
        cq(
            {
                "resourceGroups": [
                    group(
                        [f"r{i}" for i in range(17)],
                        [
                            {
                                "name": "f",
                                "resources": [
                                    {"name": f"r{i}", "nominalQuota": "1"} for i in range(17)
                                ],
                            }
                        ],
                    )
                ]
            }
        ),
        f"{RG}.coveredResources",
    ),
    Case(
        "cq-covered-name",
        cq(
            {
                "resourceGroups": [
                    group(
                        ["bad name!"],
                        [{"name": "f", "resources": [{"name": "bad name!", "nominalQuota": "1"}]}],
                    )
                ]
            }
        ),
        f"{RG}.coveredResources[0]",
    ),
    Case(
        "cq-covered-duplicate",
        cq({"resourceGroups": [group(), group(flavors=[{"name": "g", "resources": [quota()]}])]}),
        "spec.resourceGroups[1].coveredResources[0]",
    ),
    Case("cq-flavors-empty", cq({"resourceGroups": [group(flavors=[])]}), f"{RG}.flavors"),
    Case(
        "cq-flavors-too-many",
        cq(
            {
                "resourceGroups": [
                    group(flavors=_many(17, lambda i: {"name": f"f{i}", "resources": [quota()]}))
                ]
            }
        ),
        f"{RG}.flavors",
    ),
    Case(
        "cq-flavor-name",
        cq({"resourceGroups": [group(flavors=[{"name": "Bad_Flavor", "resources": [quota()]}])]}),
        f"{RG}.flavors[0].name",
    ),
    Case(
        "cq-flavor-duplicate",
        cq(
            {
                "resourceGroups": [
                    group(),
                    group(
                        ["memory"],
                        [{"name": "f", "resources": [{"name": "memory", "nominalQuota": "1"}]}],
                    ),
                ]
            }
        ),
        "spec.resourceGroups[1].flavors[0].name",
    ),
    Case(
        "cq-resources-empty",
        cq({"resourceGroups": [group(flavors=[{"name": "f", "resources": []}])]}),
        f"{RG}.flavors[0].resources",
    ),
    Case(
        "cq-resources-count",
        cq({"resourceGroups": [group(["cpu", "memory"])]}),
        f"{RG}.flavors[0].resources",
    ),
    Case(
        "cq-resource-name",
        cq(
            {
                "resourceGroups": [
                    group(
                        flavors=[
                            {"name": "f", "resources": [{"name": "memory", "nominalQuota": "1"}]}
                        ]
                    )
                ]
            }
        ),
        f"{RQ}.name",
    ),
    Case("cq-nominal-negative", cq_quota(nominalQuota="-1"), f"{RQ}.nominalQuota"),
    Case("cq-nominal-int64", cq_quota(nominalQuota="1e30"), f"{RQ}.nominalQuota"),
    Case("cq-borrowing-without-cohort", cq_quota(borrowingLimit="1"), f"{RQ}.borrowingLimit"),
    Case("cq-borrowing-negative", cq_quota("org", borrowingLimit="-1"), f"{RQ}.borrowingLimit"),
    Case("cq-lending-without-cohort", cq_quota(lendingLimit="1"), f"{RQ}.lendingLimit"),
    Case("cq-lending-over-nominal", cq_quota("org", lendingLimit="2"), f"{RQ}.lendingLimit"),
    Case("cq-lending-negative", cq_quota("org", lendingLimit="-1"), f"{RQ}.lendingLimit"),
    Case("cq-cohort-name", cq_quota("Bad_Cohort"), "spec.cohortName"),
    Case(
        "cq-namespace-selector-operator",
        cq({"namespaceSelector": {"matchExpressions": [{"key": "k", "operator": "Near"}]}}),
        "spec.namespaceSelector.matchExpressions[0].operator",
    ),
    Case(
        "cq-namespace-selector-values",
        cq({"namespaceSelector": {"matchExpressions": [{"key": "k", "operator": "In"}]}}),
        "spec.namespaceSelector.matchExpressions[0].values",
    ),
    Case(
        "cq-namespace-selector-exists-values",
        cq(
            {
                "namespaceSelector": {
                    "matchExpressions": [{"key": "k", "operator": "Exists", "values": ["v"]}]
                }
            }
        ),
        "spec.namespaceSelector.matchExpressions[0].values",
    ),
    Case(
        "cq-namespace-selector-key",
        cq(
            {"namespaceSelector": {"matchExpressions": [{"key": "bad key!", "operator": "Exists"}]}}
        ),
        "spec.namespaceSelector.matchExpressions[0].key",
    ),
    Case(
        "cq-namespace-selector-value",
        cq(
            {
                "namespaceSelector": {
                    "matchExpressions": [{"key": "k", "operator": "In", "values": ["bad value!"]}]
                }
            }
        ),
        "spec.namespaceSelector.matchExpressions[0].values[0]",
    ),
    Case(
        "cq-namespace-selector-labels",
        cq({"namespaceSelector": {"matchLabels": {"bad key!": "v"}}}),
        "spec.namespaceSelector.matchLabels",
    ),
    Case(
        "cq-preemption",
        cq(
            {
                "preemption": {
                    "reclaimWithinCohort": "Never",
                    "borrowWithinCohort": {"policy": "LowerPriority"},
                }
            }
        ),
        "spec.preemption",
    ),
    Case(
        "cq-fungibility-preference",
        cq(
            {
                "flavorFungibility": {
                    "whenCanBorrow": "MayStopSearch",
                    "preference": "BorrowingOverPreemption",
                }
            }
        ),
        "spec.flavorFungibility",
    ),
    Case("cq-weight-negative", cq({"fairSharing": {"weight": "-1"}}), "spec.fairSharing.weight"),
    Case("cq-weight-tiny", cq({"fairSharing": {"weight": "1n"}}), "spec.fairSharing.weight"),
    Case(
        "cq-checks-and-strategy",
        cq(
            {
                "admissionChecks": ["a"],
                "admissionChecksStrategy": {"admissionChecks": [{"name": "b"}]},
            },
            V1,
        ),
        "spec",
    ),
    Case("cq-check-name", cq({"admissionChecks": ["Bad_Check"]}, V1), "spec.admissionChecks[0]"),
    Case(
        "cq-strategy-check-name",
        cq({"admissionChecksStrategy": {"admissionChecks": [{"name": "Bad_Check"}]}}),
        "spec.admissionChecksStrategy.admissionChecks[0].name",
    ),
    Case(
        "cq-last-acceptable-flavor",
        cq(
            {
                "concurrentAdmissionPolicy": {
                    "migration": {
                        "mode": "TryPreferredFlavors",
                        "constraints": {"lastAcceptableFlavorName": "Bad_Flavor"},
                    }
                }
            }
        ),
        "spec.concurrentAdmissionPolicy.migration.constraints.lastAcceptableFlavorName",
    ),
    Case("cq-v1beta1-cohort-name", cq({"cohort": "Bad_Cohort"}, V1), "spec.cohort"),
    # -- AdmissionCheck -----------------------------------------------------------------
    Case("ac-controller-name-required", check({"controllerName": ""}), "spec.controllerName"),
    # v1beta1's schema sets no length limit: the webhook does.
    Case(
        "ac-v1beta1-controller-name-length",
        check({"controllerName": "c" * 254}, V1),
        "spec.controllerName",
    ),
    Case(
        "ac-v1beta1-retry-delay-negative",
        check({"retryDelayMinutes": -1}, V1),
        "spec.retryDelayMinutes",
    ),
    Case(
        "ac-parameters-kind",
        check({"parameters": {"apiGroup": "example.com", "kind": "-bad", "name": "p"}}),
        "spec.parameters.kind",
    ),
    Case(
        "ac-parameters-api-group",
        check({"parameters": {"apiGroup": "Example_Com", "kind": "Config", "name": "p"}}),
        "spec.parameters.apiGroup",
    ),
    Case(
        "ac-parameters-name",
        check({"parameters": {"apiGroup": "example.com", "kind": "Config", "name": "Bad_Name"}}),
        "spec.parameters.name",
    ),
    Case(
        "ac-parameters-name-length",
        check({"parameters": {"apiGroup": "example.com", "kind": "Config", "name": "p" * 64}}),
        "spec.parameters.name",
    ),
    # -- Cohort -------------------------------------------------------------------------
    Case("cohort-parent-name", cohort({"parentName": "Bad_Parent"}), "spec.parentName"),
    Case(
        "cohort-borrowing-without-parent",
        cohort(
            {
                "resourceGroups": [
                    group(flavors=[{"name": "f", "resources": [quota(borrowingLimit="1")]}])
                ]
            }
        ),
        f"{RQ}.borrowingLimit",
    ),
    Case(
        "cohort-nominal-negative",
        cohort(
            {
                "resourceGroups": [
                    group(flavors=[{"name": "f", "resources": [quota(nominalQuota="-1")]}])
                ]
            }
        ),
        f"{RQ}.nominalQuota",
    ),
    Case(
        "cohort-weight-negative",
        cohort({"fairSharing": {"weight": "-1"}}),
        "spec.fairSharing.weight",
    ),
    # -- LocalQueue ---------------------------------------------------------------------
    Case(
        "lq-cluster-queue-name",
        _obj(V2, "LocalQueue", "lq-bad", {"clusterQueue": "Bad_CQ"}, namespaced=True),
        "spec.clusterQueue",
    ),
    Case(
        "lq-namespace-name",
        _obj(
            V2,
            "LocalQueue",
            "lq-bad",
            {"clusterQueue": "cq"},
            labels={"k": "bad value!"},
            namespaced=True,
        ),
        "metadata.labels",
    ),
    # -- WorkloadPriorityClass ----------------------------------------------------------
    Case(
        "wpc-description",
        {
            "apiVersion": V2,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "wpc-bad"},
            "value": 1,
            "description": "x" * 2049,
        },
        "description",
    ),
    Case(
        "wpc-name",
        {
            "apiVersion": V2,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "Bad_WPC"},
            "value": 1,
        },
        "metadata.name",
    ),
    # -- Workload -----------------------------------------------------------------------
    Case("wl-pod-sets-empty", wl_pod_sets(), "spec.podSets"),
    Case(
        "wl-pod-sets-too-many", wl_pod_sets(*_many(9, lambda i: pod_set(f"p{i}"))), "spec.podSets"
    ),
    Case("wl-pod-set-name", wl_pod_sets(pod_set("Bad_Name")), f"{PS}.name"),
    Case("wl-pod-set-duplicate", wl_pod_sets(pod_set("a"), pod_set("a")), "spec.podSets[1].name"),
    Case("wl-count-negative", wl_pod_sets(pod_set(count=-1)), f"{PS}.count"),
    Case("wl-min-count-range", wl_pod_sets(pod_set(count=2, minCount=3)), f"{PS}.minCount"),
    Case(
        "wl-two-min-counts",
        wl_pod_sets(pod_set("a", 2, minCount=1), pod_set("b", 2, minCount=1)),
        "spec.podSets",
    ),
    Case(
        "wl-request-negative",
        wl_pod_sets({**pod_set(), "template": pod_template(resources={"requests": {"cpu": "-1"}})}),
        f"{CONTAINER}.resources.requests[cpu]",
    ),
    Case(
        "wl-request-name",
        wl_pod_sets(
            {**pod_set(), "template": pod_template(resources={"requests": {"bad name!": "1"}})}
        ),
        f"{CONTAINER}.resources.requests[bad name!]",
    ),
    Case(
        "wl-request-pods",
        wl_pod_sets({**pod_set(), "template": pod_template(resources={"requests": {"pods": "1"}})}),
        f"{CONTAINER}.resources.requests[pods]",
    ),
    Case(
        "wl-limit-negative",
        wl_pod_sets({**pod_set(), "template": pod_template(resources={"limits": {"cpu": "-1"}})}),
        f"{CONTAINER}.resources.limits[cpu]",
    ),
    Case(
        "wl-init-request-negative",
        wl_pod_sets(
            {
                **pod_set(),
                "template": {
                    "spec": {
                        "initContainers": [
                            {
                                "name": "i",
                                "image": "busybox",
                                "resources": {"requests": {"cpu": "-1"}},
                            }
                        ],
                        "containers": [{"name": "c", "image": "busybox"}],
                    }
                },
            }
        ),
        f"{PS}.template.spec.initContainers[0].resources.requests[cpu]",
    ),
    Case(
        "wl-overhead-negative",
        wl_pod_sets(
            {
                **pod_set(),
                "template": {
                    "spec": {
                        "containers": [{"name": "c", "image": "busybox"}],
                        "overhead": {"cpu": "-1"},
                    }
                },
            }
        ),
        f"{PS}.template.spec.overhead[cpu]",
    ),
    Case(
        "wl-total-overflow",
        wl_pod_sets(
            {
                **pod_set(count=2**31 - 1),
                "template": pod_template(resources={"requests": {"memory": "8Ei"}}),
            }
        ),
        PS,
    ),
    Case(
        "wl-queue-name",
        workload({"queueName": "Bad_Queue", "podSets": [pod_set()]}),
        "spec.queueName",
    ),
    Case(
        "wl-priority-class-name",
        workload({"podSets": [pod_set()], "priorityClassName": "Bad_PC", "priority": 1}, V1),
        "spec.priorityClassName",
    ),
    Case(
        "wl-priority-nil",
        workload({"podSets": [pod_set()], "priorityClassName": "pc"}, V1),
        "spec.priority",
    ),
    Case(
        "wl-priority-ref-kind",
        workload(
            {
                "podSets": [pod_set()],
                "priority": 1,
                "priorityClassRef": {
                    "group": "kueue.x-k8s.io",
                    "kind": "PriorityClass",
                    "name": "p",
                },
            }
        ),
        "spec.priorityClassRef",
    ),
    Case(
        "wl-priority-ref-name",
        workload(
            {
                "podSets": [pod_set()],
                "priority": 1,
                "priorityClassRef": {
                    "group": "kueue.x-k8s.io",
                    "kind": "WorkloadPriorityClass",
                    "name": "Bad_Name",
                },
            }
        ),
        "spec.priorityClassRef.name",
    ),
    Case(
        "wl-priority-ref-nil",
        workload(
            {
                "podSets": [pod_set()],
                "priorityClassRef": {
                    "group": "kueue.x-k8s.io",
                    "kind": "WorkloadPriorityClass",
                    "name": "p",
                },
            }
        ),
        "spec",
    ),
    Case(
        "wl-max-execution",
        workload({"podSets": [pod_set()], "maximumExecutionTimeSeconds": 0}),
        "spec.maximumExecutionTimeSeconds",
    ),
    Case(
        "wl-slice-constraints",
        wl_pod_sets(
            pod_set(
                topologyRequest={
                    "podsetSliceRequiredTopologyConstraints": _many(
                        4, lambda i: {"topology": f"t{i}", "size": 1}
                    )
                }
            )
        ),
        f"{PS}.topologyRequest.podsetSliceRequiredTopologyConstraints",
    ),
    Case(
        "wl-preemption-gates-too-many",
        workload(
            {"podSets": [pod_set()], "preemptionGates": _many(9, lambda i: {"name": f"g{i}"})}
        ),
        "spec.preemptionGates",
    ),
    Case(
        "wl-preemption-gate-name",
        workload({"podSets": [pod_set()], "preemptionGates": [{"name": "g" * 64}]}),
        "spec.preemptionGates[0].name",
    ),
    Case(
        "wl-preemption-gate-duplicate",
        workload({"podSets": [pod_set()], "preemptionGates": [{"name": "g"}, {"name": "g"}]}),
        "spec.preemptionGates[1].name",
    ),
    # -- batch/v1 Job (with the queue-name label) ---------------------------------------
    Case("job-name-length", job(name="j" * 64), "metadata.name"),
    Case("job-queue-name", job({QUEUE_LABEL: "Bad_Queue"}), f"metadata.labels[{QUEUE_LABEL}]"),
    Case(
        "job-priority-class-label",
        job({"kueue.x-k8s.io/priority-class": "Bad_Class"}),
        "metadata.labels[kueue.x-k8s.io/priority-class]",
    ),
    Case(
        "job-min-parallelism-integer",
        job(
            annotations={"kueue.x-k8s.io/job-min-parallelism": "two"}, parallelism=3, completions=3
        ),
        "metadata.annotations[kueue.x-k8s.io/job-min-parallelism]",
    ),
    Case(
        "job-min-parallelism-range",
        job(annotations={"kueue.x-k8s.io/job-min-parallelism": "3"}, parallelism=3, completions=3),
        "metadata.annotations[kueue.x-k8s.io/job-min-parallelism]",
    ),
    Case(
        "job-max-exec-time-integer",
        job({"kueue.x-k8s.io/max-exec-time-seconds": "ten"}),
        "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]",
    ),
    Case(
        "job-max-exec-time-positive",
        job({"kueue.x-k8s.io/max-exec-time-seconds": "0"}),
        "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]",
    ),
    Case("job-parallelism-negative", job(parallelism=-1), "spec.parallelism"),
    Case(
        "job-request-negative",
        job(template=pod_template(resources={"requests": {"cpu": "-1"}})),
        "spec.template.spec.containers[0].resources.requests[cpu]",
    ),
    # -- kinds stored but not acted on (the CRD rules Kueue has for them) ---------------
    Case("topo-no-levels", topology(), "spec.levels"),
    Case("topo-too-many-levels", topology(*(f"l{i}" for i in range(17))), "spec.levels"),
    Case("topo-node-label", topology("bad label!"), "spec.levels[0].nodeLabel"),
    Case("topo-node-label-length", topology("a" * 317), "spec.levels[0].nodeLabel"),
    Case("topo-level-duplicate", topology("rack", "rack"), "spec.levels[1]"),
    Case("topo-hostname-not-last", topology("kubernetes.io/hostname", "rack"), "spec.levels"),
    Case(
        "prc-class-name", prc({"provisioningClassName": "Bad_Class"}), "spec.provisioningClassName"
    ),
    Case("prc-class-name-empty", prc({"provisioningClassName": ""}), "spec.provisioningClassName"),
    Case(
        "prc-too-many-parameters",
        prc({"parameters": {f"p{i}": "v" for i in range(101)}}),
        "spec.parameters",
    ),
    Case("prc-parameter-length", prc({"parameters": {"p": "v" * 256}}), "spec.parameters[p]"),
    Case(
        "prc-too-many-managed-resources",
        prc({"managedResources": [f"example.com/r{i}" for i in range(101)]}),
        "spec.managedResources",
    ),
    Case(
        "prc-selector-key",
        prc({"podSetUpdates": {"nodeSelector": [selector(key="bad key!")]}}),
        "spec.podSetUpdates.nodeSelector[0].key",
    ),
    Case(
        "prc-selector-detail-empty",
        prc({"podSetUpdates": {"nodeSelector": [selector(detail="")]}}),
        "spec.podSetUpdates.nodeSelector[0].valueFromProvisioningClassDetail",
    ),
    Case(
        "prc-too-many-selectors",
        prc({"podSetUpdates": {"nodeSelector": _many(9, lambda i: selector(key=f"k{i}"))}}),
        "spec.podSetUpdates.nodeSelector",
    ),
    Case("mkconf-no-clusters", mk_config([]), "spec.clusters"),
    Case("mkconf-too-many-clusters", mk_config([f"w{i}" for i in range(21)]), "spec.clusters"),
    Case("mkconf-cluster-duplicate", mk_config(["w1", "w1"]), "spec.clusters[1]"),
    Case("mkconf-cluster-length", mk_config(["w" * 257]), "spec.clusters[0]"),
    Case(
        "mkc-two-sources",
        mk_cluster({"kubeConfig": SECRET, "clusterProfileRef": {"name": "p"}}),
        "spec.clusterSource",
    ),
    Case("mkc-no-source", mk_cluster({}), "spec.clusterSource"),
    Case(
        "mkc-location-empty",
        mk_cluster({"kubeConfig": {"location": ""}}),
        "spec.clusterSource.kubeConfig.location",
    ),
    Case(
        "mkc-location-length",
        mk_cluster({"kubeConfig": {"location": "s" * 257}}),
        "spec.clusterSource.kubeConfig.location",
    ),
    Case(
        "mkc-profile-name-empty",
        mk_cluster({"clusterProfileRef": {"name": ""}}),
        "spec.clusterSource.clusterProfileRef.name",
    ),
    # v1beta1 is checked in the form it is stored in, and named as it is written: an empty
    # location is no kubeconfig (as Kueue converts it), so nothing says how to connect.
    Case(
        "mkc-v1beta1-no-source",
        _obj(V1, "MultiKueueCluster", "mkc-bad", {"kubeConfig": {"location": ""}}),
        "spec",
    ),
    Case(
        "mkc-v1beta1-location-length",
        _obj(V1, "MultiKueueCluster", "mkc-bad", {"kubeConfig": {"location": "s" * 257}}),
        "spec.kubeConfig.location",
    ),
]


# Where the path is as wide as `spec`, words of the rule the denial must also say.
SAYS = {
    "rf-topology-without-labels": "at least one nodeLabel is required when topology is set",
    "cq-checks-and-strategy": "Either AdmissionChecks or AdmissionCheckStrategy can be set",
    "cq-preemption": "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
    "cq-fungibility-preference": "preference can only be set when",
    "cq-resources-count": "must have the same number of resources as the coveredResources",
    "wl-two-min-counts": "at most one podSet can use minCount",
    "wl-total-overflow": "does not fit in a signed 64-bit integer",
    "wl-priority-ref-nil": "priority should not be nil when priorityClassRef is set",
    "topo-hostname-not-last": "kubernetes.io/hostname label can only be used at the lowest",
    "mkc-two-sources": "exactly one of the fields in [kubeConfig clusterProfileRef] must be set",
    "mkc-no-source": "exactly one of the fields in [kubeConfig clusterProfileRef] must be set",
    "mkc-v1beta1-no-source": "exactly one of the fields in [kubeConfig clusterProfileRef]",
}


def review(
    obj: dict[str, Any], operation: str = "CREATE", old: dict[str, Any] | None = None
) -> bytes:
    group_, _, version = str(obj["apiVersion"]).rpartition("/")
    metadata = obj["metadata"]
    request: dict[str, Any] = {
        "uid": "0b7f6e2a-rules",
        "kind": {"group": group_, "version": version, "kind": obj["kind"]},
        "operation": operation,
        "name": metadata.get("name", ""),
        "namespace": metadata.get("namespace", ""),
        "object": obj,
    }
    if old is not None:
        request["oldObject"] = old
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    ).encode()


def test_every_case_is_named_once() -> None:
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids))
    assert set(SAYS) <= set(ids)


def test_every_kind_the_webhook_validates_has_a_case() -> None:
    """A kind added to the API layer is validated with no change to the webhook; this
    table must then grow a case for it."""
    served = {kind for (api_version, kind) in KINDS if api_version.startswith(f"{KUEUE_GROUP}/")}
    served |= set(FOREIGN_KINDS)
    assert served <= {case.kind for case in CASES}, served - {case.kind for case in CASES}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_the_webhook_denies_each_rule_naming_the_field(case: Case) -> None:
    async with client(app_for(), headers={}) as c:
        answer = await c.post("/validate", content=review(case.manifest))
    assert answer.status_code == 200
    response = answer.json()["response"]
    assert response["allowed"] is False, response
    status = response["status"]
    assert status["code"] == 403 and status["reason"] == "Forbidden"
    assert case.field in status["message"], status["message"]
    assert SAYS.get(case.id, "") in status["message"], status["message"]
    causes = status["details"]["causes"]
    assert any(cause["field"].startswith(case.field) for cause in causes), causes
    assert "patch" not in response  # a validating answer never patches


# -- kinds stored but not acted on: allowed when valid, levels of a Topology immutable ----

GOOD_FOREIGN = [
    topology("cloud.provider.com/topology-rack", "kubernetes.io/hostname"),
    prc(
        {
            "managedResources": ["nvidia.com/gpu"],
            "parameters": {"p": "v"},
            "retryStrategy": {"backoffLimitCount": 2, "backoffBaseSeconds": 0},
            "podSetUpdates": {"nodeSelector": [selector()]},
            "podSetMergePolicy": "IdenticalPodTemplates",
        }
    ),
    mk_config(["w1", "w2"]),
    mk_cluster({"kubeConfig": SECRET}),
    mk_cluster({"clusterProfileRef": {"name": "p"}}),
    _obj(V1, "MultiKueueCluster", "mkc-ok", {"kubeConfig": SECRET}),
    _obj(V1, "MultiKueueConfig", "mkconf-ok", {"clusters": ["w1"]}),
    _obj(V1, "Topology", "topo-ok", {"levels": [{"nodeLabel": "rack"}]}),
]


async def _answer(body: bytes) -> dict[str, Any]:
    async with client(app_for(), headers={}) as c:
        answer = await c.post("/validate", content=body)
    assert answer.status_code == 200
    return dict(answer.json()["response"])


@pytest.mark.parametrize("manifest", GOOD_FOREIGN, ids=lambda m: f"{m['kind']}-{m['apiVersion']}")
async def test_a_valid_object_of_a_kind_not_acted_on_is_allowed(manifest: dict[str, Any]) -> None:
    response = await _answer(review(manifest))
    assert response["allowed"] is True, response
    assert "warnings" not in response  # validated, not waved through as unknown


# Refused by the CRD schema on a real cluster before the webhook sees them; the webhook
# refuses them too (the models' types, enums and required fields).
SCHEMA_CASES = [
    Case(
        "topo-level-without-label",
        _obj(V2, "Topology", "t", {"levels": [{}]}),
        "spec.levels[0].nodeLabel",
    ),
    Case(
        "prc-no-class-name",
        _obj(V2, "ProvisioningRequestConfig", "p", {}),
        "spec.provisioningClassName",
    ),
    Case("prc-merge-policy", prc({"podSetMergePolicy": "Any"}), "spec.podSetMergePolicy"),
    Case(
        "prc-selector-duplicate",
        prc({"podSetUpdates": {"nodeSelector": [selector(), selector()]}}),
        "spec.podSetUpdates.nodeSelector[1].key",
    ),
    Case(
        "prc-managed-duplicate", prc({"managedResources": ["a", "a"]}), "spec.managedResources[1]"
    ),
    Case(
        "mkconf-quota-management",
        _obj(V2, "MultiKueueConfig", "m", {"clusters": ["w"], "quotaManagement": "Sometimes"}),
        "spec.quotaManagement",
    ),
    Case("mkc-no-cluster-source", _obj(V2, "MultiKueueCluster", "m", {}), "spec.clusterSource"),
    Case(
        "mkc-location-type",
        mk_cluster({"kubeConfig": {"location": "s", "locationType": "Env"}}),
        "spec.clusterSource.kubeConfig.locationType",
    ),
    Case("mkc-v1beta1-no-kubeconfig", _obj(V1, "MultiKueueCluster", "m", {}), "spec.kubeConfig"),
]


@pytest.mark.parametrize("case", SCHEMA_CASES, ids=lambda c: c.id)
async def test_the_webhook_also_denies_what_the_schema_refuses(case: Case) -> None:
    response = await _answer(review(case.manifest))
    assert response["allowed"] is False, response
    causes = response["status"]["details"]["causes"]
    assert any(cause["field"].startswith(case.field) for cause in causes), causes


async def test_the_levels_of_a_topology_cannot_change() -> None:
    old = topology("rack", "kubernetes.io/hostname")
    new = topology("block", "rack", "kubernetes.io/hostname")
    response = await _answer(review(new, "UPDATE", old))
    assert response["allowed"] is False
    assert response["status"]["details"]["causes"][0]["field"] == "spec.levels"
    assert "field is immutable" in response["status"]["message"]
    labels = {**old, "metadata": {**old["metadata"], "labels": {"team": "a"}}}
    assert (await _answer(review(labels, "UPDATE", old)))["allowed"] is True
