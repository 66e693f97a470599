"""`rfc3339_seconds` against a calendar computed another way (datetime arithmetic)."""

from __future__ import annotations

import datetime

from hypothesis import given
from hypothesis import strategies as st

from visibility_server.http.timestamps import rfc3339_seconds

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
FIRST = datetime.datetime(1, 1, 1, tzinfo=datetime.UTC)
LAST = datetime.datetime(9999, 12, 31, 23, 59, 59, tzinfo=datetime.UTC)


def expected(micros: int) -> str:
    seconds = micros // 1_000_000
    lowest, highest = (int((t - EPOCH).total_seconds()) for t in (FIRST, LAST))
    moment = EPOCH + datetime.timedelta(seconds=min(max(seconds, lowest), highest))
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
        f"T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}Z"
    )


# Years 1000 to 9999, where the day comes from the C library and the time of day from
# the tables, then everything a 64-bit instant can hold (clamped outside years 1..9999).
@given(st.integers(min_value=-30_610_224_000_000_000, max_value=253_402_300_799_999_999))
def test_every_four_digit_year_instant_renders_like_the_calendar(micros: int) -> None:
    assert rfc3339_seconds(micros) == expected(micros)


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_any_instant_renders_like_the_calendar_clamped(micros: int) -> None:
    assert rfc3339_seconds(micros) == expected(micros)


def test_the_seconds_of_one_day_share_its_date_and_walk_its_clock() -> None:
    midnight = 1_767_225_600  # 2026-01-01T00:00:00Z
    rendered = [rfc3339_seconds((midnight + s) * 1_000_000) for s in range(86_400)]
    assert rendered[0] == "2026-01-01T00:00:00Z"
    assert rendered[3_661] == "2026-01-01T01:01:01Z"
    assert rendered[-1] == "2026-01-01T23:59:59Z"
    assert len(set(rendered)) == 86_400
    assert rendered == sorted(rendered)
    assert rfc3339_seconds((midnight + 86_400) * 1_000_000) == "2026-01-02T00:00:00Z"
