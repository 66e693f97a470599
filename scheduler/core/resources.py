"""Resource arithmetic shared by the whole core.

Quota is keyed by FR = (flavor name, resource name) and every amount is an exact
integer "scheduler value" (cpu in milli-units, everything else in base units), so
no rounding ever creeps into admission decisions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

FlavorResource = tuple[str, str]
"""(flavor name, resource name)."""

FRAmounts = dict[FlavorResource, int]
ResourceAmounts = dict[str, int]
"""Resource name -> scheduler value, before a flavor is chosen."""


def add_into(target: dict[FlavorResource, int], extra: Mapping[FlavorResource, int]) -> None:
    for fr, value in extra.items():
        target[fr] = target.get(fr, 0) + value


def subtract_into(target: dict[FlavorResource, int], extra: Mapping[FlavorResource, int]) -> None:
    for fr, value in extra.items():
        target[fr] = target.get(fr, 0) - value


def sum_amounts(parts: Iterable[Mapping[FlavorResource, int]]) -> FRAmounts:
    total: FRAmounts = {}
    for part in parts:
        add_into(total, part)
    return total
