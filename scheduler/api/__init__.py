"""The API model: typed Kubernetes/Kueue objects, quantities, validation and decoding.

Typical use: `load_documents(paths)` returns `Decoded(obj, source, index, item)`
records of validated, defaulted, immutable objects (`decode_object(mapping,
source=..., index=...)` for one document); `source_of(obj)` also tells where an object
came from; `ApiError` is the one input-error type, rendered as one line naming file,
document, object and field.
"""

from scheduler.api.admissioncheck import AdmissionCheck, AdmissionCheckSpec, CheckState
from scheduler.api.clusterqueue import (
    BorrowWithinCohort,
    ClusterQueue,
    ClusterQueuePreemption,
    ClusterQueueSpec,
    FlavorFungibility,
)
from scheduler.api.cohort import Cohort, CohortSpec, CohortV1Alpha1
from scheduler.api.config import (
    Configuration,
    FairSharingConfig,
    QueueVisibility,
    RequeuingStrategy,
    WaitForPodsReady,
)
from scheduler.api.decode import Decoded, decode_object, load_documents, load_yaml
from scheduler.api.durations import DurationError, format_duration, parse_duration
from scheduler.api.errors import ApiError, FieldError, SourceRef
from scheduler.api.flavor import ResourceFlavor, ResourceFlavorSpec
from scheduler.api.job import Job, JobSpec
from scheduler.api.job_workload import job_to_workload, resolve_priority
from scheduler.api.kinds import KINDS, ApiObject
from scheduler.api.localqueue import LocalQueue, LocalQueueSpec
from scheduler.api.meta import Condition, KubeObject, ObjectMeta, TemplateMeta
from scheduler.api.namespace import Namespace
from scheduler.api.pod import Container, PodSpec, PodTemplateSpec, ResourceRequirements
from scheduler.api.priority import PriorityClass, WorkloadPriorityClass
from scheduler.api.quantity import (
    Quantity,
    QuantityError,
    QuantityField,
    format_resource,
    scheduler_value,
)
from scheduler.api.quota import FairSharing, FlavorQuotas, ResourceGroup, ResourceQuota
from scheduler.api.rbac import ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding
from scheduler.api.requests import limits_exceeded, pod_requests
from scheduler.api.scenario import DeleteTarget, Scenario, ScenarioEvent, ScenarioSpec
from scheduler.api.source import set_source, source_of
from scheduler.api.taints import Taint, Toleration
from scheduler.api.validation import validate_object, validate_update
from scheduler.api.workload import (
    Admission,
    AdmissionCheckState,
    PodSet,
    PodSetAssignment,
    ReclaimablePod,
    RequeueState,
    Workload,
    WorkloadSpec,
    WorkloadStatus,
)

__all__ = [
    "KINDS",
    "Admission",
    "AdmissionCheck",
    "AdmissionCheckSpec",
    "AdmissionCheckState",
    "ApiError",
    "ApiObject",
    "BorrowWithinCohort",
    "CheckState",
    "ClusterQueue",
    "ClusterQueuePreemption",
    "ClusterQueueSpec",
    "ClusterRole",
    "ClusterRoleBinding",
    "Cohort",
    "CohortSpec",
    "CohortV1Alpha1",
    "Condition",
    "Configuration",
    "Container",
    "Decoded",
    "DeleteTarget",
    "DurationError",
    "FairSharing",
    "FairSharingConfig",
    "FieldError",
    "FlavorFungibility",
    "FlavorQuotas",
    "Job",
    "JobSpec",
    "KubeObject",
    "LocalQueue",
    "LocalQueueSpec",
    "Namespace",
    "ObjectMeta",
    "PodSet",
    "PodSetAssignment",
    "PodSpec",
    "PodTemplateSpec",
    "PolicyRule",
    "PriorityClass",
    "Quantity",
    "QuantityError",
    "QuantityField",
    "QueueVisibility",
    "ReclaimablePod",
    "RequeueState",
    "RequeuingStrategy",
    "ResourceFlavor",
    "ResourceFlavorSpec",
    "ResourceGroup",
    "ResourceQuota",
    "ResourceRequirements",
    "Role",
    "RoleBinding",
    "Scenario",
    "ScenarioEvent",
    "ScenarioSpec",
    "SourceRef",
    "Taint",
    "TemplateMeta",
    "Toleration",
    "WaitForPodsReady",
    "Workload",
    "WorkloadPriorityClass",
    "WorkloadSpec",
    "WorkloadStatus",
    "decode_object",
    "format_duration",
    "format_resource",
    "job_to_workload",
    "limits_exceeded",
    "load_documents",
    "load_yaml",
    "parse_duration",
    "pod_requests",
    "resolve_priority",
    "scheduler_value",
    "set_source",
    "source_of",
    "validate_object",
    "validate_update",
]
