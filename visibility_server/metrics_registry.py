"""Metrics registered once per Prometheus registry.

An app or a client may be built several times with the same registry (tests, a
restarted listener), and prometheus-client refuses a second metric of the same name:
each set of metrics is made the first time a registry asks for it and handed back
afterwards, for as long as the registry lives.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry

T = TypeVar("T")


class OncePerRegistry(Generic[T]):
    """`make(registry)` called at most once per registry; its result kept beside it."""

    def __init__(self, make: Callable[[CollectorRegistry], T]) -> None:
        self._make = make
        self._made: weakref.WeakKeyDictionary[CollectorRegistry, T] = weakref.WeakKeyDictionary()

    def __call__(self, registry: CollectorRegistry) -> T:
        found = self._made.get(registry)
        if found is None:
            found = self._made[registry] = self._make(registry)
        return found
