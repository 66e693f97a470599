"""The values the flags of `queuescope serve` accept (docs/operations.md#flags-and-environment)."""

from __future__ import annotations

import re

import pytest

from queuescope import flag_values


def _exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("10s", 10.0), ("1m30s", 90.0), ("500ms", 0.5), ("1h", 3600.0), ("0", 0.0), ("0.2", 0.2)],
)
def test_durations_in_gos_syntax_or_plain_seconds(text: str, seconds: float) -> None:
    assert flag_values.seconds(text) == seconds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ten", "expected a duration like 10s or 1m30s, got 'ten'"),
        ("10x", "expected a duration like 10s or 1m30s, got '10x'"),
        ("-1s", "expected a duration >= 0, got '-1s'"),
        ("-0.5", "expected a duration >= 0, got '-0.5'"),
        ("nan", "expected a duration like 10s or 1m30s, got 'nan'"),
        ("inf", "expected a duration like 10s or 1m30s, got 'inf'"),
    ],
)
def test_a_bad_duration_says_what_was_expected(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=_exactly(message)):
        flag_values.seconds(text)


def test_an_interval_is_above_zero() -> None:
    assert flag_values.positive_seconds("1ms") == 0.001
    with pytest.raises(ValueError, match=_exactly("expected a duration above 0, got '0s'")):
        flag_values.positive_seconds("0s")


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        (flag_values.whole_number, "-1", "expected a whole number >= 0, got '-1'"),
        (flag_values.whole_number, "1.5", "expected a whole number, got '1.5'"),
        (flag_values.positive_whole_number, "0", "expected a whole number >= 1, got '0'"),
        (flag_values.positive_whole_number, "", "expected a whole number, got ''"),
        (flag_values.positive_number, "0", "expected a number above 0, got '0'"),
        (flag_values.positive_number, "-2.5", "expected a number above 0, got '-2.5'"),
        (flag_values.positive_number, "lots", "expected a number, got 'lots'"),
        (flag_values.positive_number, "inf", "expected a finite number, got 'inf'"),
        (flag_values.boolean, "maybe", "expected true or false, got 'maybe'"),
    ],
)
def test_bad_numbers_and_switches(parse: object, text: str, message: str) -> None:
    assert callable(parse)
    with pytest.raises(ValueError, match=_exactly(message)):
        parse(text)


def test_good_numbers_and_switches() -> None:
    assert flag_values.whole_number("0") == 0
    assert flag_values.positive_whole_number("64") == 64
    assert flag_values.positive_number("0.5") == 0.5
    assert [flag_values.boolean(t) for t in ("true", "FALSE", "1", "no")] == [
        True,
        False,
        True,
        False,
    ]


def test_choices_and_log_levels() -> None:
    parse = flag_values.one_of(("text", "json"))
    assert parse("json") == "json"
    with pytest.raises(ValueError, match=_exactly("expected one of text, json, got 'JSON'")):
        parse("JSON")
    assert flag_values.log_level("debug") == "DEBUG"
    levels = "DEBUG, INFO, WARNING, ERROR, CRITICAL"
    with pytest.raises(ValueError, match=_exactly(f"expected one of {levels}, got 'verbose'")):
        flag_values.log_level("verbose")
