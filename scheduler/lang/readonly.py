"""The one form of a public, read-only name over a private attribute that the owner's own
methods change (docs/architecture.md#read-only-attributes).

A value that is never rebound is a `Final` attribute instead, and an immutable record is
a frozen dataclass; this is for state such as "synced" or "the current context", which
the object changes and the outside only reads.
"""

from __future__ import annotations

from typing import Generic, Never, Self, TypeVar, overload

T = TypeVar("T")


class ReadOnly(Generic[T]):
    """`name = ReadOnly[T]()` in a class body reads the instance's `_name`. Assigning
    `name` is a type error (mypy) and an AttributeError at run time; the owner sets
    `_name`."""

    __slots__ = ("_name", "_private")

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name
        self._private = "_" + name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Self: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...

    def __get__(self, obj: object, owner: type | None = None) -> Self | T:
        if obj is None:
            return self
        value: T = getattr(obj, self._private)
        return value

    def __set__(self, obj: object, value: Never) -> None:
        raise AttributeError(f"{self._name} is read-only")
