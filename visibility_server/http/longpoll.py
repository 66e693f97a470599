"""[EXT] `longpoll`: a conditional GET that waits for a change (docs/visibility-api.md#long-poll).

A request whose `If-None-Match` still matches is held until a published snapshot
changes its answer's ETag, `waitSeconds` pass, or the client goes away. The runtime
provides a `ChangeNotifier` whose `wait_for_change(timeout)` returns after the next
publish (or the timeout); any publish wakes every waiter, which then re-evaluates its
own ETag on the new snapshot and goes back to sleep if its view did not change.

Waiters do not hold an in-flight slot (they cost nothing while idle) and have their own
cap, `max_waiters`, beyond which the answer is 429.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Protocol


class ChangeNotifier(Protocol):
    async def wait_for_change(self, timeout: float, *, after: int | None = None) -> None:
        """Return once a snapshot with a generation other than `after` is published (at
        once if it already is), or after `timeout` seconds. `after` closes the window
        between a request's ETag check and the start of its wait."""
        ...


class Gate:
    """A plain counter with a cap: in-flight data requests, or long-poll waiters."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(0, capacity)
        self.count = 0

    def try_enter(self) -> bool:
        if self.count >= self.capacity:
            return False
        self.count += 1
        return True

    def enter(self) -> None:
        """Enter regardless of the cap (a waiter coming back to render its answer)."""
        self.count += 1

    def leave(self) -> None:
        self.count -= 1


async def wait_until_changed(
    notifier: ChangeNotifier,
    seconds: float,
    unchanged: Callable[[], bool],
    disconnected: asyncio.Future[None],
    generation: Callable[[], int] | None = None,
) -> None:
    """Return once `unchanged()` is False, `seconds` have passed or the client left.

    `generation()` reads the current snapshot's generation; it is read in the same
    synchronous step as the ETag decision, so a publish that lands before the wait
    starts is still seen.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    seen = generation() if generation is not None else None
    while not disconnected.done():
        remaining = deadline - loop.time()
        if remaining <= 0:
            return
        waiter = asyncio.ensure_future(notifier.wait_for_change(remaining, after=seen))
        try:
            await asyncio.wait(
                {waiter, disconnected}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            if not waiter.done():
                waiter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await waiter
        if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
            if generation is not None:
                seen = generation()
            if not unchanged():
                return
        elif waiter.done() and not waiter.cancelled():
            # A broken notifier must not spin: fall back to sleeping out the wait.
            await asyncio.wait({disconnected}, timeout=max(0.0, deadline - loop.time()))
            return
