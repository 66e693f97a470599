from __future__ import annotations

import math

import pytest

from benchmarks.stats import median, percentile, ratio, summary


def test_percentile_is_nearest_rank() -> None:
    samples = [float(x) for x in range(1, 101)]  # 1..100
    assert percentile(samples, 50) == 50.0
    assert percentile(samples, 99) == 99.0
    assert percentile(samples, 100) == 100.0
    assert percentile(samples, 0.5) == 1.0


def test_percentile_does_not_depend_on_order() -> None:
    assert percentile([5.0, 1.0, 4.0, 2.0, 3.0], 60) == 3.0
    assert percentile([9.0], 99) == 9.0


def test_p99_of_few_samples_is_the_maximum() -> None:
    assert percentile([1.0, 2.0, 30.0], 99) == 30.0


@pytest.mark.parametrize("p", [0, -1, 100.5])
def test_percentile_rejects_out_of_range(p: float) -> None:
    with pytest.raises(ValueError, match="percentile"):
        percentile([1.0], p)


def test_percentile_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="no samples"):
        percentile([], 50)


def test_summary() -> None:
    s = summary([4.0, 1.0, 3.0, 2.0])
    assert s == {"count": 4, "p50": 2.0, "p90": 4.0, "p99": 4.0, "max": 4.0, "mean": 2.5}
    assert summary([]) == {"count": 0}


def test_ratio_and_median() -> None:
    assert ratio(10.0, 4.0) == 2.5
    assert math.isinf(ratio(1.0, 0.0))
    assert median([3.0, 1.0, 2.0]) == 2.0
    with pytest.raises(ValueError, match="no values"):
        median([])
