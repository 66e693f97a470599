"""Runs that never settle: a workload waitForPodsReady evicts and readmits forever
(docs/simulate.md#runs-that-never-settle).

In a replay, pods become ready only through the scenario: a `podsReady` event, or the
runtime annotation (ready at admission). Once every event of the scenario has fired, an
admitted workload that is not ready never will be, and with requeues unlimited
(`backoffLimitCount` unset, the default) the PodsReady timeout evicts it, the backoff
readmits it, and so on without end. A v1beta2 Configuration turns waitForPodsReady on by
default, so a scenario written without readiness in mind runs into this. Rather than
cycling until the cycle limit, the run stops with an error that names the workload once
it has been evicted this way `ENDLESS_TIMEOUTS` times since the scenario's last event.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from scheduler.core.scheduler import Scheduler
from scheduler.core.workload import EVICTED, PODS_READY_TIMEOUT_REASON

ENDLESS_TIMEOUTS: Final = 10


class EndlessRunError(Exception):
    """The run cannot settle (exit 1, with the cause and what to change)."""


class EndlessTimeouts:
    """Counts, per workload, the PodsReady timeouts after the scenario's last event."""

    __slots__ = ("_counts",)

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def observe(self, s: Scheduler, fired: Iterable[str]) -> None:
        """`fired`: the workloads whose timed rules just fired, after the last event.
        Raises EndlessRunError when one of them has timed out `ENDLESS_TIMEOUTS` times."""
        if s.config.wait_for_pods_ready.backoff_limit_count is not None:
            return  # the requeues end in a deactivation
        now = s.now()
        for key in fired:
            wl = s.objects.workloads.get(key)
            if wl is None or wl.maximum_execution_time_seconds is not None:
                continue  # gone, or its execution budget will deactivate it
            evicted = wl.conditions.get(EVICTED)
            if evicted is None or evicted.reason != PODS_READY_TIMEOUT_REASON:
                continue
            if evicted.last_transition != now:
                continue
            count = self._counts[key] = self._counts.get(key, 0) + 1
            if count >= ENDLESS_TIMEOUTS:
                raise EndlessRunError(_message(key, count))


def _message(key: str, count: int) -> str:
    return (
        f"the run does not settle: workload {key} never becomes ready, and waitForPodsReady "
        f"has evicted it {count} times since the scenario's last event "
        f"({PODS_READY_TIMEOUT_REASON}) "
        "and requeues it without limit (a config.kueue.x-k8s.io/v1beta2 Configuration turns "
        "waitForPodsReady on by default); give it a podsReady event or the "
        "simulation.queuescope.io/runtime annotation, set "
        "waitForPodsReady.requeuingStrategy.backoffLimitCount or the feature gate "
        "DisableWaitForPodsReady, or bound the run with --cycles"
    )
