"""Every field of every convertible Kueue kind, in v1beta1 and in v1beta2, as hypothesis
strategies (for the conversion round-trip tests).

The shapes are declared as data (`Obj`, `ListOf`, leaf strategies) so that a test can
check them against the models: a field added to a model but not here fails
`test_shapes_cover_every_model_field`, instead of silently going untested.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

Strategy = st.SearchStrategy[Any]


@dataclass(frozen=True)
class Obj:
    fields: Mapping[str, Any]  # name -> Obj | ListOf | Strategy; all optional unless required
    required: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ListOf:
    item: Any
    min_size: int = 0
    max_size: int = 3


@dataclass(frozen=True)
class Opaque:
    """A value conversion carries along untouched, whatever its inner fields."""

    strategy: Strategy
    reason: str = field(default="")


def strategy(shape: Any) -> Strategy:
    if isinstance(shape, Obj):
        required = {k: strategy(v) for k, v in shape.fields.items() if k in shape.required}
        optional = {k: strategy(v) for k, v in shape.fields.items() if k not in shape.required}
        return st.fixed_dictionaries(required, optional=optional)
    if isinstance(shape, ListOf):
        return st.lists(strategy(shape.item), min_size=shape.min_size, max_size=shape.max_size)
    if isinstance(shape, Opaque):
        return shape.strategy
    assert isinstance(shape, st.SearchStrategy), shape
    return shape


# --------------------------------------------------------------------------- leaves

NAME = st.text(alphabet="abcxyz0-", min_size=1, max_size=6).filter(
    lambda s: s[0].isalpha() and s[-1].isalnum()
)
TEXT = st.text(max_size=8)
INT32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
COUNT = st.integers(min_value=0, max_value=1000)
QUANTITY = st.sampled_from(["0", "1", "500m", "2Gi", "1.5", "10k"])
TIME = st.sampled_from(["2026-01-01T00:00:00Z", "2026-03-04T05:06:07Z"])
BOOL = st.booleans()
LABELS = st.dictionaries(NAME, TEXT, max_size=2)
RESOURCES = st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), QUANTITY)
# Label selectors and pod templates are core Kubernetes types that conversion copies.
SELECTOR = Opaque(
    st.fixed_dictionaries(
        {},
        optional={
            "matchLabels": LABELS,
            "matchExpressions": st.lists(
                st.fixed_dictionaries(
                    {"key": NAME, "operator": st.sampled_from(["In", "Exists"])},
                    optional={"values": st.lists(NAME, max_size=2)},
                ),
                max_size=2,
            ),
        },
    ),
    "metav1.LabelSelector",
)
POD_TEMPLATE = Opaque(
    st.fixed_dictionaries(
        {
            "spec": st.fixed_dictionaries(
                {
                    "containers": st.lists(
                        st.fixed_dictionaries(
                            {"name": NAME},
                            optional={
                                "image": TEXT,
                                "resources": st.fixed_dictionaries({"requests": RESOURCES}),
                            },
                        ),
                        min_size=1,
                        max_size=2,
                    )
                },
                optional={"restartPolicy": st.sampled_from(["Never", "OnFailure"])},
            )
        },
        optional={"metadata": st.fixed_dictionaries({}, optional={"labels": LABELS})},
    ),
    "corev1.PodTemplateSpec",
)

CONDITION = Obj(
    {
        "type": NAME,
        "status": st.sampled_from(["True", "False", "Unknown"]),
        "reason": NAME,
        "message": TEXT,
        "lastTransitionTime": TIME,
        "observedGeneration": COUNT,
    },
    frozenset({"type", "status", "reason", "lastTransitionTime"}),
)


def metadata(namespaced: bool) -> Obj:
    fields: dict[str, Any] = {
        "name": NAME,
        "generateName": NAME,
        "uid": st.uuids().map(str),
        "resourceVersion": st.integers(min_value=1).map(str),
        "generation": COUNT,
        "creationTimestamp": TIME,
        "deletionTimestamp": TIME,
        "deletionGracePeriodSeconds": COUNT,
        "labels": LABELS,
        "annotations": LABELS,
        "ownerReferences": ListOf(
            Obj(
                {
                    "apiVersion": st.just("batch/v1"),
                    "kind": st.just("Job"),
                    "name": NAME,
                    "uid": st.uuids().map(str),
                    "controller": BOOL,
                    "blockOwnerDeletion": BOOL,
                },
                frozenset({"apiVersion", "kind", "name", "uid"}),
            )
        ),
        "finalizers": st.lists(NAME, max_size=2),
        "managedFields": Opaque(
            st.lists(
                st.fixed_dictionaries({"manager": NAME, "operation": st.just("Apply")}), max_size=1
            ),
            "metav1.ManagedFieldsEntry",
        ),
        "selfLink": TEXT,
    }
    fields["namespace"] = NAME  # cluster-scoped objects drop it when decoded, not converted
    return Obj(fields, frozenset({"name", "namespace"} if namespaced else {"name"}))


def document(api_version: str, kind: str, namespaced: bool, **parts: Any) -> Obj:
    fields = {
        "apiVersion": st.just(api_version),
        "kind": st.just(kind),
        "metadata": metadata(namespaced),
        **parts,
    }
    return Obj(fields, frozenset({"apiVersion", "kind", "metadata"}))


# --------------------------------------------------------------------------- shared parts

TAINT = Obj(
    {
        "key": NAME,
        "value": TEXT,
        "effect": st.sampled_from(["NoSchedule", "NoExecute"]),
        "timeAdded": TIME,
    },
    frozenset({"key", "effect"}),
)
TOLERATION = Obj(
    {
        "key": NAME,
        "operator": st.sampled_from(["Equal", "Exists"]),
        "value": TEXT,
        "effect": st.sampled_from(["NoSchedule", "NoExecute"]),
        "tolerationSeconds": COUNT,
    }
)
RESOURCE_GROUP = Obj(
    {
        "coveredResources": st.lists(NAME, min_size=1, max_size=3),
        "flavors": ListOf(
            Obj(
                {
                    "name": NAME,
                    "resources": ListOf(
                        Obj(
                            {
                                "name": NAME,
                                "nominalQuota": QUANTITY,
                                "borrowingLimit": QUANTITY,
                                "lendingLimit": QUANTITY,
                            },
                            frozenset({"name", "nominalQuota"}),
                        ),
                        min_size=1,
                    ),
                },
                frozenset({"name", "resources"}),
            ),
            min_size=1,
        ),
    },
    frozenset({"coveredResources", "flavors"}),
)
FAIR_SHARING = Obj({"weight": QUANTITY})
ADMISSION_FAIR_SHARING_STATUS = Obj(
    {"consumedResources": RESOURCES, "lastUpdate": TIME},
    frozenset({"consumedResources", "lastUpdate"}),
)
USAGE = ListOf(
    Obj(
        {
            "name": NAME,
            "resources": ListOf(Obj({"name": NAME, "total": QUANTITY, "borrowed": QUANTITY})),
        },
    )
)
LQ_USAGE = ListOf(Obj({"name": NAME, "resources": ListOf(Obj({"name": NAME, "total": QUANTITY}))}))
QUEUE_COUNTS = {"pendingWorkloads": COUNT, "reservingWorkloads": COUNT, "admittedWorkloads": COUNT}
STOP_POLICY = st.sampled_from(["None", "Hold", "HoldAndDrain"])
PREEMPTION = Obj(
    {
        "reclaimWithinCohort": st.sampled_from(["Never", "LowerPriority", "Any"]),
        "borrowWithinCohort": Obj(
            {"policy": st.sampled_from(["Never", "LowerPriority"]), "maxPriorityThreshold": INT32}
        ),
        "withinClusterQueue": st.sampled_from(
            ["Never", "LowerPriority", "LowerOrNewerEqualPriority"]
        ),
    }
)
STRATEGY = Obj(
    {
        "admissionChecks": ListOf(
            Obj({"name": NAME, "onFlavors": st.lists(NAME, max_size=2)}, frozenset({"name"})),
            min_size=1,
        )
    },
    frozenset({"admissionChecks"}),
)
PENDING_WORKLOADS_STATUS = Obj(
    {
        "clusterQueuePendingWorkload": ListOf(Obj({"name": NAME, "namespace": NAME})),
        "lastChangeTime": TIME,
    },
    frozenset({"lastChangeTime"}),
)
PREFERENCE = st.sampled_from(["BorrowingOverPreemption", "PreemptionOverBorrowing"])


def versions(v1beta1: Any, v1beta2: Any) -> dict[str, Any]:
    return {"kueue.x-k8s.io/v1beta1": v1beta1, "kueue.x-k8s.io/v1beta2": v1beta2}


# --------------------------------------------------------------------------- kinds


def resource_flavor(api_version: str) -> Obj:
    spec = Obj(
        {
            "nodeLabels": LABELS,
            "nodeTaints": ListOf(TAINT),
            "tolerations": ListOf(TOLERATION),
            "topologyName": NAME,
        }
    )
    return document(api_version, "ResourceFlavor", False, spec=spec)


def workload_priority_class(api_version: str) -> Obj:
    shape = document(api_version, "WorkloadPriorityClass", False, value=INT32, description=TEXT)
    return Obj(shape.fields, shape.required | {"value"})


def cohort(api_version: str) -> Obj:
    fair_sharing_status: dict[str, Any] = {"weightedShare": COUNT}
    if api_version.endswith("v1beta1"):
        fair_sharing_status["admissionFairSharingStatus"] = ADMISSION_FAIR_SHARING_STATUS
    return document(
        api_version,
        "Cohort",
        False,
        spec=Obj(
            {
                "parentName": NAME,
                "resourceGroups": ListOf(RESOURCE_GROUP),
                "fairSharing": FAIR_SHARING,
            }
        ),
        status=Obj({"conditions": ListOf(CONDITION), "fairSharing": Obj(fair_sharing_status)}),
    )


def local_queue(api_version: str) -> Obj:
    old = api_version.endswith("v1beta1")
    status: dict[str, Any] = {
        "conditions": ListOf(CONDITION),
        **QUEUE_COUNTS,
        "flavorsReservation": LQ_USAGE,
        ("flavorUsage" if old else "flavorsUsage"): LQ_USAGE,
        "fairSharing": Obj(
            {"weightedShare": COUNT, "admissionFairSharingStatus": ADMISSION_FAIR_SHARING_STATUS}
        ),
    }
    if old:
        status["pendingWorkloadsStatus"] = PENDING_WORKLOADS_STATUS
        status["flavors"] = ListOf(
            Obj(
                {
                    "name": NAME,
                    "resources": st.lists(NAME, max_size=2),
                    "nodeLabels": LABELS,
                    "nodeTaints": ListOf(TAINT),
                    "topology": Obj({"name": NAME, "levels": st.lists(NAME)}),
                }
            )
        )
    spec = Obj({"clusterQueue": NAME, "stopPolicy": STOP_POLICY, "fairSharing": FAIR_SHARING})
    return document(api_version, "LocalQueue", True, spec=spec, status=Obj(status))


def cluster_queue(api_version: str) -> Obj:
    old = api_version.endswith("v1beta1")
    policies = ["MayStopSearch", "TryNextFlavor"]
    fungibility = Obj(
        {
            "whenCanBorrow": st.sampled_from([*policies, "Borrow"] if old else policies),
            "whenCanPreempt": st.sampled_from([*policies, "Preempt"] if old else policies),
            "preference": PREFERENCE,
        }
    )
    spec: dict[str, Any] = {
        "resourceGroups": ListOf(RESOURCE_GROUP),
        ("cohort" if old else "cohortName"): NAME,
        "queueingStrategy": st.sampled_from(["StrictFIFO", "BestEffortFIFO"]),
        "namespaceSelector": SELECTOR,
        "flavorFungibility": fungibility,
        "preemption": PREEMPTION,
        "admissionChecksStrategy": STRATEGY,
        "stopPolicy": STOP_POLICY,
        "fairSharing": FAIR_SHARING,
        "admissionScope": Obj(
            {
                "admissionMode": st.sampled_from(
                    ["UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing"]
                )
            },
            frozenset({"admissionMode"}),
        ),
    }
    fair_sharing_status: dict[str, Any] = {"weightedShare": COUNT}
    status: dict[str, Any] = {
        "conditions": ListOf(CONDITION),
        "flavorsReservation": USAGE,
        "flavorsUsage": USAGE,
        **QUEUE_COUNTS,
        "fairSharing": Obj(fair_sharing_status),
    }
    if old:
        spec["admissionChecks"] = st.lists(NAME, max_size=3)
        fair_sharing_status["admissionFairSharingStatus"] = ADMISSION_FAIR_SHARING_STATUS
        status["pendingWorkloadsStatus"] = PENDING_WORKLOADS_STATUS
    else:
        spec["concurrentAdmissionPolicy"] = Obj(
            {
                "migration": Obj(
                    {
                        "mode": st.sampled_from(["TryPreferredFlavors", "RetainFirstAdmission"]),
                        "constraints": Obj({"lastAcceptableFlavorName": NAME}),
                    },
                    frozenset({"mode"}),
                )
            },
            frozenset({"migration"}),
        )
    return document(api_version, "ClusterQueue", False, spec=Obj(spec), status=Obj(status))


@st.composite
def _slice(draw: st.DrawFn, levels: int) -> dict[str, Any]:
    count = draw(st.integers(min_value=1, max_value=3))
    per_level = []
    for _ in range(levels):
        if draw(BOOL):
            per_level.append({"universal": draw(NAME)})
        else:
            roots = draw(st.lists(NAME, min_size=count, max_size=count))
            affixes = draw(st.fixed_dictionaries({}, optional={"prefix": NAME, "suffix": NAME}))
            per_level.append({"individual": {"roots": roots, **affixes}})
    pods = (
        {"universal": draw(COUNT)}
        if draw(BOOL)
        else {"individual": draw(st.lists(COUNT, min_size=count, max_size=count))}
    )
    return {"domainCount": count, "valuesPerLevel": per_level, "podCounts": pods}


@st.composite
def _topology_assignment(draw: st.DrawFn, old: bool) -> dict[str, Any]:
    """levels, and domains (v1beta1) or slices (v1beta2) with one value per level."""
    levels = draw(st.lists(NAME, max_size=3))
    if old:
        domain = st.fixed_dictionaries(
            {"values": st.lists(NAME, min_size=len(levels), max_size=len(levels)), "count": COUNT}
        )
        return {"levels": levels, "domains": draw(st.lists(domain, max_size=3))}
    out: dict[str, Any] = {"levels": levels}
    if draw(BOOL):
        out["slices"] = draw(st.lists(_slice(len(levels)), max_size=3))
    return out


def topology_assignment(old: bool) -> Opaque:
    return Opaque(_topology_assignment(old), "levels/domains/slices: checked in test_conversion")


def workload(api_version: str) -> Obj:
    old = api_version.endswith("v1beta1")
    topology_request: dict[str, Any] = {
        "required": NAME,
        "preferred": NAME,
        "unconstrained": BOOL,
        "podIndexLabel": NAME,
        "subGroupIndexLabel": NAME,
        "subGroupCount": COUNT,
        "podSetGroupName": NAME,
        "podSetSliceRequiredTopology": NAME,
        "podSetSliceSize": COUNT,
    }
    spec: dict[str, Any] = {
        "queueName": NAME,
        "priority": INT32,
        "active": BOOL,
        "maximumExecutionTimeSeconds": COUNT,
    }
    gate_time: dict[str, Any] = {}
    if old:
        spec["priorityClassName"] = st.one_of(NAME, st.just(""))
        spec["priorityClassSource"] = st.sampled_from(
            ["kueue.x-k8s.io/workloadpriorityclass", "scheduling.k8s.io/priorityclass", ""]
        )
    else:
        topology_request["podsetSliceRequiredTopologyConstraints"] = ListOf(
            Obj({"topology": NAME, "size": COUNT}, frozenset({"topology", "size"}))
        )
        spec["priorityClassRef"] = st.builds(
            lambda ref, name: {"group": ref[0], "kind": ref[1], "name": name},
            st.sampled_from(
                [
                    ("kueue.x-k8s.io", "WorkloadPriorityClass"),
                    ("scheduling.k8s.io", "PriorityClass"),
                ]
            ),
            NAME,
        )
        spec["preemptionGates"] = ListOf(Obj({"name": NAME}, frozenset({"name"})))
        gate_time = {"lastTransitionTime": TIME}
    spec["podSets"] = ListOf(
        Obj(
            {
                "name": NAME,
                "template": POD_TEMPLATE,
                "count": COUNT,
                "minCount": COUNT,
                "topologyRequest": Obj(topology_request),
            },
            frozenset({"name", "template", "count"}),
        ),
        min_size=1,
    )
    status: dict[str, Any] = {
        "conditions": ListOf(CONDITION),
        "admission": Obj(
            {
                "clusterQueue": NAME,
                "podSetAssignments": ListOf(
                    Obj(
                        {
                            "name": NAME,
                            "flavors": st.dictionaries(NAME, NAME, max_size=2),
                            "resourceUsage": RESOURCES,
                            "count": COUNT,
                            "topologyAssignment": topology_assignment(old),
                            "delayedTopologyRequest": st.sampled_from(["Pending", "Ready"]),
                        },
                        frozenset({"name"}),
                    )
                ),
            },
            frozenset({"clusterQueue"}),
        ),
        "requeueState": Obj({"count": COUNT, "requeueAt": TIME}),
        "reclaimablePods": ListOf(
            Obj({"name": NAME, "count": COUNT}, frozenset({"name", "count"}))
        ),
        "admissionChecks": ListOf(
            Obj(
                {
                    "name": NAME,
                    "state": st.sampled_from(["Pending", "Ready", "Retry", "Rejected"]),
                    "lastTransitionTime": TIME,
                    "message": TEXT,
                    "retryCount": COUNT,
                    "requeueAfterSeconds": COUNT,
                    "podSetUpdates": ListOf(
                        Obj(
                            {
                                "name": NAME,
                                "labels": LABELS,
                                "annotations": LABELS,
                                "nodeSelector": LABELS,
                                "tolerations": ListOf(TOLERATION),
                            },
                            frozenset({"name"}),
                        )
                    ),
                },
                frozenset({"name", "state", "lastTransitionTime", "message"}),
            )
        ),
        "resourceRequests": ListOf(
            Obj({"name": NAME, "resources": RESOURCES}, frozenset({"name"}))
        ),
        (
            "accumulatedPastExexcutionTimeSeconds" if old else "accumulatedPastExecutionTimeSeconds"
        ): COUNT,
        "schedulingStats": Obj(
            {
                "evictions": ListOf(
                    Obj(
                        {"reason": NAME, "underlyingCause": NAME, "count": COUNT},
                        frozenset({"reason", "underlyingCause", "count"}),
                    )
                )
            }
        ),
        "nominatedClusterNames": st.lists(NAME, max_size=2),
        "clusterName": NAME,
        "unhealthyNodes": ListOf(Obj({"name": NAME}, frozenset({"name"}))),
    }
    if not old:
        status["preemptionGates"] = ListOf(
            Obj(
                {"name": NAME, "position": st.sampled_from(["Closed", "Open"]), **gate_time},
                frozenset({"name"}),
            )
        )
    shape = document(
        api_version, "Workload", True, spec=Obj(spec, frozenset({"podSets"})), status=Obj(status)
    )
    return Obj(shape.fields, shape.required | {"spec"})


def admission_check(api_version: str) -> Obj:
    spec: dict[str, Any] = {
        "controllerName": NAME,
        "parameters": Obj(
            {"apiGroup": NAME, "kind": NAME, "name": NAME}, frozenset({"apiGroup", "kind", "name"})
        ),
    }
    if api_version.endswith("v1beta1"):
        spec["retryDelayMinutes"] = COUNT
    return document(
        api_version,
        "AdmissionCheck",
        False,
        spec=Obj(spec, frozenset({"controllerName"})),
        status=Obj({"conditions": ListOf(CONDITION)}),
    )


KINDS = {
    "ResourceFlavor": resource_flavor,
    "WorkloadPriorityClass": workload_priority_class,
    "Cohort": cohort,
    "LocalQueue": local_queue,
    "ClusterQueue": cluster_queue,
    "Workload": workload,
    "AdmissionCheck": admission_check,
}
