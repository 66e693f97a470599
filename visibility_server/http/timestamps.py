"""Kubernetes' `metav1.Time` rendering: UTC, second precision, `Z`.

Every listed item carries its creation time, and a deep page renders a hundred items no
request rendered before, usually a hundred distinct seconds: the C library's `strftime`
costs 1.3 to 1.7 µs a call, about half of what a fresh item's head costs
(docs/benchmarks.md, "Fresh items at a deep offset"). So a time is its day, formatted
once per day, and a time of day taken from two tables.
"""

from __future__ import annotations

import datetime
import functools
import time
from typing import Final

MICROS_PER_SECOND: Final = 1_000_000
SECONDS_PER_DAY: Final = 86_400
_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_FOUR_DIGIT_YEARS_START: Final = -30_610_224_000  # 1000-01-01T00:00:00Z
_FOUR_DIGIT_YEARS_END: Final = 253_402_300_800  # 10000-01-01T00:00:00Z
_MIN_SECONDS: Final = -62_135_596_800  # 0001-01-01T00:00:00Z
_MAX_SECONDS: Final = _FOUR_DIGIT_YEARS_END - 1
# "HH:MM:" for each minute of a day, "SSZ" for each second of a minute.
_MINUTES: Final = tuple(f"{m // 60:02d}:{m % 60:02d}:" for m in range(24 * 60))
_SECONDS: Final = tuple(f"{s:02d}Z" for s in range(60))


def rfc3339_seconds(micros: int) -> str:
    """`micros` since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (the fraction dropped)."""
    seconds = micros // MICROS_PER_SECOND
    if not _FOUR_DIGIT_YEARS_START <= seconds < _FOUR_DIGIT_YEARS_END:
        return _clamped(seconds)
    day, in_day = divmod(seconds, SECONDS_PER_DAY)
    minute, second = divmod(in_day, 60)
    return _date(day) + _MINUTES[minute] + _SECONDS[second]


# Workloads arrive over days, not years: a few thousand days cover any queue.
@functools.lru_cache(maxsize=4096)
def _date(day: int) -> str:
    """`YYYY-MM-DDT` of a day since the epoch (years 1000 to 9999: the C path)."""
    return time.strftime("%Y-%m-%dT", time.gmtime(day * SECONDS_PER_DAY))


def _clamped(seconds: int) -> str:
    """Outside years 1000..9999 `strftime` would not pad the year: clamp to what
    `metav1.Time` can hold and format by hand (no workload should get here)."""
    moment = _EPOCH + datetime.timedelta(seconds=min(max(seconds, _MIN_SECONDS), _MAX_SECONDS))
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
        f"T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}Z"
    )
