"""Resolve a queue implementation by name (KEP-2779: replaceable without code changes).

A name is, in this order of precedence:

1. a built-in strategy: ``StrictFIFO`` or ``BestEffortFIFO``;
2. ``package.module:attr`` (``attr`` may be dotted, e.g. ``Class.factory``);
3. the name of an entry point in group ``queuescope.queues``;
4. ``package.module.attr`` (split at the last dot).

The object found must be a :data:`QueueFactory`: a concrete :class:`PendingQueue`
subclass, or a callable taking :class:`QueueSettings` and returning a PendingQueue
(checked on every call, since a plain callable's result cannot be known in advance).
Successful resolutions are cached; failures are not, so a fixed environment is retried.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
from types import ModuleType
from typing import Any

from scheduler.core.queue.fifo import best_effort_fifo, strict_fifo
from scheduler.core.queue.interface import PendingQueue, QueueFactory, QueueSettings

ENTRY_POINT_GROUP = "queuescope.queues"

BUILTIN_QUEUES: dict[str, QueueFactory] = {
    "StrictFIFO": strict_fifo,
    "BestEffortFIFO": best_effort_fifo,
}

_cache: dict[str, QueueFactory] = {}


class QueuePluginError(ValueError):
    """A queue implementation name that cannot be turned into a working factory."""


def resolve_queue_factory(name: str) -> QueueFactory:
    """The factory for ``name``; raises :class:`QueuePluginError` with the cause."""
    cached = _cache.get(name)
    if cached is not None:
        return cached
    factory = _resolve(name)
    _cache[name] = factory
    return factory


def clear_cache() -> None:
    """Forget resolutions (tests, or after installing a plugin at run time)."""
    _cache.clear()


def _resolve(name: str) -> QueueFactory:
    name = name.strip()
    if not name:
        raise QueuePluginError("queue plugin name is empty")
    builtin = BUILTIN_QUEUES.get(name)
    if builtin is not None:
        return builtin
    if ":" in name:
        module_name, _, attr = name.partition(":")
        return _as_factory(name, _load_attr(name, module_name, attr))
    entry_point = _find_entry_point(name)
    if entry_point is not None:
        try:
            obj = entry_point.load()
        except Exception as exc:  # any failure inside a plugin is a config error
            raise QueuePluginError(
                f"queue plugin {name!r}: entry point {entry_point.value!r} "
                f"failed to load: {type(exc).__name__}: {exc}"
            ) from exc
        return _as_factory(name, obj)
    if "." in name:
        module_name, _, attr = name.rpartition(".")
        return _as_factory(name, _load_attr(name, module_name, attr))
    raise QueuePluginError(
        f"queue plugin {name!r} not found: not a built-in strategy "
        f"({', '.join(sorted(BUILTIN_QUEUES))}), not an entry point in group "
        f"{ENTRY_POINT_GROUP!r}, and not a dotted path 'package.module:attr'"
    )


def _find_entry_point(name: str) -> importlib.metadata.EntryPoint | None:
    matches = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP, name=name)
    # Several distributions may declare the same name; pick deterministically.
    return min(matches, key=lambda ep: ep.value, default=None)


def _load_attr(name: str, module_name: str, attr: str) -> Any:
    if not module_name or not attr:
        raise QueuePluginError(f"queue plugin {name!r}: expected 'package.module:attr'")
    module = _import(name, module_name)
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise QueuePluginError(
                f"queue plugin {name!r} not found: module {module_name!r} has no attribute {attr!r}"
            ) from None
    return obj


def _import(name: str, module_name: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        # Distinguish "the module does not exist" from "it exists but imports
        # something missing": the second is a broken plugin, not a wrong name.
        if exc.name is not None and (
            module_name == exc.name or module_name.startswith(exc.name + ".")
        ):
            raise QueuePluginError(
                f"queue plugin {name!r} not found: no module named {module_name!r}"
            ) from exc
        raise QueuePluginError(
            f"queue plugin {name!r}: cannot import module {module_name!r}: {exc}"
        ) from exc
    except Exception as exc:  # any failure inside a plugin is a config error
        raise QueuePluginError(
            f"queue plugin {name!r}: cannot import module {module_name!r}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def _as_factory(name: str, obj: Any) -> QueueFactory:
    if inspect.isclass(obj):
        if not issubclass(obj, PendingQueue):
            raise QueuePluginError(
                f"queue plugin {name!r}: class {obj.__qualname__} is not a PendingQueue subclass"
            )
        if inspect.isabstract(obj):
            raise QueuePluginError(
                f"queue plugin {name!r}: class {obj.__qualname__} is abstract "
                f"(missing: {', '.join(sorted(obj.__abstractmethods__))})"
            )
        cls: type[PendingQueue] = obj
        return cls
    if not callable(obj):
        raise QueuePluginError(
            f"queue plugin {name!r}: {type(obj).__name__} object is not callable, "
            "expected a PendingQueue subclass or a factory function"
        )
    return _CheckedFactory(name, obj)


class _CheckedFactory:
    """Wraps a plugin function so a wrong return type fails loudly, at creation."""

    def __init__(self, name: str, func: Any) -> None:
        self._name = name
        self._func = func

    def __call__(self, settings: QueueSettings) -> PendingQueue:
        queue = self._func(settings)
        if not isinstance(queue, PendingQueue):
            raise QueuePluginError(
                f"queue plugin {self._name!r}: factory returned {type(queue).__name__}, "
                "not a PendingQueue"
            )
        return queue

    def __repr__(self) -> str:
        return f"<queue factory {self._name!r}>"
