"""Kueue's resource transformations (a Configuration's `resources.transformations`;
docs/scheduling.md#resource-transformations): what a pod's effective request is charged
as, before quota sees it.

Each transformation names an input resource; a pod requesting it is charged, for each
output, the input's amount times the output's factor (times, with `multiplyBy`, the
amount of that other resource the pod requests), and keeps the input itself (`Retain`)
or not (`Replace`). Outputs of several inputs add up; a negative total (a factor below
zero is how an allowance is written) counts as zero. Exact: quantities are fractions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from scheduler.api.quantity import Quantity, scheduler_value

RETAIN = "Retain"
REPLACE = "Replace"
STRATEGIES = (RETAIN, REPLACE)


@dataclass(frozen=True, slots=True)
class Transformation:
    """One transformation, as the core applies it (hashable: it keys the pod set cache)."""

    input: str
    retain: bool
    multiply_by: str
    outputs: tuple[tuple[str, Fraction], ...]


def _amount(resource: str, value: int) -> Fraction:
    """A scheduler value back as the quantity it counts (cpu is counted in milli-units)."""
    return Fraction(value, 1000) if resource == "cpu" else Fraction(value)


def transform(
    per_pod: Mapping[str, int], transformations: Sequence[Transformation]
) -> dict[str, int]:
    """The per-pod request `per_pod` (scheduler values) as quota is charged, sorted."""
    by_input = {t.input: t for t in transformations}
    if not any(name in by_input for name in per_pod):
        return dict(per_pod)
    kept: dict[str, int] = {}
    made: dict[str, Fraction] = {}
    for name, value in per_pod.items():
        mapping = by_input.get(name)
        if mapping is None:
            kept[name] = value
            continue
        base = _amount(name, value)
        if mapping.multiply_by in per_pod:
            base *= _amount(mapping.multiply_by, per_pod[mapping.multiply_by])
        for output, factor in mapping.outputs:
            made[output] = made.get(output, Fraction(0)) + base * factor
        if mapping.retain:
            kept[name] = value
    for output, amount in made.items():
        charged = scheduler_value(output, Quantity(max(amount, Fraction(0))))
        kept[output] = kept.get(output, 0) + charged
    return {name: kept[name] for name in sorted(kept)}
