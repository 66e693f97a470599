"""The loop of a background check that lives as long as the server."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable


async def check_forever(
    check: Callable[[], Awaitable[object]],
    pause: Callable[[], Awaitable[None]],
    *,
    log: logging.Logger,
    failure: str,
) -> None:
    """`check` now, then again after each `pause`, until cancelled. An exception from one
    check is logged (`failure`, with its traceback) and the loop goes on: a bug in a check
    must not end the task."""
    while True:
        try:
            await check()
        except Exception:
            log.exception(failure)
        await pause()
