"""ClusterQueue, LocalQueue, Cohort and AdmissionCheck between v1beta1 and v1beta2."""

from __future__ import annotations

from typing import Any

from scheduler.api.conversion.fields import (
    ConversionError,
    keep_field,
    mapping,
    rename,
    replace_key,
)
from scheduler.api.conversion.stash import Recorder

MAY_STOP_SEARCH = "MayStopSearch"
# v1beta1's older spellings of "stop at this flavor"; v1beta2 knows only MayStopSearch.
_FUNGIBILITY_SYNONYMS = (("whenCanBorrow", "Borrow"), ("whenCanPreempt", "Preempt"))


def cluster_queue_up(doc: dict[str, Any], rec: Recorder) -> None:
    spec = mapping(doc, "spec")
    if spec is not None:
        rename(spec, "cohort", "cohortName")
        _admission_checks_up(spec, rec)
        fungibility = mapping(spec, "flavorFungibility")
        if fungibility is not None:
            for key, synonym in _FUNGIBILITY_SYNONYMS:
                if fungibility.get(key) == synonym:
                    fungibility[key] = MAY_STOP_SEARCH
                    at = ("spec", "flavorFungibility", key)
                    rec.keep_if(at, synonym, at, MAY_STOP_SEARCH)
    status = mapping(doc, "status")
    keep_field(status, "pendingWorkloadsStatus", ("status",), rec)
    keep_field(
        mapping(status, "fairSharing"), "admissionFairSharingStatus", ("status", "fairSharing"), rec
    )


def _admission_checks_up(spec: dict[str, Any], rec: Recorder) -> None:
    """v1beta1's plain list of checks becomes strategy rules that apply to every flavor."""
    if "admissionChecks" not in spec:
        return
    checks = spec["admissionChecks"]
    if not isinstance(checks, list) or not checks:
        keep_field(spec, "admissionChecks", ("spec",), rec)
        return
    if "admissionChecksStrategy" in spec:
        raise ConversionError(
            "spec", "Either AdmissionChecks or AdmissionCheckStrategy can be set, but not both"
        )
    strategy = {"admissionChecks": [{"name": name} for name in checks]}
    replace_key(spec, "admissionChecks", "admissionChecksStrategy", strategy)
    rec.keep_if(("spec", "admissionChecks"), checks, ("spec", "admissionChecksStrategy"), strategy)


def cluster_queue_down(doc: dict[str, Any], rec: Recorder) -> None:
    spec = mapping(doc, "spec")
    rename(spec, "cohortName", "cohort")
    keep_field(spec, "concurrentAdmissionPolicy", ("spec",), rec)


def local_queue_up(doc: dict[str, Any], rec: Recorder) -> None:
    status = mapping(doc, "status")
    rename(status, "flavorUsage", "flavorsUsage")
    keep_field(status, "flavors", ("status",), rec)
    # Older v1beta1 LocalQueues (and queuescope's queue visibility) carry it too.
    keep_field(status, "pendingWorkloadsStatus", ("status",), rec)


def local_queue_down(doc: dict[str, Any], rec: Recorder) -> None:
    rename(mapping(doc, "status"), "flavorsUsage", "flavorUsage")


def cohort_up(doc: dict[str, Any], rec: Recorder) -> None:
    fair_sharing = mapping(mapping(doc, "status"), "fairSharing")
    keep_field(fair_sharing, "admissionFairSharingStatus", ("status", "fairSharing"), rec)


def admission_check_up(doc: dict[str, Any], rec: Recorder) -> None:
    keep_field(mapping(doc, "spec"), "retryDelayMinutes", ("spec",), rec)


def unchanged(doc: dict[str, Any], rec: Recorder) -> None:
    """ResourceFlavor, WorkloadPriorityClass, ProvisioningRequestConfig, Topology: the same
    fields in both versions."""
