"""The forecast worker's protocol and replica, without a process
(docs/forecasting.md#serving)."""

from __future__ import annotations

import math
import pickle
from array import array
from collections.abc import Iterator

import pytest

from scheduler.runtime.estimates import MICROS, AdmissionVelocity
from scheduler.runtime.forecast_method import (
    Band,
    ForecastInput,
    Observation,
    QueueOrder,
    RateMethod,
    make_method,
)
from scheduler.runtime.forecast_worker import (
    BATCH,
    Chunk,
    Replica,
    Results,
    Started,
    Sync,
    SyncQueue,
)
from scheduler.runtime.workload_records import WorkloadKey

T0 = 1_767_225_600 * MICROS
# 0.1 admissions per second, well observed
VELOCITY = AdmissionVelocity(at=T0, weight=60.0, window_seconds=600.0, tau_seconds=300.0)


class Recording:
    """A method that gives workload i of every queue the band (i, i, i) and keeps what
    it is told, so the tests see exactly what the replica handed over."""

    name = "recording"

    def __init__(self) -> None:
        self.inputs: list[ForecastInput] = []
        self.observed: list[Observation] = []

    def forecast(self, state: ForecastInput) -> Iterator[tuple[WorkloadKey, Band]]:
        self.inputs.append(state)
        for queue in state.queues.values():
            for i, key in enumerate(queue.order):
                yield key, Band(float(i), float(i), float(i))

    def observe(self, observation: Observation) -> None:
        self.observed.append(observation)


def keys(prefix: str, n: int) -> tuple[WorkloadKey, ...]:
    return tuple(("ns", f"{prefix}{i}") for i in range(n))


def test_a_sync_forecasts_the_order_its_chunks_spell() -> None:
    method = Recording()
    replica = Replica(method)
    assert list(replica.handle(Chunk(1, keys("a", 2)))) == []
    assert list(replica.handle(Chunk(2, keys("b", 1)))) == []
    out = list(replica.handle(Sync(7, T0, {"cq": SyncQueue((2, 1), VELOCITY)})))
    assert method.inputs[0].queues["cq"] == QueueOrder(
        [("ns", "b0"), ("ns", "a0"), ("ns", "a1")], VELOCITY
    )
    assert len(out) == 1 and out[0].last
    assert (out[0].generation, out[0].made_at, out[0].method) == (7, T0, "recording")
    # Per chunk, the bands in the chunk's own order: p50, low, high per workload.
    assert out[0].chunks == (
        (2, array("d", [0.0, 0.0, 0.0])),
        (1, array("d", [1.0, 1.0, 1.0, 2.0, 2.0, 2.0])),
    )


def test_chunks_are_kept_across_syncs_until_forgotten() -> None:
    replica = Replica(Recording())
    list(replica.handle(Chunk(1, keys("a", 1))))
    list(replica.handle(Sync(1, T0, {"cq": SyncQueue((1,), None)})))
    # The next snapshot reuses chunk 1 without sending it again.
    list(replica.handle(Sync(2, T0 + MICROS, {"cq": SyncQueue((1,), None)})))
    list(replica.handle(Sync(3, T0 + 2 * MICROS, {}, forgotten=(1,))))
    assert replica.chunks == {}
    with pytest.raises(KeyError):
        list(replica.handle(Sync(4, T0, {"cq": SyncQueue((1,), None)})))


def test_results_come_in_batches_of_chunks_and_the_last_is_flagged() -> None:
    replica = Replica(Recording())
    ids = tuple(range(2 * BATCH + 1))
    for chunk_id in ids:
        list(replica.handle(Chunk(chunk_id, keys(f"c{chunk_id}-", 2))))
    out = list(replica.handle(Sync(1, T0, {"cq": SyncQueue(ids, None)})))
    assert [len(r.chunks) for r in out] == [BATCH, BATCH, 1]
    assert [r.last for r in out] == [False, False, True]
    assert [chunk_id for r in out for chunk_id, _ in r.chunks] == list(ids)


class HeadOnly(Recording):
    """Answers for the first workload of each queue only (as a cut forward run does)."""

    name = "head-only"

    def forecast(self, state: ForecastInput) -> Iterator[tuple[WorkloadKey, Band]]:
        self.inputs.append(state)
        for queue in state.queues.values():
            if queue.order:
                yield queue.order[0], Band(1.0, 0.5, 2.0)


def test_what_the_method_leaves_out_gets_the_rate_band_marked() -> None:
    """docs/forecasting.md#fallback: a workload the method said nothing about is given
    the rate estimate where its ClusterQueue has one, and marked, per chunk, as such."""
    replica = Replica(HeadOnly())
    list(replica.handle(Chunk(1, keys("a", 2))))
    list(replica.handle(Chunk(2, keys("b", 2))))
    list(replica.handle(Chunk(3, keys("c", 2))))
    sync = Sync(1, T0, {"cq": SyncQueue((1, 2), VELOCITY), "idle": SyncQueue((3,), None)})
    [out] = replica.handle(sync)
    rate = dict(RateMethod().forecast(replica.state_of(sync)))
    bands = dict(out.chunks)
    assert list(bands[1][:3]) == [1.0, 0.5, 2.0]  # the method's own
    for chunk_id, at, key in ((1, 3, ("ns", "a1")), (2, 0, ("ns", "b0")), (2, 3, ("ns", "b1"))):
        band = rate[key]
        assert list(bands[chunk_id][at : at + 3]) == [band.p50, band.low, band.high]
    assert dict(out.marked) == {1: b"\x00\x01", 2: b"\x01\x01"}
    # The queue without a rate: its head is the method's, the rest says nothing.
    assert list(bands[3][:3]) == [1.0, 0.5, 2.0]
    assert all(math.isnan(v) for v in bands[3][3:])


def test_the_rate_method_needs_no_fallback() -> None:
    replica = Replica(RateMethod())
    list(replica.handle(Chunk(1, keys("a", 2))))
    [out] = replica.handle(Sync(1, T0, {"cq": SyncQueue((1,), VELOCITY)}))
    assert out.method == "rate" and out.marked == ()
    assert not any(math.isnan(v) for v in out.chunks[0][1])


def test_a_method_that_answers_everything_marks_nothing() -> None:
    replica = Replica(Recording())
    list(replica.handle(Chunk(1, keys("a", 2))))
    [out] = replica.handle(Sync(1, T0, {"cq": SyncQueue((1,), VELOCITY)}))
    assert out.marked == ()


def test_a_workload_without_a_band_is_nan() -> None:
    """Without a rate to fall back on (no velocity), what the method left out is NaN."""
    replica = Replica(HeadOnly())
    list(replica.handle(Chunk(1, keys("w", 2))))
    [out] = replica.handle(Sync(1, T0, {"cq": SyncQueue((1,), None)}))
    values = out.chunks[0][1]
    assert list(values[:3]) == [1.0, 0.5, 2.0]
    assert all(math.isnan(v) for v in values[3:])
    assert out.marked == ()


def test_an_empty_snapshot_still_answers() -> None:
    [out] = Replica(Recording()).handle(Sync(1, T0, {}))
    assert out.last and out.chunks == ()


def test_started_reaches_the_method() -> None:
    method = Recording()
    replica = Replica(method)
    seen = Observation("cq", ("ns", "w"), T0, Band(10.0, 5.0, 20.0), T0 + 12 * MICROS)
    assert list(replica.handle(Started(seen))) == []
    assert method.observed == [seen]


def test_messages_survive_the_pipe() -> None:
    messages = [
        Chunk(3, keys("a", 3)),
        Sync(9, T0, {"cq": SyncQueue((3,), VELOCITY)}, forgotten=(1, 2)),
        Results(9, T0, "rate", ((3, array("d", [1.0, 0.5, 2.0])),), last=True, seconds=0.25),
        Results(9, T0, "forecast", ((3, array("d", [1.0, 0.5, 2.0])),), marked=((3, b"\x01"),)),
    ]
    for message in messages:
        assert pickle.loads(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)) == message


def test_the_rate_method_is_todays_estimate() -> None:
    order = keys("w", 3)
    state = ForecastInput(
        1, T0, {"cq": QueueOrder(order, VELOCITY), "idle": QueueOrder(keys("x", 2))}
    )
    bands = dict(RateMethod().forecast(state))
    assert set(bands) == set(order)  # the queue without a rate gets none
    for position, key in enumerate(order):
        estimate = VELOCITY.estimate(position, T0)
        assert estimate is not None
        band = bands[key]
        assert (band.low, band.high) == (estimate.low_seconds, estimate.high_seconds)
        assert band.p50 == pytest.approx(math.sqrt(band.low * band.high))
        assert band.low < band.p50 < estimate.seconds < band.high  # log-normal: median < mean
    assert bands[order[2]].p50 > bands[order[0]].p50


def test_a_rate_without_evidence_gives_nothing() -> None:
    thin = AdmissionVelocity(at=T0, weight=0.5, window_seconds=600.0, tau_seconds=300.0)
    state = ForecastInput(1, T0, {"cq": QueueOrder(keys("w", 3), thin)})
    assert list(RateMethod().forecast(state)) == []


def test_an_unknown_method_is_named() -> None:
    with pytest.raises(
        ValueError, match="unknown forecast method 'nope' \\(known: forecast, rate, walltime\\)"
    ):
        make_method("nope")
