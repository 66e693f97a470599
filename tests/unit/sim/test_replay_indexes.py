"""docs/simulate.md#replay-cost: the replay's deadline heap and idle fingerprint give,
at every step, what walking every workload and listing every queue gives."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.api.decode import ApiError, load_documents
from scheduler.core.pods_ready import deadlines, next_deadline
from scheduler.core.scheduler import Scheduler
from scheduler.forecast.forecaster import Forecaster
from scheduler.sim.deadlines import DeadlineIndex
from scheduler.sim.fingerprint import IdleFingerprint
from scheduler.sim.forecasts import ForecastRecorder
from scheduler.sim.runner import Simulation
from tests.unit.forecast.support import Job, scenario

CONFORMANCE = Path(__file__).resolve().parents[2] / "conformance"


def reference_fingerprint(s: Scheduler) -> Any:
    """The fingerprint as it was computed before it was incremental: every queue listed,
    every live workload's resume state sorted."""
    queues = []
    for name in s.queues.cluster_queues():
        q = s.queues.queue(name)
        if q is None:
            continue
        c = q.counts()
        queues.append((name, c.active, c.parked, tuple(e.key for e in q.listing())))
    attempts = tuple(
        (key, tuple(sorted(wl.last_assignment.tried_flavor_idx.items())))
        for key in sorted(s.objects.workloads)
        if not (wl := s.objects.workloads[key]).finished and wl.last_assignment is not None
    )
    return (tuple(queues), attempts)


def plain(fingerprint: Any) -> Any:
    queues, attempts = fingerprint
    return (
        tuple((name, active, parked, listing.keys) for name, active, parked, listing in queues),
        tuple(sorted(attempts.items)),
    )


def reference_due(s: Scheduler) -> list[str]:
    now = s.now()
    return sorted(
        {d.key for wl in s.objects.workloads.values() for d in deadlines(s, wl) if d.at <= now}
    )


class Checked:
    """Counts the checks made, so a test knows the replay went through the indexes."""

    fingerprints = 0
    deadlines = 0


@pytest.fixture(autouse=True)
def checking(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[Checked]]:
    take = IdleFingerprint.take
    next_at = DeadlineIndex.next_deadline
    fire = DeadlineIndex.fire_due

    def checked_take(self: IdleFingerprint, s: Scheduler) -> Any:
        found = take(self, s)
        assert plain(found) == reference_fingerprint(s)
        Checked.fingerprints += 1
        return found

    def checked_next(self: DeadlineIndex, s: Scheduler) -> Any:
        found = next_at(self, s)
        assert found == next_deadline(s)
        Checked.deadlines += 1
        return found

    def checked_fire(self: DeadlineIndex, s: Scheduler) -> list[str]:
        due = reference_due(s)
        fired = fire(self, s)
        assert fired in ([], due)
        Checked.deadlines += 1
        return fired

    monkeypatch.setattr(IdleFingerprint, "take", checked_take)
    monkeypatch.setattr(DeadlineIndex, "next_deadline", checked_next)
    monkeypatch.setattr(DeadlineIndex, "fire_due", checked_fire)
    Checked.fingerprints = Checked.deadlines = 0
    yield Checked


def fixtures() -> list[Path]:
    return sorted(p for p in CONFORMANCE.iterdir() if (p / "input.yaml").exists())


def cycles_of(fixture: Path) -> int | None:
    """The fixture's `--cycles` (one never goes idle without it: a zero pods-ready
    timeout evicts and readmits at the same instant forever)."""
    args = [
        str(a)
        for a in (yaml.safe_load((fixture / "expected.yaml").read_text()) or {}).get("args", [])
    ]
    return int(args[args.index("--cycles") + 1]) if "--cycles" in args else None


@pytest.mark.parametrize("fixture", fixtures(), ids=lambda p: p.name)
def test_every_conformance_fixture(fixture: Path, checking: type[Checked]) -> None:
    try:
        Simulation(load_documents([str(fixture / "input.yaml")]), cycles=cycles_of(fixture)).run()
    except ApiError:
        pytest.skip("bad input: the replay does not start")
    assert checking.deadlines > 0


def mixed_jobs(seed: int, count: int) -> list[Job]:
    rng = random.Random(seed)
    jobs = []
    at = 0
    for i in range(count):
        at += rng.choice([0, 0, 5, 30, 120])
        jobs.append(
            Job(
                f"j{i}",
                at,
                rng.randint(1, 8),
                runtime=rng.randint(10, 2000),
                limit=rng.choice([None, 600, 3600]),
                user=rng.choice(["alice", "bob", "carol"]),
                priority=rng.choice([0, 0, 1, 5]),
            )
        )
    return jobs


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_replay_of_mixed_sizes_with_forecasts(seed: int, checking: type[Checked]) -> None:
    """Sizes that leave the queue parked and retried at every release, limits that
    deactivate, priorities that preempt, and a recorder that forecasts at every arrival."""
    recorder = ForecastRecorder(Forecaster("forecast"))
    Simulation(scenario(16, mixed_jobs(seed, 80)), observer=recorder).run()
    assert checking.fingerprints > 10 and checking.deadlines > 10
    assert recorder.recorded
