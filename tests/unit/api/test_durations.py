from __future__ import annotations

import pytest

from scheduler.api.durations import DurationError, format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "micros"),
    [
        ("0", 0),
        ("+0", 0),
        ("-0", 0),
        ("0s", 0),
        ("30s", 30_000_000),
        ("5m", 300_000_000),
        ("1h", 3_600_000_000),
        ("1h2m3s", 3_723_000_000),
        ("1.5h", 5_400_000_000),
        (".5s", 500_000),
        ("1.s", 1_000_000),
        ("250ms", 250_000),
        ("10us", 10),
        ("10µs", 10),  # micro sign
        ("10μs", 10),  # Greek mu
        ("1500ns", 1),  # truncated toward zero
        ("-1500ns", -1),
        ("-90s", -90_000_000),
        ("+1m", 60_000_000),
        ("1m30.25s", 90_250_000),
        ("2h45m0.5s", 9_900_500_000),
    ],
)
def test_parse_duration(text: str, micros: int) -> None:
    assert parse_duration(text) == micros


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "invalid duration"),
        ("-", "invalid duration"),
        ("1", "missing unit"),
        ("1.5", "missing unit"),
        ("s", "invalid duration"),
        (".s", "invalid duration"),
        ("1d", 'unknown unit "d"'),
        ("1hx", 'unknown unit "hx"'),
        ("1h 2m", "unknown unit"),
        ("3000000h", "out of range"),
    ],
)
def test_parse_duration_rejects(text: str, message: str) -> None:
    with pytest.raises(DurationError, match=message):
        parse_duration(text)


@pytest.mark.parametrize(
    ("micros", "text"),
    [
        (0, "0s"),
        (5, "5µs"),
        (250_000, "250ms"),
        (1_500_000, "1.5s"),
        (90_000_000, "1m30s"),
        (3_723_000_000, "1h2m3s"),
        (3_600_000_000, "1h0m0s"),
        (-30_000_000, "-30s"),
    ],
)
def test_format_duration_is_go_shaped(micros: int, text: str) -> None:
    assert format_duration(micros) == text
    assert parse_duration(text) == micros
