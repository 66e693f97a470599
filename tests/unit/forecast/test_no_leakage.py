"""docs/forecasting.md#no-leakage: a forecast depends only on what happened up to the
instant it was made. Changing a scenario's future (arrivals after the cut, true
runtimes of the workloads still running or waiting at the cut, finish events after
it) never changes a forecast made at or before the cut, nor the queue state its band
was calibrated for (the depth of its ClusterQueue when it was made)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.core.clock import MICROS_PER_SECOND, instant_from_datetime
from scheduler.core.workload import FINISHED
from scheduler.forecast.forecaster import Forecaster
from scheduler.forecast.records import METHODS
from scheduler.sim.forecasts import ForecastRecorder
from scheduler.sim.runner import Simulation
from tests.unit.forecast.support import START, Job, scenario

T0 = instant_from_datetime(datetime.fromisoformat(START))
CPU = 8


def replay(
    jobs: list[Job], method: str, extra: list[dict[str, Any]] | None = None
) -> tuple[ForecastRecorder, Simulation]:
    recorder = ForecastRecorder(Forecaster(method))
    sim = Simulation(scenario(CPU, jobs, extra), observer=recorder)
    sim.run()
    return recorder, sim


def made_by(recorder: ForecastRecorder, cut: int) -> dict[str, Any]:
    """The forecasts made at or before `cut` seconds, as printed (outcome left out:
    that one may lie in the future), with the raw wait and the queue's depth."""
    out = {}
    for item in recorder.items():
        key = f"{item['metadata']['namespace']}/{item['metadata']['name']}"
        record = recorder.recorded[key]
        if record.forecast.made_at <= T0 + cut * MICROS_PER_SECOND:
            forecast = record.forecast
            out[key] = (
                item["madeAt"],
                item["waitSeconds"],
                forecast.raw_seconds,
                forecast.queue_depth,
            )
    return out


def finished_by(sim: Simulation, cut: int) -> set[str]:
    s = sim.scheduler
    limit = T0 + cut * MICROS_PER_SECOND
    done = set()
    for key, wl in s.objects.workloads.items():
        cond = wl.conditions.get(FINISHED)
        if cond is not None and cond.is_true and cond.last_transition <= limit:
            done.add(key)
    return done


job_lists = st.lists(
    st.tuples(
        st.integers(0, 600),  # arrival
        st.integers(1, CPU),  # cpu
        st.integers(1, 400),  # true runtime
        st.one_of(st.none(), st.integers(1, 800)),  # limit
        st.sampled_from(["alice", "bob", "carol"]),
    ),
    min_size=2,
    max_size=25,
)


def jobs_of(raw: list[tuple[int, int, int, int | None, str]]) -> list[Job]:
    return [
        Job(f"j{i}", at, cpu, runtime=run, limit=limit, user=user)
        for i, (at, cpu, run, limit, user) in enumerate(raw)
    ]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    raw=job_lists,
    cut=st.integers(0, 600),
    method=st.sampled_from(METHODS),
    later=job_lists,
    stretch=st.integers(1, 500),
)
def test_the_future_never_changes_a_past_forecast(
    raw: list[tuple[int, int, int, int | None, str]],
    cut: int,
    method: str,
    later: list[tuple[int, int, int, int | None, str]],
    stretch: int,
) -> None:
    jobs = jobs_of(raw)
    recorder, sim = replay(jobs, method)
    done = finished_by(sim, cut)
    # The future, changed: every workload not finished by the cut runs longer, the
    # arrivals after the cut are replaced by others, and a finish event is scheduled
    # after the cut for one of the workloads still around then.
    future: list[Job] = []
    for job in jobs:
        if job.at > cut:
            continue
        if f"ns/{job.name}" in done:
            future.append(job)
        else:
            assert job.runtime is not None
            future.append(replace(job, runtime=job.runtime + stretch))
    future += [
        replace(job, name=f"late{i}", at=cut + 1 + job.at) for i, job in enumerate(jobs_of(later))
    ]
    extra = [
        {"at": f"{cut + 1 + stretch}s", "finish": f"ns/{job.name}"}
        for job in jobs[:1]
        if job.at <= cut and f"ns/{job.name}" not in done
    ]
    changed, _ = replay(future, method, extra)
    assert made_by(changed, cut) == made_by(recorder, cut)


def test_a_running_workloads_true_runtime_is_never_read() -> None:
    """c arrives while a runs; how long a truly runs does not change c's forecast."""
    for method in METHODS:
        forecasts = []
        for runtime in (50, 5000):
            jobs = [
                Job("a", 0, 8, runtime=runtime, limit=6000),
                Job("c", 10, 4, runtime=30, limit=100),
            ]
            recorder, _ = replay(jobs, method)
            forecasts.append(recorder.recorded["ns/c"].forecast)
        assert forecasts[0] == forecasts[1], method


def test_later_arrivals_are_not_assumed() -> None:
    """Higher-priority work that arrives after the forecast does not move it."""
    base = [Job("a", 0, 8, runtime=100, limit=100), Job("c", 10, 4, runtime=30, limit=100)]
    alone, _ = replay(base, "walltime")
    crowded, _ = replay(
        [*base, *(Job(f"x{i}", 20 + i, 8, runtime=100, limit=100, priority=5) for i in range(5))],
        "walltime",
    )
    before = alone.recorded["ns/c"]
    after = crowded.recorded["ns/c"]
    assert before.forecast == after.forecast
    assert before.forecast.raw_seconds == 90.0
    # The queue's depth is read at the forecast: c alone, whatever arrives later.
    assert before.forecast.queue_depth == after.forecast.queue_depth == 1
    # ... though it changes what actually happens.
    assert before.started is not None and after.started is not None
    assert after.started > before.started


def test_the_depth_a_band_is_calibrated_for_is_that_of_its_instant() -> None:
    """Errors are calibrated per depth of the queue at each forecast: how many arrive
    after a forecast changes the depths of later forecasts, never its own, nor the band
    of a forecast made before them."""
    base = [
        Job("a", 0, 8, runtime=1000, limit=1000),
        *(Job(f"b{i}", 10, 1, runtime=50, limit=60) for i in range(3)),
        Job("c", 300, 1, runtime=50, limit=60),
    ]
    few, _ = replay(base, "walltime")
    many, _ = replay(
        [*base, *(Job(f"y{i}", 400, 1, runtime=50, limit=60) for i in range(12))],
        "walltime",
    )
    for key in ("ns/b0", "ns/b1", "ns/b2"):
        assert few.recorded[key].forecast.queue_depth == 3
        assert few.recorded[key].forecast == many.recorded[key].forecast
    assert few.recorded["ns/c"].forecast == many.recorded["ns/c"].forecast
    assert few.recorded["ns/c"].forecast.queue_depth == 4  # the b's and c
    assert many.recorded["ns/y0"].forecast.queue_depth == 16  # and the twelve y's
