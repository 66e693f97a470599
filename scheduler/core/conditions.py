"""Kubernetes condition bookkeeping with Kueue's update rule (docs/scheduling.md#status-fields)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from scheduler.core.clock import Instant

MAX_MESSAGE_BYTES = 32768


@dataclass(slots=True)
class Condition:
    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str
    message: str
    last_transition: Instant
    observed_generation: int | None = None

    @property
    def is_true(self) -> bool:
        return self.status == "True"


def truncate_message(message: str) -> str:
    if len(message) <= MAX_MESSAGE_BYTES // 4:  # no character takes more than 4 bytes
        return message
    raw = message.encode()
    if len(raw) <= MAX_MESSAGE_BYTES:
        return message
    return raw[: MAX_MESSAGE_BYTES - 4].decode(errors="ignore") + " ..."


class Conditions:
    """An ordered set of conditions keyed by type; insertion order is output order."""

    __slots__ = ("_items",)

    def __init__(self, items: list[Condition] | None = None) -> None:
        # A tuple searched by type, not a dict: a workload carries a handful of
        # conditions at most and a pending one usually exactly one, kept in 56 bytes
        # instead of a dict's 184, and a lone condition is kept without a tuple
        # (docs/benchmarks.md, "Cluster-mode memory"). The tuple is replaced, never
        # changed, when a condition comes or goes.
        self._items: Condition | tuple[Condition, ...] = ()
        if items:
            # Like a dict built from them: the last of a type wins, in the first's place.
            self._keep(tuple({item.type: item for item in items}.values()))

    def _keep(self, items: tuple[Condition, ...]) -> None:
        self._items = items[0] if len(items) == 1 else items

    def _all(self) -> tuple[Condition, ...]:
        items = self._items
        return (items,) if isinstance(items, Condition) else items

    def get(self, type_: str) -> Condition | None:
        items = self._items
        if isinstance(items, Condition):
            return items if items.type == type_ else None
        for c in items:
            if c.type == type_:
                return c
        return None

    def is_true(self, type_: str) -> bool:
        c = self.get(type_)
        return c is not None and c.status == "True"

    def is_false(self, type_: str) -> bool:
        c = self.get(type_)
        return c is not None and c.status == "False"

    def set(  # noqa: PLR0913 - the fields of one Kubernetes condition, named at every call
        self,
        type_: str,
        status: str,
        reason: str,
        message: str,
        now: Instant,
        observed_generation: int | None = None,
    ) -> bool:
        """Set a condition; returns whether anything observable changed.

        An unchanged status keeps ``lastTransitionTime``; a new status moves it to now.
        """
        message = truncate_message(message)
        old = self.get(type_)
        if old is None:
            new = Condition(type_, status, reason, message, now, observed_generation)
            self._keep((*self._all(), new))
            return True
        changed = (old.status, old.reason, old.message, old.observed_generation) != (
            status,
            reason,
            message,
            observed_generation,
        )
        if old.status != status:
            old.last_transition = now
        old.status, old.reason, old.message = status, reason, message
        old.observed_generation = observed_generation
        return changed

    def remove(self, type_: str) -> bool:
        every = self._all()
        kept = tuple(c for c in every if c.type != type_)
        self._keep(kept)
        return len(kept) != len(every)

    def __iter__(self) -> Iterator[Condition]:
        return iter(self._all())

    def items(self) -> list[Condition]:
        return list(self._all())

    def copy(self) -> Conditions:
        return Conditions(
            [
                Condition(
                    c.type,
                    c.status,
                    c.reason,
                    c.message,
                    c.last_transition,
                    c.observed_generation,
                )
                for c in self._all()
            ]
        )
