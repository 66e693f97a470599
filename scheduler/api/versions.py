"""The API versions of Kueue's group that queuescope reads and writes (docs/api-versions.md)."""

from __future__ import annotations

from typing import Final

KUEUE_GROUP: Final = "kueue.x-k8s.io"
KUEUE_V1BETA1: Final = "kueue.x-k8s.io/v1beta1"
KUEUE_V1BETA2: Final = "kueue.x-k8s.io/v1beta2"
KUEUE_VERSIONS: Final = (KUEUE_V1BETA1, KUEUE_V1BETA2)

# Kinds of the group that have a v1beta1 and a v1beta2 form and convert between them.
CONVERTIBLE_KINDS: Final = frozenset(
    {
        "ResourceFlavor",
        "ClusterQueue",
        "LocalQueue",
        "Cohort",
        "WorkloadPriorityClass",
        "Workload",
        "AdmissionCheck",
    }
)

# Kinds of the group that queuescope does not implement: naming them in an input is an
# error that says so, never a silent skip (docs/simulate.md "Unsupported kinds").
UNSUPPORTED_KINDS: Final = frozenset(
    {
        "AdmissionCheck",
        "Topology",
        "MultiKueueCluster",
        "MultiKueueConfig",
        "ProvisioningRequestConfig",
    }
)


def short_version(api_version: str) -> str:
    """`v1beta2` from `kueue.x-k8s.io/v1beta2` (the `--api-version` spelling)."""
    return api_version.rpartition("/")[2]
