"""The input kinds: (apiVersion, kind) -> model class, and the ApiObject union."""

from __future__ import annotations

from typing import TypeAlias

from scheduler.api.admissioncheck import AdmissionCheck
from scheduler.api.base import TypedObject
from scheduler.api.clusterqueue import ClusterQueue
from scheduler.api.cohort import Cohort, CohortV1Alpha1
from scheduler.api.config import CONFIG_V1BETA1, Configuration
from scheduler.api.config_v1beta2 import CONFIG_V1BETA2, ConfigurationV1Beta2
from scheduler.api.flavor import ResourceFlavor
from scheduler.api.job import Job
from scheduler.api.jobset_model import JOBSET_API_VERSION, JobSet
from scheduler.api.localqueue import LocalQueue
from scheduler.api.namespace import Namespace
from scheduler.api.plain_pod import Pod
from scheduler.api.priority import PriorityClass, WorkloadPriorityClass
from scheduler.api.rbac import ClusterRole, ClusterRoleBinding, Role, RoleBinding
from scheduler.api.scenario import Scenario
from scheduler.api.statefulset_model import StatefulSet
from scheduler.api.v1beta2 import V1BETA2_MODELS
from scheduler.api.versions import KUEUE_V1BETA1, KUEUE_V1BETA2
from scheduler.api.workload import Workload

ApiObject: TypeAlias = (
    Namespace
    | ResourceFlavor
    | ClusterQueue
    | LocalQueue
    | Cohort
    | WorkloadPriorityClass
    | PriorityClass
    | Workload
    | AdmissionCheck
    | Job
    | Pod
    | StatefulSet
    | JobSet
    | Configuration
    | Scenario
    | Role
    | ClusterRole
    | RoleBinding
    | ClusterRoleBinding
)
"""Every decoded object. `CohortV1Alpha1` is a `Cohort`; v1beta2 documents decode into
the internal (v1beta1) models, so no v1beta2 model (of Kueue's objects or of its
Configuration) is ever one of these."""

KINDS: dict[tuple[str, str], type[TypedObject]] = {
    ("v1", "Namespace"): Namespace,
    (KUEUE_V1BETA1, "ResourceFlavor"): ResourceFlavor,
    (KUEUE_V1BETA1, "ClusterQueue"): ClusterQueue,
    (KUEUE_V1BETA1, "LocalQueue"): LocalQueue,
    (KUEUE_V1BETA1, "Cohort"): Cohort,
    ("kueue.x-k8s.io/v1alpha1", "Cohort"): CohortV1Alpha1,
    (KUEUE_V1BETA1, "WorkloadPriorityClass"): WorkloadPriorityClass,
    (KUEUE_V1BETA1, "Workload"): Workload,
    (KUEUE_V1BETA1, "AdmissionCheck"): AdmissionCheck,
    ("scheduling.k8s.io/v1", "PriorityClass"): PriorityClass,
    ("batch/v1", "Job"): Job,
    ("v1", "Pod"): Pod,
    # Read offline only (docs/simulate.md#statefulsets): the validating webhook judges a
    # StatefulSet by the raw rules before it looks here, and cluster mode keeps it slim.
    ("apps/v1", "StatefulSet"): StatefulSet,
    # Read offline only too (docs/simulate.md#jobsets): the validating webhook judges a
    # JobSet by the raw rules, and cluster mode keeps it slim.
    (JOBSET_API_VERSION, "JobSet"): JobSet,
    (CONFIG_V1BETA1, "Configuration"): Configuration,
    (CONFIG_V1BETA2, "Configuration"): ConfigurationV1Beta2,
    ("simulation.queuescope.io/v1alpha1", "Scenario"): Scenario,
    ("rbac.authorization.k8s.io/v1", "Role"): Role,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): ClusterRole,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): RoleBinding,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): ClusterRoleBinding,
    # Wire models only: decode checks a document with them, then converts it.
    **{(KUEUE_V1BETA2, kind): model for kind, model in V1BETA2_MODELS.items()},
}


def supported_versions(kind: str) -> list[str]:
    return sorted(version for version, k in KINDS if k == kind)
