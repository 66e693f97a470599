"""Every flag of `queuescope serve` has a QUEUESCOPE_* environment twin (docs/product.md):
the twin, when set, is the flag's default."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def env(name: str, default: str) -> str:
    """The value of QUEUESCOPE_<name>, else `default`."""
    return os.environ.get(f"QUEUESCOPE_{name}", default)


def add_switch(add: Callable[..., object], flag: str, twin: str, help: str | None = None) -> None:
    """An on/off flag (`add` is a parser's or group's add_argument): off unless given, or
    unless QUEUESCOPE_<twin> is `true`."""
    add(flag, action="store_true", default=env(twin, "") == "true", help=help)


def add_twin(
    add: Callable[..., object],
    flag: str,
    twin: str,
    default: str,
    parse: Callable[[str], object],
    **options: object,
) -> None:
    """A flag with a value (`add` is a parser's or group's add_argument) whose default is
    QUEUESCOPE_<twin>, else `default`, both read by `parse`
    (docs/operations.md#flags-and-environment).

    A value `parse` refuses is argparse's usage error naming the flag, and the twin when
    the value came from it, never a traceback."""
    variable = f"QUEUESCOPE_{twin}"
    from_env = os.environ.get(variable)
    parsed = flag_type(parse, from_env=from_env, variable=variable)
    add(flag, type=parsed, default=default if from_env is None else from_env, **options)


def flag_type(
    parse: Callable[[str], T], *, from_env: str | None = None, variable: str = ""
) -> Callable[[str], T]:
    """`parse` as argparse's `type`: what it refuses is a usage error naming the flag,
    and `variable` when the value is `from_env`."""

    def parsed(value: str) -> T:
        try:
            return parse(value)
        except ValueError as error:
            # argparse hands a string default to `type` as the very object it was given.
            origin = f" (from {variable})" if from_env is not None and value is from_env else ""
            raise argparse.ArgumentTypeError(f"{error}{origin}") from None

    return parsed
