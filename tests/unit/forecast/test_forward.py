"""docs/forecasting.md#the-forward-run: the core run ahead on a private copy."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from scheduler.core.changes import Changes
from scheduler.core.clock import MICROS_PER_SECOND, Instant, instant_from_datetime
from scheduler.core.scheduler import Scheduler
from scheduler.core.status import workload_status
from scheduler.forecast.forecaster import Forecaster
from scheduler.forecast.fork import fork
from scheduler.forecast.forward import forward_run, pending_keys
from scheduler.forecast.predictors import HistoryPredictor, WalltimePredictor, facts_of
from scheduler.sim.runner import Simulation
from tests.unit.forecast.support import START, Job, scenario

T0 = instant_from_datetime(datetime.fromisoformat(START))


@dataclass
class Capture:
    """A ReplayObserver that keeps a copy of the state at the end of instant `at`."""

    at: int  # seconds after the start
    state: Scheduler | None = None

    def arrived(self, key: str, at: Instant) -> None:
        del key, at

    def changed(self, s: Scheduler, changes: Changes) -> None:
        del s, changes

    def finished(self, s: Scheduler, keys: Sequence[str]) -> None:
        del s, keys

    def instant_done(self, s: Scheduler) -> None:
        if s.now() == T0 + self.at * MICROS_PER_SECOND:
            self.state = fork(s, s.now())[0]


def state_at(cpu: int, jobs: list[Job], seconds: int) -> Scheduler:
    capture = Capture(seconds)
    Simulation(scenario(cpu, jobs), observer=capture).run()
    assert capture.state is not None
    return capture.state


def test_waits_for_the_running_workload_to_reach_its_walltime() -> None:
    # a holds 3 of 4 cpu with a 100 s limit (its true runtime is never read);
    # b (2 cpu) can start when a ends: 100 s after 0, so 90 s after b arrives at 10.
    s = state_at(4, [Job("a", 0, 3, runtime=70, limit=100), Job("b", 10, 2, runtime=5)], 10)
    assert pending_keys(s) == ["ns/b"]
    result = forward_run(s, WalltimePredictor(), ["ns/b"])
    assert result.waits == {"ns/b": 90.0}


def test_queued_workloads_run_for_their_predicted_runtime_once_admitted() -> None:
    jobs = [
        Job("a", 0, 4, runtime=None, limit=100),
        Job("b", 5, 4, runtime=None, limit=50),
        Job("c", 10, 4, runtime=None, limit=30),
    ]
    s = state_at(4, jobs, 10)
    result = forward_run(s, WalltimePredictor(), pending_keys(s))
    # b starts when a ends (100 s), c when b ends (150 s); the clock stands at 10 s.
    assert result.waits == {"ns/b": 90.0, "ns/c": 140.0}


def test_a_target_beyond_the_horizon_has_no_wait() -> None:
    jobs = [Job("a", 0, 4, runtime=None, limit=10_000), Job("b", 1, 4, runtime=None)]
    s = state_at(4, jobs, 1)
    assert forward_run(s, WalltimePredictor(), ["ns/b"], horizon_seconds=600).waits == {}


def test_the_callers_state_is_never_changed() -> None:
    jobs = [Job(f"w{i}", i, 2, runtime=None, limit=100 + i) for i in range(6)]
    s = state_at(4, jobs, 5)
    before = {k: workload_status(wl) for k, wl in s.objects.workloads.items()}
    listing = [e.key for e in s.queues.queue("cq").listing()]  # type: ignore[union-attr]
    usage = copy.deepcopy(s._counted)
    now = s.now()
    Forecaster("walltime").forecast(s)
    assert {k: workload_status(wl) for k, wl in s.objects.workloads.items()} == before
    assert [e.key for e in s.queues.queue("cq").listing()] == listing  # type: ignore[union-attr]
    assert s._counted == usage and s.now() == now


def test_every_pending_workload_at_once() -> None:
    jobs = [Job(f"w{i}", i, 2, runtime=None, limit=100) for i in range(8)]
    s = state_at(4, jobs, 7)
    forecasts = Forecaster("walltime").forecast(s)
    assert sorted(forecasts) == pending_keys(s) == [f"ns/w{i}" for i in range(2, 8)]
    raw = {k: f.raw_seconds for k, f in forecasts.items()}
    # Two at a time, 100 s each; w0 started at 0 s, w1 at 1 s; the clock stands at 7 s.
    assert raw == {f"ns/w{i}": 100.0 * (i // 2) + i % 2 - 7 for i in range(2, 8)}
    for f in forecasts.values():
        assert f.band.low <= f.band.p50 <= f.band.high
        assert f.made_at == s.now() and f.cluster_queue == "cq" and f.method == "walltime"


def test_history_conditions_on_time_already_run() -> None:
    p = HistoryPredictor()
    s = Simulation(scenario(4, [Job("a", 0, 1, runtime=None, limit=1000)])).run().scheduler
    facts = facts_of(s.objects.workloads["ns/a"])
    assert p.predict(facts, 0) == 1000  # no history: the request
    p.observe(facts, 100)
    p.observe(facts, 300)
    assert p.predict(facts, 0) == 200  # the user's last two
    p.observe(facts, 500)
    assert p.predict(facts, 0) == 400
    assert 250 < p.predict(facts, 250) <= 1000 and p.predict(facts, 450) > 450
    assert p.predict(facts, 990) <= 1000  # never past the limit while below it
    assert WalltimePredictor().predict(facts, 10) == 1000


def test_the_learned_state_survives_a_round_trip() -> None:
    forecaster = Forecaster("forecast")
    s = Simulation(scenario(4, [Job("a", 0, 1, runtime=None, limit=1000)])).run().scheduler
    forecaster.observe_finished(s.objects.workloads["ns/a"], 120.0)
    forecaster.observe_admitted("cq", s.now())
    again = pickle.loads(pickle.dumps(forecaster))
    facts = facts_of(s.objects.workloads["ns/a"])
    assert again.predictor.predict(facts, 0) == forecaster.predictor.predict(facts, 0) == 120
    assert again.rates == forecaster.rates


def test_a_run_out_of_time_stops_where_it_got_to() -> None:
    """docs/forecasting.md#when-the-run-is-cut: once out of time, the run keeps the starts
    it saw and says it was cut; a target it had not seen start gets no forecast rather
    than a horizon-long one."""
    jobs = [Job(f"w{i}", i, 2, runtime=None, limit=100) for i in range(8)]
    s = state_at(4, jobs, 7)
    whole = forward_run(s, WalltimePredictor(), pending_keys(s))
    assert not whole.cut and len(whole.waits) == 6

    def after(asked: int) -> Callable[[], bool]:
        """Out of time at the `asked`-th question."""
        count = iter(range(1, 1_000_000))
        return lambda: next(count) >= asked

    # Asked after the instants at 7 s (1), 100 s (2) and 101 s (3).
    cut = forward_run(s, WalltimePredictor(), pending_keys(s), out_of_time=after(3))
    assert cut.cut
    assert cut.waits == {k: w for k, w in whole.waits.items() if w <= 101 - 7}
    assert sorted(cut.waits) == ["ns/w2", "ns/w3"]
    forecasts = Forecaster("walltime").forecast(s, out_of_time=after(3))
    assert {k: f.raw_seconds for k, f in forecasts.items()} == cut.waits
    assert forward_run(s, WalltimePredictor(), pending_keys(s), out_of_time=after(1)).waits == {}
