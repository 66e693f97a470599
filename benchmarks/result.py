"""What a benchmark returns: figures, a table, and its targets, met or missed."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

_RELATIONS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


@dataclass(frozen=True, slots=True)
class Target:
    """One target of docs/performance.md: `value relation limit` (e.g. p99 < 5 ms)."""

    what: str
    value: float | None  # None: not measured in this run (size not run)
    relation: str
    limit: float
    unit: str

    def __post_init__(self) -> None:
        if self.relation not in _RELATIONS:
            raise ValueError(f"unknown relation {self.relation!r}")

    @property
    def met(self) -> bool | None:
        if self.value is None or math.isnan(self.value):
            return None
        return _RELATIONS[self.relation](self.value, self.limit)

    @property
    def verdict(self) -> str:
        return {True: "met", False: "MISSED", None: "not measured"}[self.met]


@dataclass(slots=True)
class Result:
    name: str
    headline: float
    unit: str
    headline_label: str
    command: str
    columns: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    def headline_line(self) -> str:
        return f"{self.name}: {format_number(self.headline)} {self.unit}"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["targets"] = [{**asdict(t), "met": t.met} for t in self.targets]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Result:
        targets = [
            Target(t["what"], t["value"], t["relation"], t["limit"], t["unit"])
            for t in data.get("targets", [])
        ]
        fields = {k: v for k, v in data.items() if k != "targets"}
        return cls(**fields, targets=targets)


def format_number(value: float | None) -> str:
    """A figure for people: 3 significant digits, thousands separators above 1000."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if math.isinf(value):
        return "inf"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"
