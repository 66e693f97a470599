"""What the flags of `queuescope serve` accept: one parse function per kind of value.

Each takes the text of a flag or of its QUEUESCOPE_* twin and returns the value, or
raises ValueError saying what it expected; `env_twins.add_twin` turns that into the
usage error (exit 2) naming the flag (docs/operations.md#flags-and-environment).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from scheduler.api.durations import DurationError, parse_duration

_MICROS = 1_000_000
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def boolean(value: str) -> bool:
    """`true` or `false` (also `1`/`0`, `yes`/`no`), in any case."""
    if value.lower() in ("true", "1", "yes"):
        return True
    if value.lower() in ("false", "0", "no"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def _number(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"expected a number, got {value!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"expected a finite number, got {value!r}")
    return number


def _whole(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"expected a whole number, got {value!r}") from None


def positive_number(value: str) -> float:
    """A finite number above 0 (a rate)."""
    number = _number(value)
    if number <= 0:
        raise ValueError(f"expected a number above 0, got {value!r}")
    return number


def whole_number(value: str) -> int:
    """0, 1, 2, ..."""
    number = _whole(value)
    if number < 0:
        raise ValueError(f"expected a whole number >= 0, got {value!r}")
    return number


def positive_whole_number(value: str) -> int:
    """1, 2, 3, ... (a cap or a burst: 0 would refuse everything)."""
    number = _whole(value)
    if number < 1:
        raise ValueError(f"expected a whole number >= 1, got {value!r}")
    return number


def seconds(value: str) -> float:
    """A duration of 0 or more: Go's syntax (`10s`, `1m30s`, `500ms`), as Kubernetes'
    own flags take it, or a plain number of seconds."""
    try:
        micros = parse_duration(value)
    except DurationError:
        try:
            number = _number(value)
        except ValueError:
            raise ValueError(f"expected a duration like 10s or 1m30s, got {value!r}") from None
        micros = round(number * _MICROS)
    if micros < 0:
        raise ValueError(f"expected a duration >= 0, got {value!r}")
    return micros / _MICROS


def positive_seconds(value: str) -> float:
    """A duration above 0 (an interval between two runs of something)."""
    duration = seconds(value)
    if duration <= 0:
        raise ValueError(f"expected a duration above 0, got {value!r}")
    return duration


def one_of(choices: Sequence[str]) -> Callable[[str], str]:
    """One of `choices`, exactly as written there."""

    def parse(value: str) -> str:
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got {value!r}")
        return value

    return parse


def metavar(choices: Sequence[str]) -> str:
    """How `--help` shows a flag that takes one of `choices`, as argparse does."""
    return "{" + ",".join(choices) + "}"


def log_level(value: str) -> str:
    """A level of Python's logging by name, in any case: the name in capitals."""
    name = value.upper()
    if name not in LOG_LEVELS:
        raise ValueError(f"expected one of {', '.join(LOG_LEVELS)}, got {value!r}")
    return name
