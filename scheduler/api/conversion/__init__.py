"""Converting Kueue objects between `kueue.x-k8s.io/v1beta1` and `v1beta2` (docs/api-versions.md).

`convert_document` works on the raw JSON object (as a ConversionReview carries it):
metadata is kept as it is, fields it does not know are carried along untouched, and a
field the target version has no place for is kept in the annotation
`queuescope.io/conversion-data` so that converting back restores it (see `stash`).
An object it cannot convert raises `ApiError` naming the field.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any, Final

from scheduler.api.conversion.fields import ConversionError
from scheduler.api.conversion.multikueue import (
    multikueue_cluster_down,
    multikueue_cluster_up,
    multikueue_config_down,
)
from scheduler.api.conversion.queues import (
    admission_check_up,
    cluster_queue_down,
    cluster_queue_up,
    cohort_up,
    local_queue_down,
    local_queue_up,
    unchanged,
)
from scheduler.api.conversion.stash import (
    STASH_ANNOTATION,
    Recorder,
    StashError,
    put_back,
    take_stash,
    write_stash,
)
from scheduler.api.conversion.workload import workload_down, workload_up
from scheduler.api.errors import ApiError
from scheduler.api.versions import KUEUE_V1BETA2, KUEUE_VERSIONS

__all__ = ["STASH_ANNOTATION", "convert_document", "v1beta2_path"]

Converter = Callable[[dict[str, Any], Recorder], None]

# kind -> (v1beta1 -> v1beta2, v1beta2 -> v1beta1)
_CONVERTERS: Final[dict[str, tuple[Converter, Converter]]] = {
    "ResourceFlavor": (unchanged, unchanged),
    "WorkloadPriorityClass": (unchanged, unchanged),
    "Cohort": (cohort_up, unchanged),
    "LocalQueue": (local_queue_up, local_queue_down),
    "ClusterQueue": (cluster_queue_up, cluster_queue_down),
    "Workload": (workload_up, workload_down),
    "AdmissionCheck": (admission_check_up, unchanged),
    # Kinds queuescope stores but does not act on (docs/scheduling.md).
    "ProvisioningRequestConfig": (unchanged, unchanged),
    "Topology": (unchanged, unchanged),
    "MultiKueueConfig": (unchanged, multikueue_config_down),
    "MultiKueueCluster": (multikueue_cluster_up, multikueue_cluster_down),
}


def convert_document(
    document: Mapping[str, Any], to_api_version: str, *, keep: bool = True
) -> dict[str, Any]:
    """`document` (a Kueue object in v1beta1 or v1beta2) in `to_api_version`.

    Returns a new dict; the input is not changed. With `keep=False`, fields the target
    version lacks are dropped instead of kept in the annotation (for output meant to be
    read, not stored); a stash already on the object is still put back.
    """
    if not isinstance(document, Mapping):
        raise ApiError("a document must be an object (a mapping)")
    kind, api_version = document.get("kind"), document.get("apiVersion")
    who = _identity(document)
    if not isinstance(kind, str) or kind not in _CONVERTERS:
        supported = ", ".join(sorted(_CONVERTERS))
        raise ApiError(
            f"cannot convert kind {kind!r}: only {supported} have both versions",
            path="kind",
            **who,
        )
    for field, version in (("apiVersion", api_version), ("to_api_version", to_api_version)):
        if version not in KUEUE_VERSIONS:
            raise ApiError(
                f"unsupported version {version!r}: expected one of {', '.join(KUEUE_VERSIONS)}",
                path=field if field == "apiVersion" else "",
                **who,
            )
    out = copy.deepcopy(dict(document))
    if api_version == to_api_version:
        return out
    up, down = _CONVERTERS[kind]
    convert = up if to_api_version == KUEUE_V1BETA2 else down
    recorder = Recorder()
    try:
        stash = take_stash(out, str(api_version))
        convert(out, recorder)
        out["apiVersion"] = to_api_version
        if stash is not None:
            put_back(out, stash)
        if keep:
            write_stash(out, to_api_version, recorder.kept)
    except ConversionError as err:
        raise ApiError(err.detail, path=err.path, **who) from None
    except StashError as err:
        raise ApiError(
            f"not a conversion record: {err}",
            path=f"metadata.annotations[{STASH_ANNOTATION}]",
            **who,
        ) from None
    return out


def _identity(document: Mapping[str, Any]) -> dict[str, Any]:
    metadata = document.get("metadata")
    kind = document.get("kind")
    name = namespace = None
    if isinstance(metadata, Mapping):
        name = metadata.get("name") if isinstance(metadata.get("name"), str) else None
        namespace = metadata.get("namespace")
        namespace = namespace if isinstance(namespace, str) else None
    return {"kind": kind if isinstance(kind, str) else None, "name": name, "namespace": namespace}


# Field paths that are named differently in v1beta2: an error found while checking the
# v1beta1 form of a v1beta2 object is reported with the v1beta2 name.
_V1BETA2_NAMES: Final = (
    ("spec.cohort", "spec.cohortName"),
    ("spec.admissionChecks", "spec.admissionChecksStrategy.admissionChecks"),
    ("spec.priorityClassName", "spec.priorityClassRef.name"),
    ("spec.priorityClassSource", "spec.priorityClassRef"),
    ("status.accumulatedPastExexcutionTimeSeconds", "status.accumulatedPastExecutionTimeSeconds"),
    ("status.flavorUsage", "status.flavorsUsage"),
)


def v1beta2_path(path: str) -> str:
    """The v1beta2 name of a v1beta1 field path (unchanged when both versions agree)."""
    for old, new in _V1BETA2_NAMES:
        if path == old or path.startswith((old + ".", old + "[")):
            return new + path[len(old) :]
    return path
