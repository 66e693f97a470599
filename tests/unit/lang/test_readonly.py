"""`ReadOnly[T]()`: a public name that reads the private attribute and refuses assignment
(docs/architecture.md#read-only-attributes)."""

from __future__ import annotations

import pytest

from scheduler.lang.readonly import ReadOnly


class _Switch:
    on = ReadOnly[bool]()

    def __init__(self) -> None:
        self._on = False

    def flip(self) -> None:
        self._on = not self._on


def test_reads_the_private_attribute_as_the_owner_changes_it() -> None:
    switch = _Switch()
    assert switch.on is False
    switch.flip()
    assert switch.on is True


def test_refuses_assignment_from_outside() -> None:
    switch = _Switch()
    with pytest.raises(AttributeError, match="on is read-only"):
        switch.on = True  # type: ignore[assignment]
    assert switch.on is False


def test_the_class_attribute_is_the_descriptor() -> None:
    assert isinstance(_Switch.on, ReadOnly)
