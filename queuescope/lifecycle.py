"""What both modes of `serve` share around their tasks: the long-poll's change
notifier, the stop signals, waiting for the first task to end, and the drain."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Sequence
from typing import Any

import uvicorn

from scheduler.runtime.engine import Engine

log = logging.getLogger("queuescope.serve")


class ChangeNotifier:
    """The server's long-poll waits on the engine's next published snapshot."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    async def wait_for_change(self, timeout: float, *, after: int | None = None) -> None:
        await self._engine.wait_for_change(timeout, after=after)


async def run_until_stopped(tasks: Sequence[asyncio.Task[Any]]) -> list[asyncio.Task[Any]]:
    """Wait for SIGINT/SIGTERM or for any task to end; the tasks that failed."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    stopper = asyncio.create_task(stop.wait(), name="signal")
    done, _ = await asyncio.wait([*tasks, stopper], return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    return [t for t in done if t is not stopper and not t.cancelled() and t.exception()]


async def drain(
    tasks: Sequence[asyncio.Task[Any]],
    server: uvicorn.Server,
    engine: Engine,
    failed: Sequence[asyncio.Task[Any]],
) -> None:
    """Let uvicorn finish its requests, stop the engine, cancel everything else, and log
    the tasks that had failed."""
    server.should_exit = True
    await engine.stop()
    for t in tasks:
        if t.get_name() != "https":
            t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for t in failed:
        log.error("event=task-failed task=%s error=%r", t.get_name(), t.exception())
