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


_NONE: dict[str, Condition] = {}  # shared and never written: see Conditions.__init__


class Conditions:
    """An ordered set of conditions keyed by type; insertion order is output order."""

    __slots__ = ("_items",)

    def __init__(self, items: list[Condition] | None = None) -> None:
        # Most pending workloads have never been tried and carry no condition: they
        # share one empty dict until their first `set` (64 bytes each at 100k pending).
        self._items: dict[str, Condition] = _NONE
        if items:
            self._items = {item.type: item for item in items}

    def get(self, type_: str) -> Condition | None:
        return self._items.get(type_)

    def is_true(self, type_: str) -> bool:
        c = self._items.get(type_)
        return c is not None and c.status == "True"

    def is_false(self, type_: str) -> bool:
        c = self._items.get(type_)
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
        old = self._items.get(type_)
        if old is None:
            if self._items is _NONE:
                self._items = {}
            self._items[type_] = Condition(type_, status, reason, message, now, observed_generation)
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
        return self._items.pop(type_, None) is not None

    def __iter__(self) -> Iterator[Condition]:
        return iter(list(self._items.values()))

    def items(self) -> list[Condition]:
        return list(self._items.values())

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
                for c in self._items.values()
            ]
        )
