"""Admission velocity and wait estimates, on manual instants."""

from __future__ import annotations

import asyncio
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.runtime.commands import ApplyObject, MarkSynced
from scheduler.runtime.engine import Engine
from scheduler.runtime.estimates import MICROS, AdmissionRates, AdmissionVelocity
from tests.unit.runtime.support import (
    WAIT,
    cluster_queue,
    decode,
    eventually,
    flavor,
    local_queue,
    namespace,
    real_scheduler,
    workload,
)

T0 = 1_767_225_600 * MICROS
TAU = 300.0


def steady(rates: AdmissionRates, cq: str, every_seconds: float, count: int) -> int:
    """`count` admissions, one every `every_seconds`, from T0; returns the last instant."""
    rates.track(cq, T0)
    at = T0
    for i in range(1, count + 1):
        at = T0 + round(i * every_seconds * MICROS)
        rates.observe(cq, at)
    return at


def velocity(rates: AdmissionRates, cq: str = "cq") -> AdmissionVelocity:
    found = rates.velocity(cq)
    assert found is not None
    return found


def test_a_steady_rate_is_recovered() -> None:
    rates = AdmissionRates(tau_seconds=TAU)
    last = steady(rates, "cq", every_seconds=10.0, count=600)  # 100 minutes at 0.1/s
    assert velocity(rates).rate(last) == pytest.approx(0.1, rel=0.05)


def test_the_rate_decays_when_admissions_stop() -> None:
    rates = AdmissionRates(tau_seconds=TAU)
    last = steady(rates, "cq", every_seconds=10.0, count=600)
    v = velocity(rates)
    later = last + round(TAU * MICROS)
    # The window is saturated (observed for 20 tau): only the count decays, by 1/e.
    assert v.rate(later) == pytest.approx(v.rate(last) / math.e, rel=0.01)
    much_later = later + round(10 * TAU * MICROS)
    assert v.rate(much_later) < v.rate(last) / 1000
    # By then fewer than one recent admission is left: no estimate.
    assert v.estimate(0, later) is not None
    assert v.estimate(0, much_later) is None


def test_a_start_up_burst_is_spread_over_the_minimum_window() -> None:
    rates = AdmissionRates(tau_seconds=TAU, min_window_seconds=60.0)
    rates.track("cq", T0)
    for _ in range(10):
        rates.observe("cq", T0 + MICROS)  # ten admissions in the first second
    assert velocity(rates).rate(T0 + MICROS) == pytest.approx(10 / 60.0, rel=1e-3)


def test_no_admission_means_no_estimate() -> None:
    rates = AdmissionRates()
    rates.track("cq", T0)
    assert velocity(rates).estimate(0, T0 + 100 * MICROS) is None
    assert rates.velocity("unknown") is None


def test_the_estimate_grows_with_the_position_and_has_an_interval() -> None:
    rates = AdmissionRates(tau_seconds=TAU)
    last = steady(rates, "cq", every_seconds=10.0, count=600)
    v = velocity(rates)
    head, tenth = v.estimate(0, last), v.estimate(9, last)
    assert head is not None and tenth is not None
    assert tenth.seconds == pytest.approx(10 * head.seconds)
    assert tenth.seconds == pytest.approx(100.0, rel=0.05)  # ten admissions at 0.1/s
    assert tenth.admissions_per_hour == pytest.approx(360.0, rel=0.05)
    for e in (head, tenth):
        assert 0 < e.low_seconds < e.seconds < e.high_seconds
    # More admissions ahead average out: the relative interval narrows.
    assert tenth.high_seconds / tenth.low_seconds < head.high_seconds / head.low_seconds


def test_less_evidence_gives_a_wider_interval() -> None:
    few, many = AdmissionRates(tau_seconds=TAU), AdmissionRates(tau_seconds=TAU)
    last_few = steady(few, "cq", every_seconds=100.0, count=30)
    last_many = steady(many, "cq", every_seconds=1.0, count=3000)
    a, b = velocity(few).estimate(20, last_few), velocity(many).estimate(20, last_many)
    assert a is not None and b is not None
    assert a.effective_admissions < b.effective_admissions
    assert a.high_seconds / a.low_seconds > b.high_seconds / b.low_seconds


@given(
    position=st.integers(min_value=0, max_value=100_000),
    weight=st.floats(min_value=1e-6, max_value=1e6),
    window=st.floats(min_value=1.0, max_value=1e6),
    later=st.integers(min_value=0, max_value=10**12),
)
def test_estimates_are_finite_and_ordered(
    position: int, weight: float, window: float, later: int
) -> None:
    v = AdmissionVelocity(at=T0, weight=weight, window_seconds=window, tau_seconds=TAU)
    e = v.estimate(position, T0 + later)
    weight_then, _ = v.state(T0 + later)
    if weight_then < 1.0:
        assert e is None  # too little recent evidence to estimate anything
        return
    assert e is not None
    assert math.isfinite(e.seconds) and math.isfinite(e.high_seconds)
    assert 0 <= e.low_seconds <= e.seconds <= e.high_seconds


def test_frozen_states_are_stable_and_forget_removed_queues() -> None:
    rates = AdmissionRates()
    rates.observe("a", T0)
    first = rates.velocities(["a", "b"], T0 + MICROS)
    # Time passing without admissions changes nothing captured: a publish sees no change.
    assert rates.velocities(["a", "b"], T0 + 50 * MICROS) == first
    assert set(first) == {"a", "b"} and first["b"].weight == 0
    assert set(rates.velocities(["b"], T0 + 60 * MICROS)) == {"b"}
    assert rates.velocity("a") is None


async def test_the_engine_feeds_admissions_into_the_snapshot() -> None:
    engine = Engine(real_scheduler(), publish_interval=0.02)
    engine.start()
    try:
        for data in (
            namespace("team"),
            flavor(),
            cluster_queue("cq", "2"),
            local_queue("team", "main", "cq"),
            *(workload("team", f"w{i}", "main") for i in range(3)),
        ):
            engine.submit(ApplyObject(decode(data)))
        engine.submit(MarkSynced())

        def admissions() -> float:
            v = engine.snapshot().velocities.get("cq")
            return v.weight if v is not None else 0.0

        await eventually(lambda: admissions() > 1.9)
        snap = engine.snapshot()
        assert engine.rates.velocity("cq") == snap.velocities["cq"]
        pending = snap.locate("team", "w2")
        assert pending is not None
        estimate = snap.velocities["cq"].estimate(
            pending.position_in_cluster_queue, engine.scheduler.now()
        )
        assert estimate is not None and estimate.seconds > 0
        # The quota tree travels with it: two of two cpus are in use.
        quota = snap.quota.cluster_queue("cq")
        assert quota is not None
        cpu = quota.resources[0]
        assert (cpu.flavor, cpu.resource, cpu.nominal, cpu.usage) == ("default", "cpu", 2000, 2000)
    finally:
        await asyncio.wait_for(engine.stop(), WAIT)
