"""Workload between v1beta1 and v1beta2: the priority class reference, the renamed
status field, v1beta2-only preemption gates, and topology assignments."""

from __future__ import annotations

from typing import Any, Final

from scheduler.api.conversion.fields import (
    ConversionError,
    keep_field,
    mapping,
    rename,
    replace_key,
)
from scheduler.api.conversion.stash import Recorder
from scheduler.api.conversion.topology import domains_to_slices, slices_to_domains

WORKLOAD_PRIORITY_CLASS_SOURCE: Final = "kueue.x-k8s.io/workloadpriorityclass"
POD_PRIORITY_CLASS_SOURCE: Final = "scheduling.k8s.io/priorityclass"

# v1beta1 priorityClassSource <-> v1beta2 priorityClassRef (group, kind).
_REFS: Final = {
    WORKLOAD_PRIORITY_CLASS_SOURCE: ("kueue.x-k8s.io", "WorkloadPriorityClass"),
    POD_PRIORITY_CLASS_SOURCE: ("scheduling.k8s.io", "PriorityClass"),
}
_SOURCES: Final[dict[tuple[object, object], str]] = {ref: src for src, ref in _REFS.items()}

_PAST_EXECUTION_V1BETA1 = "accumulatedPastExexcutionTimeSeconds"  # Kueue's v1beta1 spelling
_PAST_EXECUTION_V1BETA2 = "accumulatedPastExecutionTimeSeconds"


def workload_up(doc: dict[str, Any], rec: Recorder) -> None:
    spec = mapping(doc, "spec")
    if spec is not None:
        _priority_up(spec, rec)
    status = mapping(doc, "status")
    rename(status, _PAST_EXECUTION_V1BETA1, _PAST_EXECUTION_V1BETA2)
    for at, assignment in _topology_assignments(status):
        if "domains" in assignment:
            # One unpacked slice expands back to exactly these domains: nothing to keep.
            slices = domains_to_slices(assignment["domains"], at)
            replace_key(assignment, "domains", "slices", slices)


def workload_down(doc: dict[str, Any], rec: Recorder) -> None:
    spec = mapping(doc, "spec")
    if spec is not None:
        _priority_down(spec)
        keep_field(spec, "preemptionGates", ("spec",), rec)
        pod_sets = spec.get("podSets")
        for i, pod_set in enumerate(pod_sets if isinstance(pod_sets, list) else []):
            keep_field(
                mapping(pod_set, "topologyRequest"),
                "podsetSliceRequiredTopologyConstraints",
                ("spec", "podSets", i, "topologyRequest"),
                rec,
            )
    status = mapping(doc, "status")
    rename(status, _PAST_EXECUTION_V1BETA2, _PAST_EXECUTION_V1BETA1)
    keep_field(status, "preemptionGates", ("status",), rec)
    for at, assignment in _topology_assignments(status):
        if "slices" in assignment:
            slices = assignment["slices"]
            levels = assignment.get("levels")
            domains = slices_to_domains(slices, at, len(levels) if isinstance(levels, list) else 0)
            replace_key(assignment, "slices", "domains", domains)
            # Converting back unpacks the slices; the packed form is kept for that case.
            unpacked = domains_to_slices(domains, at)
            if unpacked != slices:
                rec.keep_if((*at, "slices"), slices, (*at, "slices"), unpacked)


def _priority_up(spec: dict[str, Any], rec: Recorder) -> None:
    """priorityClassSource + priorityClassName become priorityClassRef {group, kind, name}."""
    source, name = spec.get("priorityClassSource"), spec.get("priorityClassName")
    if source in _REFS and isinstance(name, str) and name:
        group, kind = _REFS[source]
        ref = {"group": group, "kind": kind, "name": name}
        replace_key(spec, "priorityClassName", "priorityClassRef", ref)
        del spec["priorityClassSource"]
        return
    # No class kind, or no name: v1beta2's reference needs both, so nothing maps.
    keep_field(spec, "priorityClassSource", ("spec",), rec)
    keep_field(spec, "priorityClassName", ("spec",), rec)


def _priority_down(spec: dict[str, Any]) -> None:
    if "priorityClassRef" not in spec:
        return
    ref = spec["priorityClassRef"]
    if not isinstance(ref, dict):
        raise ConversionError("spec.priorityClassRef", "must be an object")
    source = _SOURCES.get((ref.get("group"), ref.get("kind")))
    if source is None:
        raise ConversionError(
            "spec.priorityClassRef",
            f"group {ref.get('group')!r} and kind {ref.get('kind')!r} name no priority class "
            "kind (kueue.x-k8s.io/WorkloadPriorityClass or scheduling.k8s.io/PriorityClass)",
        )
    extra = sorted(set(ref) - {"group", "kind", "name"})
    if extra:
        raise ConversionError(f"spec.priorityClassRef.{extra[0]}", "field not declared in schema")
    if "name" in ref:
        replace_key(spec, "priorityClassRef", "priorityClassName", ref["name"])
        spec["priorityClassSource"] = source
    else:
        replace_key(spec, "priorityClassRef", "priorityClassSource", source)


def _topology_assignments(
    status: dict[str, Any] | None,
) -> list[tuple[tuple[str | int, ...], dict[str, Any]]]:
    admission = mapping(status, "admission")
    assignments = admission.get("podSetAssignments") if admission is not None else None
    found: list[tuple[tuple[str | int, ...], dict[str, Any]]] = []
    for i, assignment in enumerate(assignments if isinstance(assignments, list) else []):
        topology = mapping(assignment, "topologyAssignment")
        if topology is not None:
            at = ("status", "admission", "podSetAssignments", i, "topologyAssignment")
            found.append((at, topology))
    return found
