"""The `forecast` and `walltime` methods of the forecast worker: the forecaster of
`scheduler/forecast/` (the one the simulator uses) run on the state a published
snapshot describes (docs/forecasting.md#the-forward-methods).

Each refresh builds a throwaway core Scheduler from the snapshot's facts, through the
same construction as the forecaster's own copy (`fork.assemble`): the configuration
records as they are, each pending workload from its :class:`WorkloadFacts`, each
quota holder with its admission and reservation instant. The forecaster then runs it
forward (on that state itself: it is nobody else's) and its calibrated bands are the
answer. The forecaster learns, as in the simulator, only from what happened: runtimes
of finished workloads (the snapshot's finishes) and the errors of its own served
forecasts (`observe`), per ClusterQueue.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator, Sequence
from itertools import islice
from types import MappingProxyType

from scheduler.core.conditions import Conditions
from scheduler.core.workload import (
    ADMITTED,
    EMPTY_MAPPING,
    PODS_READY,
    QUOTA_RESERVED,
    RequeueState,
    WorkloadState,
)
from scheduler.forecast.forecaster import Forecaster
from scheduler.forecast.fork import assemble
from scheduler.forecast.predictors import USER_LABEL
from scheduler.forecast.records import WaitForecast
from scheduler.runtime.estimates import MICROS
from scheduler.runtime.forecast_method import Band, ForecastInput, Observation
from scheduler.runtime.workload_records import RunningWorkload, WorkloadFacts, WorkloadKey


def pending_workload(namespace: str, name: str, facts: WorkloadFacts) -> WorkloadState:
    """A core workload as the facts describe it: active, not admitted. Its creation is
    the queue's ordering instant, so the core orders it as the live queue does."""
    requeue = (
        RequeueState(facts.requeue_count, facts.requeue_at)
        if facts.requeue_count is not None or facts.requeue_at is not None
        else None
    )
    return WorkloadState(
        namespace=namespace,
        name=name,
        uid=facts.uid,
        creation=facts.order_timestamp,
        labels=MappingProxyType({USER_LABEL: facts.user}) if facts.user else EMPTY_MAPPING,
        queue_name=facts.local_queue,
        priority=facts.priority,
        priority_class_name="",
        priority_class_source="",
        active=True,
        pod_sets=facts.pod_sets,
        maximum_execution_time_seconds=facts.maximum_execution_time_seconds,
        accumulated_execution_seconds=facts.accumulated_execution_seconds,
        conditions=Conditions(),
        requeue_state=requeue,
    )


def running_workload(running: RunningWorkload) -> WorkloadState:
    """A quota holder: admitted (and reserving) since `admitted_at`."""
    wl = pending_workload(running.namespace, running.name, running.facts)
    wl.requeue_state = None
    wl.admission = running.admission
    at = running.admitted_at
    wl.conditions.set(QUOTA_RESERVED, "True", "QuotaReserved", "", at)
    wl.conditions.set(ADMITTED, "True", "Admitted", "", at)
    if running.pods_ready:
        wl.conditions.set(PODS_READY, "True", "PodsReady", "", at)
    return wl


def _out_of_time(
    budget_seconds: float | None, timer: Callable[[], float]
) -> Callable[[], bool] | None:
    """Whether the run's wall-time budget, counted from now, is spent (None: no budget)."""
    if budget_seconds is None:
        return None
    deadline = timer() + budget_seconds
    return lambda: timer() >= deadline


def modelled_depth(lengths: Sequence[int], budget: int) -> int:
    """How many workloads from the head of each queue a run of at most `budget` models:
    the largest depth whose total over the queues (`lengths` long) stays within it, so a
    short queue leaves its share to the long ones
    (docs/forecasting.md#how-deep-the-run-looks)."""
    left = budget
    ordered = sorted(lengths)
    for i, length in enumerate(ordered):
        sharing = len(ordered) - i
        if length * sharing > left:
            return left // sharing
        left -= length
    return ordered[-1] if ordered else 0


class ForwardMethod:
    """`forecast` (learned runtimes) or `walltime` (runtimes = the requested limit).

    `timer` reads the wall time the run's budget is counted in (seconds).
    """

    def __init__(self, method: str, *, timer: Callable[[], float] = time.perf_counter) -> None:
        self.forecaster = Forecaster(method)
        self.name = method
        self._timer = timer
        # The forecasts of the last two refreshes: what the loop serves is one of them
        # (a chunk's band is replaced by the next refresh's), and `observe` scores it.
        self._served: dict[WorkloadKey, WaitForecast] = {}
        self._before: dict[WorkloadKey, WaitForecast] = {}
        self._learned = 0  # the seq of the last finish learned from

    def forecast(self, state: ForecastInput) -> Iterator[tuple[WorkloadKey, Band]]:
        # Counted from here, so building the state is inside the budget too.
        out_of_time = _out_of_time(state.budget_seconds, self._timer)
        self._learn(state)
        if state.setup is None:
            return
        workloads: list[WorkloadState] = [running_workload(r) for r in state.running]
        holding = {(r.namespace, r.name) for r in state.running}
        queues = list(state.queues.values())
        depth = None
        if state.budget_workloads is not None:
            depth = modelled_depth([len(q.order) for q in queues], state.budget_workloads)
        for queue in queues:
            modelled = islice(zip(queue.order, queue.facts, strict=False), depth)
            for (namespace, name), facts in modelled:
                if facts is not None and (namespace, name) not in holding:
                    workloads.append(pending_workload(namespace, name, facts))
        # The run allocates millions of short-lived objects on a heap that holds the
        # whole replica: the cyclic collector kept walking it and took 35-40% of a
        # refresh. Off for the run; one collection afterwards frees the throwaway state.
        gc.disable()
        try:
            s, clock = assemble(state.setup, workloads, state.made_at)
            made = self.forecaster.forecast(s, consume=clock, out_of_time=out_of_time)
        finally:
            gc.enable()
        del s, clock, workloads
        gc.collect()
        self._before, self._served = self._served, {}
        for key, found in made.items():
            namespace, _, name = key.partition("/")
            self._served[(namespace, name)] = found
            band = found.band
            yield (namespace, name), Band(band.p50, band.low, band.high)

    def _learn(self, state: ForecastInput) -> None:
        for done in state.finished:
            if done.seq <= self._learned:
                continue
            self._learned = done.seq
            wl = pending_workload(done.namespace, done.name, done.facts)
            self.forecaster.observe_finished(wl, done.runtime_seconds)

    def observe(self, observation: Observation) -> None:
        """The served forecast's workload started: calibrate on its error."""
        key = observation.key
        for made in (self._served, self._before):
            found = made.get(key)
            if found is not None and found.made_at == observation.made_at:
                actual = max(0.0, (observation.started_at - observation.made_at) / MICROS)
                self.forecaster.observe_start(found, actual)
                del made[key]
                return
