"""Go `time.ParseDuration` syntax, held as exact integer microseconds.

The Configuration (`waitForPodsReady.timeout`) and Scenario (`events[].at`) use Go
durations. The core's clock counts microseconds, so values are converted exactly
(via rationals) instead of through floats; sub-microsecond parts are truncated toward
zero, as Go's `Duration.Microseconds()` does.
"""

from __future__ import annotations

import re
from fractions import Fraction

__all__ = ["DurationError", "format_duration", "parse_duration"]

_NS_PER_UNIT: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 micro sign
    "μs": 1_000,  # U+03BC Greek small letter mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
}

# One "<number><unit>" term; Go requires digits on at least one side of the dot.
_TERM = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]+)")

# Go durations are int64 nanoseconds; anything larger is an overflow error there.
_MAX_NS = 2**63 - 1


class DurationError(ValueError):
    """Not a Go duration, or outside the int64-nanosecond range."""


def parse_duration(text: str) -> int:
    """Exact microseconds of a Go duration string such as "1h2m3.5s", "-90s" or "0"."""
    original = text
    sign = 1
    if text[:1] in ("+", "-"):
        sign = -1 if text[0] == "-" else 1
        text = text[1:]
    if text == "0":
        return 0
    if not text:
        raise DurationError(f'invalid duration "{original}"')
    total_ns = Fraction(0)
    pos = 0
    while pos < len(text):
        match = _TERM.match(text, pos)
        if match is None:
            if re.fullmatch(r"[0-9.]+", text[pos:]):
                raise DurationError(f'missing unit in duration "{original}"')
            raise DurationError(f'invalid duration "{original}"')
        whole, frac, unit = match[1], match[2], match[3]
        if not whole and not frac:
            raise DurationError(f'invalid duration "{original}"')
        if unit not in _NS_PER_UNIT:
            raise DurationError(f'unknown unit "{unit}" in duration "{original}"')
        number = Fraction(int(whole or "0"))
        if frac:
            number += Fraction(int(frac), 10 ** len(frac))
        total_ns += number * _NS_PER_UNIT[unit]
        pos = match.end()
    if total_ns > _MAX_NS:
        raise DurationError(f'invalid duration "{original}": out of range')
    micros = int(total_ns / 1_000)  # int() truncates toward zero
    return sign * micros


def format_duration(micros: int) -> str:
    """Go's `Duration.String()` shape ("1h2m3s", "1.5s", "250ms", "0s") for output."""
    if micros == 0:
        return "0s"
    sign = "-" if micros < 0 else ""
    value = abs(micros)
    if value < 1_000_000:
        if value < 1_000:
            return f"{sign}{value}µs"
        return f"{sign}{_decimal(value, 1_000)}ms"
    hours, rest = divmod(value, 3600 * 1_000_000)
    minutes, rest = divmod(rest, 60 * 1_000_000)
    seconds = _decimal(rest, 1_000_000)
    if hours:
        return f"{sign}{hours}h{minutes}m{seconds}s"
    if minutes:
        return f"{sign}{minutes}m{seconds}s"
    return f"{sign}{seconds}s"


def _decimal(value: int, unit: int) -> str:
    whole, frac = divmod(value, unit)
    if not frac:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}.{frac:0{digits}d}".rstrip("0")
