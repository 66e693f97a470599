"""What-if's `estimatedStart` (docs/visibility-api.md#what-if): read from the served
forecasts of the workloads around the place the hypothetical would take, the `rate`
estimate when there are none."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType
from typing import Any

from scheduler.runtime.estimates import MICROS, AdmissionVelocity, ServedForecast
from scheduler.runtime.pages import build_view
from scheduler.runtime.snapshot import Snapshot
from scheduler.runtime.workload_records import PendingEntry
from visibility_server.http.routers.whatif import estimated_start
from visibility_server.http.timestamps import rfc3339_seconds

T0 = 1_767_225_600 * MICROS
VELOCITY = AdmissionVelocity(at=T0, weight=60.0, window_seconds=600.0, tau_seconds=300.0)


def snapshot(names: list[str]) -> Snapshot:
    entries = [PendingEntry.make("ns", n, T0, (), 0, "lq") for n in names]
    return Snapshot(
        generation=9,
        synced=True,
        views=MappingProxyType({"cq": build_view("cq", entries)}),
        local_queues=MappingProxyType({("ns", "lq"): "cq"}),
        workloads=MappingProxyType({e.key: "cq" for e in entries}),
        velocities=MappingProxyType({"cq": VELOCITY}),
    )


def served(made: int, p50: int, low: int, high: int, generation: int = 7) -> ServedForecast:
    s = MICROS
    return ServedForecast(
        "forecast", T0 + made * s, generation, T0 + p50 * s, T0 + low * s, T0 + high * s
    )


def queued(position: int) -> dict[str, Any]:
    return {"workload": {"clusterQueueName": "cq"}, "positionInClusterQueue": position}


BANDS = {
    ("ns", "a"): served(0, 100, 50, 200),
    ("ns", "b"): served(10, 300, 150, 600, generation=8),
}


def lookup(namespace: str, name: str) -> ServedForecast | None:
    return BANDS.get((namespace, name))


def at(seconds: int) -> str:
    return rfc3339_seconds(T0 + seconds * MICROS)


def test_between_two_forecasts_it_takes_their_midpoints() -> None:
    found = estimated_start(queued(1), snapshot(["a", "b", "c"]), T0 + 20 * MICROS, lookup)
    assert found == {
        "p50": at(200),
        "low": at(100),
        "high": at(400),
        "method": "forecast-neighbours",
        "madeAt": at(0),  # the older of the two used
        "snapshot": "7",
    }


def test_at_the_end_it_queues_behind_the_last_one() -> None:
    found = estimated_start(queued(2), snapshot(["a", "b"]), T0 + 20 * MICROS, lookup)
    assert found is not None
    assert (found["p50"], found["low"], found["high"]) == (at(300), at(150), at(600))
    assert (found["madeAt"], found["snapshot"]) == (at(10), "8")


def test_at_the_head_it_takes_the_place_of_the_first() -> None:
    found = estimated_start(queued(0), snapshot(["a", "b"]), T0 + 20 * MICROS, lookup)
    assert found is not None and found["p50"] == at(100)


def test_between_two_methods_it_queues_behind_the_one_ahead() -> None:
    """docs/forecasting.md#fallback: where the forward run's reach ends, the workload
    ahead has its forecast and the one behind the fallback's `rate` band; no midpoint
    of the two."""
    fallback = replace(BANDS[("ns", "b")], method="rate")
    bands = {("ns", "a"): BANDS[("ns", "a")], ("ns", "b"): fallback}
    found = estimated_start(
        queued(1), snapshot(["a", "b"]), T0 + 20 * MICROS, lambda ns, n: bands.get((ns, n))
    )
    assert found is not None
    assert (found["p50"], found["low"], found["high"]) == (at(100), at(50), at(200))
    assert (found["method"], found["madeAt"], found["snapshot"]) == (
        "forecast-neighbours",
        at(0),
        "7",
    )


def test_without_served_forecasts_the_rate_answers() -> None:
    now = T0 + 20 * MICROS
    for forecasts in (None, lambda namespace, name: None):
        found = estimated_start(queued(1), snapshot(["x", "y"]), now, forecasts)
        assert found is not None and found["method"] == "rate"
        estimate = VELOCITY.estimate(1, now)
        assert estimate is not None
        assert found["p50"] == rfc3339_seconds(now + round(estimate.seconds * MICROS))


def test_admitted_now_is_the_instant_itself_and_inadmissible_has_none() -> None:
    now = T0 + 20 * MICROS
    admitted = estimated_start({"admitted": True}, snapshot(["a"]), now, lookup)
    assert admitted is not None and admitted["p50"] == admitted["low"] == rfc3339_seconds(now)
    inadmissible = {**queued(0), "decision": "Inadmissible"}
    assert estimated_start(inadmissible, snapshot(["a"]), now, lookup) is None
