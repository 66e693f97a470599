"""The keys an integration's controller has to reconcile (client-go's work queue, in
little): a key waits at most once however often it is added, and a reconcile that fails
with an API error is tried again after a delay. Both integrations (`jobs.py`, `pods.py`)
run on one."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from scheduler.kubeapi.errors import KubeError

log = logging.getLogger(__name__)


class WorkQueue:
    def __init__(self, what: str, *, retry_delay: float = 1.0) -> None:
        self.what = what  # the logs' name of a key ("job", "pod")
        self.retry_delay = retry_delay
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()

    def add(self, key: str) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def __contains__(self, key: object) -> bool:
        """Is `key` waiting?"""
        return key in self._queued

    def forget(self) -> None:
        """Drop what waits (what a run would have taken)."""
        self._queued.clear()
        self._queue = asyncio.Queue()

    async def run(
        self,
        reconcile: Callable[[str], Awaitable[None]],
        first: Iterable[str],
        on_failure: Callable[[], None],
    ) -> None:
        """Reconcile every key of `first`, then whatever is added, until cancelled. A
        conflict (409) is retried quietly, another API error is logged; both count
        through `on_failure`."""
        for key in first:
            self.add(key)
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            try:
                await reconcile(key)
            except KubeError as err:
                on_failure()
                if err.status != 409:
                    log.warning(
                        "event=%s-reconcile-failed %s=%s error=%s", self.what, self.what, key, err
                    )
                asyncio.get_running_loop().call_later(self.retry_delay, self.add, key)
