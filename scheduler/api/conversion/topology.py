"""Topology assignments: v1beta1 lists every domain, v1beta2 packs domains into slices.

v1beta1: `domains: [{values: [one value per level], count}]`.
v1beta2: `slices: [{domainCount, valuesPerLevel: [{universal} | {individual: {prefix,
suffix, roots}}], podCounts: {universal} | {individual}}]`, where a level's value is the
same for every domain of the slice (`universal`) or `prefix + roots[i] + suffix`.
Going up, all domains go into one slice with individual values (no packing); going
down, slices are expanded. Both directions describe the same domains in the same order.
"""

from __future__ import annotations

from typing import Any

from scheduler.api.conversion.fields import ConversionError
from scheduler.api.conversion.paths import Path, path_text


def domains_to_slices(domains: Any, at: Path) -> Any:
    if not isinstance(domains, list) or not domains:
        return [] if isinstance(domains, list) else domains
    where = (*at, "domains")
    values: list[list[Any]] = []
    counts: list[Any] = []
    for i, domain in enumerate(domains):
        if not isinstance(domain, dict) or not isinstance(domain.get("values"), list):
            raise ConversionError(path_text((*where, i, "values")), "Required value")
        if "count" not in domain:
            raise ConversionError(path_text((*where, i, "count")), "Required value")
        values.append(domain["values"])
        counts.append(domain["count"])
    width = len(values[0])
    for i, row in enumerate(values):
        if len(row) != width:
            raise ConversionError(
                path_text((*where, i, "values")),
                f"every domain needs the same number of values ({width})",
            )
    return [
        {
            "domainCount": len(domains),
            "valuesPerLevel": [
                {"individual": {"roots": [row[level] for row in values]}} for level in range(width)
            ],
            "podCounts": {"individual": counts},
        }
    ]


def slices_to_domains(slices: Any, at: Path, levels: int) -> Any:
    if not isinstance(slices, list):
        return slices
    domains: list[dict[str, Any]] = []
    for s, piece in enumerate(slices):
        where = (*at, "slices", s)
        if not isinstance(piece, dict):
            raise ConversionError(path_text(where), "must be an object")
        count = piece.get("domainCount")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ConversionError(path_text((*where, "domainCount")), "must be a count")
        per_level = piece.get("valuesPerLevel", [])
        if not isinstance(per_level, list):
            raise ConversionError(path_text((*where, "valuesPerLevel")), "must be a list")
        if len(per_level) != levels:
            raise ConversionError(
                path_text((*where, "valuesPerLevel")),
                "valuesPerLevel must have the same length as the number of levels in this "
                "TopologyAssignment",
            )
        columns = [
            _level_values(level, count, (*where, "valuesPerLevel", n))
            for n, level in enumerate(per_level)
        ]
        pods = _pod_counts(piece.get("podCounts"), count, (*where, "podCounts"))
        for i in range(count):
            domains.append({"values": [column[i] for column in columns], "count": pods[i]})
    return domains


def _universal(union: Any, count: int, where: Path) -> list[Any] | None:
    """A `{universal | individual}` union of the v1beta2 slice: exactly one must be set; the
    universal value repeated `count` times, or None when `individual` is the one set."""
    if not isinstance(union, dict) or ("universal" in union) == ("individual" in union):
        raise ConversionError(
            path_text(where), "exactly one of the fields in [universal individual] must be set"
        )
    return [union["universal"]] * count if "universal" in union else None


def _level_values(level: Any, count: int, where: Path) -> list[Any]:
    repeated = _universal(level, count, where)
    if repeated is not None:
        return repeated
    individual = level["individual"]
    roots = individual.get("roots") if isinstance(individual, dict) else None
    if not isinstance(roots, list) or len(roots) != count:
        raise ConversionError(
            path_text((*where, "individual", "roots")),
            "valuesPerLevel.individual, if set, must have roots of length equal to domainCount "
            "of this TopologyAssignmentSlice",
        )
    prefix, suffix = individual.get("prefix", ""), individual.get("suffix", "")
    return [f"{prefix}{root}{suffix}" for root in roots]


def _pod_counts(pods: Any, count: int, where: Path) -> list[Any]:
    repeated = _universal(pods, count, where)
    if repeated is not None:
        return repeated
    individual = pods["individual"]
    if not isinstance(individual, list) or len(individual) != count:
        raise ConversionError(
            path_text((*where, "individual")),
            "podCounts.individual must have length equal to domainCount",
        )
    return list(individual)
