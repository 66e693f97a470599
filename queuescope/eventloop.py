"""Which asyncio event loop `queuescope serve` runs on (`--loop`, `QUEUESCOPE_LOOP`).

`auto` (the default) picks uvloop where it is installed and supported (not on Windows),
and the standard library's loop otherwise. uvloop's TLS transport and socket handling are
compiled; the standard loop's TLS layer (`asyncio.sslproto`) is pure Python and was the
largest single cost of a visibility request in the profiles of docs/benchmarks.md.
`asyncio` forces the standard loop (a fallback if uvloop misbehaves somewhere);
`uvloop` insists on uvloop and fails if it cannot be imported.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

LOOPS: Final = ("auto", "uvloop", "asyncio")

T = TypeVar("T")
LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def _uvloop_factory() -> LoopFactory | None:
    if sys.platform == "win32":
        return None
    try:
        import uvloop  # noqa: PLC0415 (optional at run time)
    except ImportError:
        return None
    factory: LoopFactory = uvloop.new_event_loop
    return factory


def loop_factory(name: str) -> tuple[str, LoopFactory]:
    """The loop `name` asks for, as (the name of what will run, its factory)."""
    if name not in LOOPS:
        raise ValueError(f"--loop must be one of {', '.join(LOOPS)}, got {name!r}")
    if name == "asyncio":
        return "asyncio", asyncio.new_event_loop
    uvloop_factory = _uvloop_factory()
    if uvloop_factory is not None:
        return "uvloop", uvloop_factory
    if name == "uvloop":
        raise ValueError("--loop uvloop: uvloop is not installed or not supported here")
    return "asyncio", asyncio.new_event_loop


def run(main: Coroutine[Any, Any, T], factory: LoopFactory) -> T:
    """`asyncio.run(main)` on a loop made by `factory` (Python 3.11 has no
    `asyncio.run(loop_factory=...)`; `asyncio.Runner` does the same cleanup)."""
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


__all__ = ["LOOPS", "loop_factory", "run"]
