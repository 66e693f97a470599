from __future__ import annotations

import pytest

from benchmarks.result import Result, Target, format_number


@pytest.mark.parametrize(
    ("value", "relation", "limit", "met"),
    [
        (4.9, "<", 5.0, True),
        (5.0, "<", 5.0, False),
        (5.0, "<=", 5.0, True),
        (20.0, ">=", 20.0, True),
        (19.9, ">=", 20.0, False),
        (None, "<", 5.0, None),
        (float("nan"), "<", 5.0, None),
    ],
)
def test_target_verdict(value: float | None, relation: str, limit: float, met: bool | None) -> None:
    target = Target("x", value, relation, limit, "ms")
    assert target.met is met
    assert target.verdict == {True: "met", False: "MISSED", None: "not measured"}[met]


def test_unknown_relation_is_rejected() -> None:
    with pytest.raises(ValueError, match="relation"):
        Target("x", 1.0, "==", 1.0, "")


@pytest.mark.parametrize(
    ("value", "text"),
    [(12345.6, "12,346"), (123.4, "123"), (12.34, "12.3"), (1.234, "1.23"), (0.01234, "0.0123")],
)
def test_format_number(value: float, text: str) -> None:
    assert format_number(value) == text
    assert format_number(None) == "n/a"
    assert format_number(float("inf")) == "inf"


def test_result_round_trips_through_json_and_ends_with_its_headline() -> None:
    result = Result(
        name="visibility-latency",
        headline=57.25,
        unit="x",
        headline_label="baseline/ours",
        command="python -m benchmarks visibility-latency",
        columns=["a"],
        rows=[["1"]],
        targets=[Target("p99", 2.0, "<", 5.0, "ms")],
        notes=["n"],
        figures={"1000": {"k": 1}},
    )
    data = result.to_json()
    assert data["targets"][0]["met"] is True
    again = Result.from_json(data)
    assert again == result
    assert result.headline_line() == "visibility-latency: 57.2 x"
