"""The nomination cache (scheduler/core/nomination.py): hits happen where the same
question is asked again, every hit equals a fresh computation (verify mode, from
conftest.py), and the scheduler decides exactly as without the cache."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
import yaml

from queuescope.cli import main
from scheduler.core import nomination
from tests.unit.core.builders import (
    SECOND,
    Cluster,
    cluster_queue,
    flavor,
    group,
    local_queue,
    namespace,
    workload,
)

FIXTURES = Path(__file__).resolve().parents[2] / "conformance"


def _simulate(directory: Path) -> tuple[int, str]:
    expected = yaml.safe_load((directory / "expected.yaml").read_text()) or {}
    args = [str(a) for a in expected.get("args") or []]
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            code = main(["simulate", str(directory / "input.yaml"), "-o", "json", *args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue()


def test_every_conformance_scenario_decides_the_same_with_and_without_the_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    directories = sorted(d for d in FIXTURES.iterdir() if (d / "input.yaml").is_file())
    assert len(directories) >= 45
    cached = {d.name: _simulate(d) for d in directories}  # verify mode checks every hit
    monkeypatch.setattr(nomination, "ENABLED", False)
    for d in directories:
        assert _simulate(d) == cached[d.name], d.name


def _cohort(preemption: dict[str, str]) -> Cluster:
    c = Cluster()
    c.apply(namespace("ns"), flavor("default"))
    for name in ("a", "b"):
        c.apply(
            cluster_queue(
                name,
                [group(["cpu"], {"default": {"cpu": 4}})],
                cohort="co",
                preemption=preemption,
            ),
            local_queue("ns", name, name),
        )
    return c


def _decisions(use_cache: bool, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    monkeypatch.setattr(nomination, "ENABLED", use_cache)
    c = _cohort({"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"})
    log: list[object] = []
    # Low-priority work fills both queues, then many equal high-priority heads arrive
    # in `a`; each finish releases quota and the next head asks the same question.
    for i in range(6):
        c.apply(workload("ns", f"low-a{i}", "a", {"cpu": "1"}, priority=0, created=i))
        c.apply(workload("ns", f"low-b{i}", "b", {"cpu": "1"}, priority=0, created=i))
    log.append(c.run_until_idle())
    for i in range(8):
        c.apply(workload("ns", f"high-{i}", "a", {"cpu": "3"}, priority=10, created=10 + i))
    for step in range(12):
        log.append(c.run_until_idle())
        admitted = sorted(
            k for k, wl in c.s.objects.workloads.items() if wl.holds_quota and not wl.finished
        )
        log.append(admitted)
        if admitted:
            c.s.finish(admitted[step % len(admitted)])
            c.s.finalize_evictions()
        c.advance(SECOND)
    log.append(
        sorted((k, wl.conditions.get("QuotaReserved")) for k, wl in c.s.objects.workloads.items())
    )
    if use_cache:
        assert c.s._nominations.hits > 0
    return log


def test_repeated_heads_hit_the_cache_and_decide_as_without_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _decisions(True, monkeypatch) == _decisions(False, monkeypatch)


def test_a_tree_keeps_only_the_nominations_of_its_current_inputs() -> None:
    # Every finish changes the tree's holders, so nothing asked before can be asked
    # again: the cache keeps the nominations of the latest inputs only, one per kind
    # of head, however many releases came before.
    c = _cohort({"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"})
    for i in range(40):
        for name in ("a", "b"):
            c.apply(workload("ns", f"{name}-{i}", name, {"cpu": "3"}, created=i))
    sizes = []
    for _ in range(30):
        c.run_until_idle()
        sizes.append(c.s._nominations.size())
        running = sorted(
            k for k, wl in c.s.objects.workloads.items() if wl.holds_quota and not wl.finished
        )
        c.s.finish(running[0])
        c.s.finalize_evictions()
        c.advance(SECOND)
    assert c.s._nominations.misses >= 30  # a question per release at least
    # One kind of head per ClusterQueue, asked with and without a scan to resume.
    assert max(sizes) <= 4, sizes
