"""What `kubectl explain` says about every field of the CRDs that `tools/crdgen.py` writes.

Keyed by (model class name, JSON field name): the CRD schema is generated model by model, so
a model used in several places (a ResourceGroup in a ClusterQueue and in a Cohort) is
described once. Fields that exist only in `v1beta2` are described where crdgen declares
them. crdgen refuses to write (and `--check` fails) when a field has no entry here, so a new
model field cannot reach the CRDs undocumented. Our own words throughout.
"""

from __future__ import annotations

from typing import Final

# Shown for the root object's apiVersion and kind of every kind (metadata is described by
# Kubernetes itself: a CRD may not say anything about it).
ROOT: Final[dict[str, str]] = {
    "apiVersion": (
        "The versioned schema of this representation: kueue.x-k8s.io/v1beta2 (stored) or "
        "kueue.x-k8s.io/v1beta1 (served, deprecated)."
    ),
    "kind": "The REST resource this object represents, in CamelCase.",
}
# apiVersion of the one kind whose v1beta1 Kueue does not mark deprecated (MultiKueueConfig).
API_VERSION_NOT_DEPRECATED: Final = (
    "The versioned schema of this representation: kueue.x-k8s.io/v1beta2 (stored) or "
    "kueue.x-k8s.io/v1beta1 (served)."
)

_STOP_POLICY = (
    "Stops admission: None admits as usual; Hold keeps admitted Workloads running but admits "
    "no new ones; HoldAndDrain also evicts the admitted Workloads."
)
_KUBECONFIG = "A kubeconfig giving access to the cluster, in a Secret or a file."
_CONDITIONS = "Conditions written by the MultiKueue controller (Active: connected), keyed by type."
_FAIR_SHARING = "Fair sharing settings of this node of the quota tree."
_RESOURCE_GROUPS = (
    "Quota, grouped: each group lists resources that are always assigned together and the "
    "flavors, tried in order, that provide quota for them. A resource belongs to one group."
)

FIELDS: Final[dict[tuple[str, str], str]] = {
    # ClusterQueue
    ("ClusterQueue", "spec"): "What the ClusterQueue offers and how it shares it.",
    ("ClusterQueue", "status"): (
        "Observed state, written by the controller: pending and admitted counts, usage per "
        "flavor, conditions."
    ),
    ("ClusterQueueSpec", "resourceGroups"): _RESOURCE_GROUPS,
    ("ClusterQueueSpec", "cohort"): (
        "The Cohort this queue belongs to; queues of one Cohort may borrow each other's "
        "unused quota. Empty: the queue stands alone."
    ),
    ("ClusterQueueSpec", "queueingStrategy"): (
        "Order of pending Workloads: StrictFIFO never lets a Workload pass the head of the "
        "queue; BestEffortFIFO lets a Workload that fits pass one that does not."
    ),
    ("ClusterQueueSpec", "namespaceSelector"): (
        "Namespaces whose LocalQueues may send Workloads here (a label selector). Unset "
        "matches no namespace; an empty selector matches every namespace."
    ),
    ("ClusterQueueSpec", "flavorFungibility"): (
        "When the search for a flavor stops at the current one (to borrow or to preempt) "
        "and when it moves on to the next flavor of the group."
    ),
    ("ClusterQueueSpec", "preemption"): (
        "Which admitted Workloads an incoming Workload may evict to make room, inside this "
        "queue and across its Cohort."
    ),
    ("ClusterQueueSpec", "admissionChecks"): (
        "Names of AdmissionChecks every Workload of this queue must pass before it is "
        "admitted. Mutually exclusive with admissionChecksStrategy."
    ),
    ("ClusterQueueSpec", "admissionChecksStrategy"): (
        "AdmissionChecks required before admission, each optionally limited to some flavors."
    ),
    ("ClusterQueueSpec", "stopPolicy"): _STOP_POLICY,
    ("ClusterQueueSpec", "fairSharing"): _FAIR_SHARING,
    ("ClusterQueueSpec", "admissionScope"): (
        "Admission fair sharing between the LocalQueues of this ClusterQueue."
    ),
    ("ResourceGroup", "coveredResources"): (
        "Resource names (cpu, memory, nvidia.com/gpu, ...) whose quota this group declares."
    ),
    ("ResourceGroup", "flavors"): (
        "Flavors that provide quota for the covered resources, in the order they are tried."
    ),
    ("FlavorQuotas", "name"): "The ResourceFlavor this quota is for.",
    ("FlavorQuotas", "resources"): "Quota of each covered resource in this flavor.",
    ("ResourceQuota", "name"): "The resource this quota is for; one of coveredResources.",
    ("ResourceQuota", "nominalQuota"): (
        "Quota this queue owns: what its Workloads may use without borrowing."
    ),
    ("ResourceQuota", "borrowingLimit"): (
        "The most this queue may borrow from its Cohort beyond nominalQuota. Unset: no limit."
    ),
    ("ResourceQuota", "lendingLimit"): (
        "The most of nominalQuota other queues of the Cohort may borrow. Unset: all of it."
    ),
    ("FlavorFungibility", "whenCanBorrow"): (
        "What to do when the current flavor fits only by borrowing: MayStopSearch (v1beta1 "
        "also: Borrow) takes it; TryNextFlavor looks at the next flavor first."
    ),
    ("FlavorFungibility", "whenCanPreempt"): (
        "What to do when the current flavor fits only by preempting: MayStopSearch (v1beta1 "
        "also: Preempt) preempts; TryNextFlavor looks at the next flavor first."
    ),
    ("FlavorFungibility", "preference"): (
        "When both are possible in a flavor, whether borrowing or preempting is preferred."
    ),
    ("ClusterQueuePreemption", "withinClusterQueue"): (
        "Preemption of Workloads of the same queue: Never, LowerPriority, or "
        "LowerOrNewerEqualPriority (also equal priority, if created later)."
    ),
    ("ClusterQueuePreemption", "reclaimWithinCohort"): (
        "Preemption of Workloads of other queues of the Cohort that borrow this queue's "
        "quota: Never, LowerPriority, or Any."
    ),
    ("ClusterQueuePreemption", "borrowWithinCohort"): (
        "Preemption in other queues of the Cohort in order to borrow."
    ),
    ("BorrowWithinCohort", "policy"): "Never, or LowerPriority: preempt to borrow.",
    ("BorrowWithinCohort", "maxPriorityThreshold"): (
        "Only Workloads at or below this priority may be preempted to borrow."
    ),
    ("AdmissionChecksStrategy", "admissionChecks"): "The AdmissionChecks and their flavors.",
    ("AdmissionCheckStrategyRule", "name"): "Name of the AdmissionCheck.",
    ("AdmissionCheckStrategyRule", "onFlavors"): (
        "Flavors for which the check applies; empty: every flavor."
    ),
    ("FairSharing", "weight"): (
        "Share of unused quota this node gets relative to its siblings; 0 borrows only "
        "what nobody else wants."
    ),
    ("AdmissionScope", "admissionMode"): (
        "UsageBasedAdmissionFairSharing orders admission by each LocalQueue's recent usage; "
        "NoAdmissionFairSharing does not."
    ),
    # LocalQueue
    ("LocalQueue", "spec"): "Where the LocalQueue sends its Workloads.",
    ("LocalQueue", "status"): (
        "Observed state, written by the controller: pending, reserving and admitted counts, "
        "usage per flavor, conditions."
    ),
    ("LocalQueueSpec", "clusterQueue"): (
        "The ClusterQueue that admits this queue's Workloads; it must select the namespace."
    ),
    ("LocalQueueSpec", "stopPolicy"): _STOP_POLICY,
    ("LocalQueueSpec", "fairSharing"): "Admission fair sharing weight of this LocalQueue.",
    # Workload
    ("Workload", "spec"): "What the Workload asks for and where it is queued.",
    ("Workload", "status"): (
        "Observed state: the admission (quota reserved, flavors), conditions, requeueing."
    ),
    ("WorkloadSpec", "podSets"): (
        "Groups of identical pods, each with a count and a pod template, whose resource "
        "requests are what the Workload needs."
    ),
    ("WorkloadSpec", "queueName"): "The LocalQueue, in the Workload's namespace, it waits in.",
    ("WorkloadSpec", "priorityClassName"): (
        "Name of the priority class (see priorityClassSource) that gave the priority."
    ),
    ("WorkloadSpec", "priority"): "Priority: higher is admitted first and preempts lower.",
    ("WorkloadSpec", "priorityClassSource"): (
        "Kind of priorityClassName: kueue.x-k8s.io/workloadpriorityclass or "
        "scheduling.k8s.io/priorityclass; empty when no class is named."
    ),
    ("WorkloadSpec", "active"): (
        "false deactivates the Workload: it is evicted if admitted and never admitted."
    ),
    ("WorkloadSpec", "maximumExecutionTimeSeconds"): (
        "Once admitted for this many seconds in total, the Workload is deactivated."
    ),
    ("PodSet", "name"): "Name of the pod set, unique in the Workload.",
    ("PodSet", "count"): "Number of pods.",
    ("PodSet", "minCount"): (
        "With partial admission, the smallest count the Workload can run with."
    ),
    ("PodSet", "template"): "Template of the pods; their container requests count.",
    ("PodSet", "topologyRequest"): "Where in the topology the pods want to be placed.",
    ("PodSetAssignment", "name"): "The pod set this assignment is for.",
    ("PodSetAssignment", "flavors"): "Resource name -> the flavor that quota was taken from.",
    ("PodSetAssignment", "resourceUsage"): "Total quota taken, per resource, for the pod set.",
    ("PodSetAssignment", "count"): "Number of pods admitted (less than asked: partial).",
    ("PodSetAssignment", "topologyAssignment"): "Topology domains assigned to the pods.",
    ("PodSetAssignment", "delayedTopologyRequest"): (
        "Whether a topology assignment is still to be made (Pending) or made (Ready)."
    ),
    ("Admission", "clusterQueue"): "The ClusterQueue the quota is reserved in.",
    ("Admission", "podSetAssignments"): "Flavors and usage of each pod set.",
    ("WorkloadStatus", "admission"): (
        "Set when quota is reserved: where, and which flavors. Cleared on eviction."
    ),
    ("WorkloadStatus", "conditions"): (
        "QuotaReserved, Admitted, Evicted, Preempted, Requeued, PodsReady, Finished, ..."
    ),
    ("WorkloadStatus", "reclaimablePods"): (
        "Pods of each pod set that finished and whose quota can be given back."
    ),
    ("WorkloadStatus", "requeueState"): "How often and until when requeueing is backed off.",
    ("WorkloadStatus", "accumulatedPastExexcutionTimeSeconds"): (
        "Seconds the Workload was admitted before its last eviction (v1beta1 spelling)."
    ),
    ("WorkloadStatus", "resourceRequests"): "Total requests per pod set, as computed.",
    ("WorkloadStatus", "admissionChecks"): "State of each AdmissionCheck of the Workload.",
    ("WorkloadStatus", "schedulingStats"): "Counts of evictions, by reason.",
    ("WorkloadStatus", "clusterName"): "MultiKueue: the worker cluster the Workload runs on.",
    ("WorkloadStatus", "nominatedClusterNames"): (
        "MultiKueue: the worker clusters the Workload was sent to."
    ),
    ("WorkloadStatus", "unhealthyNodes"): "Nodes the Workload's pods must move away from.",
    ("Condition", "type"): "Kind of condition, in CamelCase.",
    ("Condition", "status"): "True, False, or Unknown.",
    ("Condition", "reason"): "Why the condition last changed, in CamelCase.",
    ("Condition", "message"): "Human-readable details of the last change.",
    ("Condition", "lastTransitionTime"): "When the status last changed.",
    ("Condition", "observedGeneration"): "metadata.generation the condition was set for.",
    ("ReclaimablePod", "name"): "The pod set.",
    ("ReclaimablePod", "count"): "Number of its pods that no longer need quota.",
    ("RequeueState", "count"): "Times the Workload was requeued after an eviction.",
    ("RequeueState", "requeueAt"): "The Workload is not requeued before this time.",
    # ResourceFlavor
    ("ResourceFlavor", "spec"): "The nodes this flavor stands for.",
    ("ResourceFlavorSpec", "nodeLabels"): (
        "Labels of the flavor's nodes; added as node affinity to admitted pods."
    ),
    ("ResourceFlavorSpec", "nodeTaints"): (
        "Taints of the flavor's nodes; a Workload must tolerate them to use the flavor."
    ),
    ("ResourceFlavorSpec", "tolerations"): "Tolerations added to the pods admitted here.",
    ("ResourceFlavorSpec", "topologyName"): "The Topology of the flavor's nodes.",
    ("Taint", "key"): "Taint key.",
    ("Taint", "value"): "Taint value.",
    ("Taint", "effect"): "NoSchedule, PreferNoSchedule, or NoExecute.",
    ("Taint", "timeAdded"): "When a NoExecute taint was added.",
    ("Toleration", "key"): "Taint key tolerated; empty with Exists: every key.",
    ("Toleration", "operator"): "Exists or Equal (the default).",
    ("Toleration", "value"): "Taint value tolerated, with Equal.",
    ("Toleration", "effect"): "Taint effect tolerated; empty: every effect.",
    ("Toleration", "tolerationSeconds"): "How long a NoExecute taint is tolerated.",
    # WorkloadPriorityClass
    ("WorkloadPriorityClass", "value"): "The priority of Workloads that name this class.",
    ("WorkloadPriorityClass", "description"): "Free text: what the class is for.",
    # Cohort
    ("Cohort", "spec"): "The Cohort's place in the tree and its own quota.",
    ("Cohort", "status"): "Observed state, written by the controller.",
    ("CohortSpec", "parentName"): (
        "The parent Cohort; quota is shared up and down the tree. Empty: a root."
    ),
    ("CohortSpec", "resourceGroups"): _RESOURCE_GROUPS,
    ("CohortSpec", "fairSharing"): _FAIR_SHARING,
    # AdmissionCheck
    ("AdmissionCheck", "spec"): "Which controller evaluates the check, and its configuration.",
    ("AdmissionCheck", "status"): "Observed state, written by the check's controller.",
    ("AdmissionCheckSpec", "controllerName"): (
        "The controller that evaluates this check (a name it recognizes, not necessarily a "
        "Deployment's). Required, and cannot be changed."
    ),
    ("AdmissionCheckSpec", "retryDelayMinutes"): (
        "Deprecated and not read: retries are timed by the controller's requeueAfterSeconds."
    ),
    ("AdmissionCheckSpec", "parameters"): "An object holding the check's own settings.",
    ("AdmissionCheckParametersReference", "apiGroup"): "API group of the settings object.",
    ("AdmissionCheckParametersReference", "kind"): "Kind of the settings object.",
    ("AdmissionCheckParametersReference", "name"): "Name of the settings object.",
    ("AdmissionCheckStatus", "conditions"): (
        "Active=True once the controller can evaluate the check; until then the "
        "ClusterQueues naming it admit nothing."
    ),
    ("AdmissionCheckState", "name"): "The AdmissionCheck.",
    ("AdmissionCheckState", "state"): (
        "Pending, Ready (passed), Retry (evict, back off and try again) or Rejected "
        "(deactivate the Workload)."
    ),
    ("AdmissionCheckState", "lastTransitionTime"): "When the state last changed.",
    ("AdmissionCheckState", "message"): "Human-readable details from the controller.",
    ("AdmissionCheckState", "requeueAfterSeconds"): (
        "With Retry: the Workload is not queued again before lastTransitionTime plus this."
    ),
    ("AdmissionCheckState", "retryCount"): "How many times this check went through Retry.",
    ("AdmissionCheckState", "podSetUpdates"): (
        "Labels, annotations, node selectors and tolerations the check asks the pods to get."
    ),
    ("PodSetUpdate", "name"): "The pod set.",
    ("PodSetUpdate", "labels"): "Labels to add to the pods.",
    ("PodSetUpdate", "annotations"): "Annotations to add to the pods.",
    ("PodSetUpdate", "nodeSelector"): "Node selector entries to add to the pods.",
    ("PodSetUpdate", "tolerations"): "Tolerations to add to the pods.",
    # The kinds queuescope stores but does not act on (docs/scheduling.md): what the fields
    # mean to the controllers that read them.
    # ProvisioningRequestConfig
    ("ProvisioningRequestConfig", "spec"): (
        "How the ProvisioningRequest controller asks the cluster autoscaler for capacity."
    ),
    ("ProvisioningRequestConfigSpec", "provisioningClassName"): (
        "The autoscaler's provisioning class (a DNS subdomain), e.g. "
        "check-capacity.autoscaling.x-k8s.io."
    ),
    ("ProvisioningRequestConfigSpec", "parameters"): (
        "Extra parameters the provisioning class may need: at most 100, values up to 255 "
        "characters."
    ),
    ("ProvisioningRequestConfigSpec", "managedResources"): (
        "Resources the autoscaler provisions; only pod sets requesting one of them are sent. "
        "Empty: every resource."
    ),
    ("ProvisioningRequestConfigSpec", "retryStrategy"): (
        "How a failed provisioning request is retried (requeues with exponential backoff)."
    ),
    ("ProvisioningRequestConfigSpec", "podSetUpdates"): (
        "Updates to the pod sets that make their pods land on the provisioned nodes."
    ),
    ("ProvisioningRequestConfigSpec", "podSetMergePolicy"): (
        "Which pod sets are merged before the request is sent: IdenticalPodTemplates or "
        "IdenticalWorkloadSchedulingRequirements."
    ),
    ("ProvisioningRequestRetryStrategy", "backoffLimitCount"): (
        "Retries before the Workload is deactivated; 0 turns retrying off."
    ),
    ("ProvisioningRequestRetryStrategy", "backoffBaseSeconds"): (
        "Base of the exponential backoff between retries, in seconds."
    ),
    ("ProvisioningRequestRetryStrategy", "backoffMaxSeconds"): (
        "Longest backoff between retries, in seconds."
    ),
    ("ProvisioningRequestPodSetUpdates", "nodeSelector"): (
        "Node selector entries to add, at most 8, keyed by key."
    ),
    ("ProvisioningRequestPodSetUpdatesNodeSelector", "key"): "The node label to select on.",
    ("ProvisioningRequestPodSetUpdatesNodeSelector", "valueFromProvisioningClassDetail"): (
        "The entry of the request's status.provisioningClassDetails whose value is selected."
    ),
    # MultiKueueConfig
    ("MultiKueueConfig", "spec"): "The worker clusters a ClusterQueue's Workloads go to.",
    ("MultiKueueConfigSpec", "clusters"): (
        "Names of MultiKueueClusters, 1 to 20, no repeats, most preferred first."
    ),
    ("MultiKueueConfigSpec", "quotaManagement"): (
        "Manual (the default) or Automated management of the manager cluster's quotas."
    ),
    ("MultiKueueConfigV1Beta1", "spec"): "The worker clusters a ClusterQueue's Workloads go to.",
    ("MultiKueueConfigSpecV1Beta1", "clusters"): "Names of MultiKueueClusters, 1 to 20.",
    # MultiKueueCluster
    ("MultiKueueCluster", "spec"): "How the MultiKueue controller connects to the cluster.",
    ("MultiKueueCluster", "status"): (
        "Observed state, written by the MultiKueue controller (condition Active: connected)."
    ),
    ("MultiKueueClusterV1Beta1", "spec"): "How the MultiKueue controller connects to the cluster.",
    ("MultiKueueClusterV1Beta1", "status"): (
        "Observed state, written by the MultiKueue controller (condition Active: connected)."
    ),
    ("MultiKueueClusterSpec", "clusterSource"): (
        "Where the connection comes from: exactly one of kubeConfig and clusterProfileRef."
    ),
    ("MultiKueueClusterSpecV1Beta1", "kubeConfig"): _KUBECONFIG,
    ("MultiKueueClusterSpecV1Beta1", "clusterProfileRef"): (
        "A ClusterProfile; kept so that v1beta2 objects survive a v1beta1 round trip."
    ),
    ("ClusterSource", "kubeConfig"): _KUBECONFIG,
    ("ClusterSource", "clusterProfileRef"): "A ClusterProfile that describes the cluster.",
    ("KubeConfig", "location"): (
        "The Secret's name (its kubeconfig key holds the file), or the file's path."
    ),
    ("KubeConfig", "locationType"): (
        "Secret (in the MultiKueue controller's namespace) or Path (on its disk)."
    ),
    ("ClusterProfileReference", "name"): "Name of the ClusterProfile.",
    ("MultiKueueClusterStatus", "conditions"): _CONDITIONS,
    # Topology
    ("Topology", "spec"): "The levels of the topology.",
    ("TopologySpec", "levels"): (
        "The levels, widest domain first, 1 to 16, no repeats; kubernetes.io/hostname only as "
        "the last. Immutable."
    ),
    ("TopologyLevel", "nodeLabel"): (
        "The node label whose value names a node's domain at this level, e.g. "
        "cloud.provider.com/topology-rack."
    ),
}

POD_TEMPLATE: Final[dict[str, str]] = {
    "": (
        "A core/v1 PodTemplateSpec, kept as given: the pod schema is the cluster's, and the "
        "scheduler reads only what it needs from it."
    ),
    "metadata": "Labels and annotations of the pods.",
    "spec": "The pods' spec (containers, their requests, node selection, ...).",
}
