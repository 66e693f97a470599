"""docs/forecasting.md#runtime-predictors: what the learned predictor predicts."""

from __future__ import annotations

import pytest

from scheduler.forecast import predictors
from scheduler.forecast.predictors import DEFAULT_RUNTIME_SECONDS, HistoryPredictor, JobFacts


def _facts(user: str, request: float | None, queue: str = "ns/lq") -> JobFacts:
    return JobFacts(user=user, local_queue=queue, limit_seconds=request, request_seconds=request)


def test_a_users_share_of_its_request_carries_over_to_a_new_request() -> None:
    p = HistoryPredictor()
    p.observe(_facts("u", 1000.0), 100.0)
    p.observe(_facts("u", 2000.0), 600.0)  # used 10% then 30%: 20% on average
    assert p.predict(_facts("u", 5000.0), 0) == pytest.approx(1000.0)
    p.observe(_facts("u", 100.0), 100.0)  # the last two: 30% and 100%
    assert p.predict(_facts("u", 1500.0), 0) == pytest.approx(975.0)


def _shaped(request: float, cpu: int, pods: int = 1) -> JobFacts:
    shape = ((pods, (("cpu", cpu * 1000),)),)
    return JobFacts("u", "ns/lq", request, request, shape)


def test_the_users_last_two_of_the_same_template_come_first() -> None:
    """docs/forecasting.md#runtime-predictors: same user, request and shape."""
    p = HistoryPredictor()
    p.observe(_shaped(1000.0, 4), 900.0)  # the long job: 90%
    p.observe(_shaped(1000.0, 1), 100.0)  # the short one, another shape: 10%
    p.observe(_shaped(1000.0, 1), 300.0)  # 30%
    assert p.predict(_shaped(1000.0, 4), 0) == pytest.approx(900.0)  # its template
    assert p.predict(_shaped(1000.0, 1), 0) == pytest.approx(200.0)
    # another request, or more pods of the same size: the user's last two (10%, 30%)
    assert p.predict(_shaped(2000.0, 4), 0) == pytest.approx(400.0)
    assert p.predict(_shaped(1000.0, 4, pods=2), 0) == pytest.approx(200.0)
    # the template's own last two: 90% then 50%
    p.observe(_shaped(1000.0, 4), 500.0)
    assert p.predict(_shaped(1000.0, 4), 0) == pytest.approx(700.0)


def test_templates_are_forgotten_least_recently_used_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(predictors, "MAX_TEMPLATES", 2)
    p = HistoryPredictor()
    p.observe(_shaped(1000.0, 1), 100.0)
    p.observe(_shaped(1000.0, 2), 200.0)
    p.observe(_shaped(1000.0, 1), 100.0)  # used again: now the most recent
    p.observe(_shaped(1000.0, 3), 900.0)  # forgets the cpu-2 template
    assert p.predict(_shaped(1000.0, 1), 0) == pytest.approx(100.0)
    # the user's last two (10% and 90%), not the forgotten template's 20%
    assert p.predict(_shaped(1000.0, 2), 0) == pytest.approx(500.0)


def test_without_a_request_the_users_last_two_runtimes() -> None:
    p = HistoryPredictor()
    p.observe(_facts("u", None), 100.0)
    p.observe(_facts("u", None), 300.0)
    assert p.predict(_facts("u", None), 0) == pytest.approx(200.0)


def test_a_new_user_gets_its_queues_median_share_then_everyones() -> None:
    p = HistoryPredictor()
    assert p.predict(_facts("new", None), 0) == DEFAULT_RUNTIME_SECONDS
    assert p.predict(_facts("new", 800.0), 0) == 800.0
    for share in (0.1, 0.2, 0.9):
        p.observe(_facts("a", 1000.0, "ns/lq"), 1000.0 * share)
    p.observe(_facts("b", 1000.0, "ns/other"), 1000.0)
    assert p.predict(_facts("new", 500.0, "ns/lq"), 0) == pytest.approx(100.0)  # median 20%
    # everyone's last: 10%, 20%, 90%, 100%, median 55%
    assert p.predict(_facts("new", 500.0, "ns/none"), 0) == pytest.approx(275.0)


def test_a_job_past_its_prediction_runs_longer_but_never_past_its_request() -> None:
    p = HistoryPredictor()
    p.observe(_facts("u", 1000.0), 100.0)
    facts = _facts("u", 1000.0)
    assert p.predict(facts, 0) == pytest.approx(100.0)
    assert p.predict(facts, 200) == pytest.approx(360.0)  # 1.5 x 200 + 60
    assert p.predict(facts, 900) == pytest.approx(1000.0)


def test_a_running_job_gets_the_median_of_the_finished_ones_that_ran_longer() -> None:
    """docs/forecasting.md#runtime-predictors: conditioned on the time already run."""
    p = HistoryPredictor()
    for share in (0.01, 0.02, 0.05, 0.3, 0.4, 0.5, 0.6, 0.8):
        p.observe(_facts("a", 1000.0, "ns/lq"), 1000.0 * share)
    running = _facts("u", 1000.0, "ns/lq")
    # not started: the queue's median share (of 8: 35%)
    assert p.predict(running, 0) == pytest.approx(350.0)
    # has run 100 s: of the five that ran longer (300..800 s) the median, 500 s
    assert p.predict(running, 100) == pytest.approx(500.0)
    # has run 450 s: only three ran longer, too few: beyond the user-less estimate
    assert p.predict(running, 450) == pytest.approx(450 * 1.5 + 60)
    # never past what is left of its request
    capped = JobFacts(user="u", local_queue="ns/lq", limit_seconds=400.0, request_seconds=1000.0)
    assert p.predict(capped, 100) == pytest.approx(400.0)


def test_a_running_job_gets_the_median_of_its_templates_runs_that_ran_longer() -> None:
    """docs/forecasting.md#runtime-predictors: the runs of its own job script first."""
    p = HistoryPredictor()
    for share in (0.01, 0.02, 0.05, 0.3, 0.4, 0.5, 0.6, 0.8):
        p.observe(_facts("a", 1000.0, "ns/lq"), 1000.0 * share)
    for runtime in (100.0, 700.0, 900.0):
        p.observe(_shaped(1000.0, 4), runtime)
    running = _shaped(1000.0, 4)
    # not started: the template's last two (70% and 90%)
    assert p.predict(running, 0) == pytest.approx(800.0)
    # has run 50 s: of its template's runs, all three ran longer: their median
    assert p.predict(running, 50) == pytest.approx(700.0)
    # has run 800 s: one run of its template lasted longer; one is enough
    assert p.predict(running, 800) == pytest.approx(900.0)
    # has run 950 s: none did; the LocalQueue's are too few: beyond, within its request
    assert p.predict(running, 950) == pytest.approx(1000.0)
    # another template of the same queue: the queue's runs that lasted longer than 100 s
    # (300, 400, 500, 600, 700, 800, 900: 600)
    assert p.predict(_shaped(1000.0, 2), 100) == pytest.approx(600.0)


def test_a_template_remembers_its_last_ten_runs() -> None:
    p = HistoryPredictor()
    p.observe(_shaped(1000.0, 4), 990.0)
    for _ in range(predictors.TEMPLATE_RUNS):
        p.observe(_shaped(1000.0, 4), 100.0)
    # the 990 s run is forgotten: none of the last ten ran longer than 200 s
    assert p.predict(_shaped(1000.0, 4), 200) == pytest.approx(360.0)  # 1.5 x 200 + 60
