"""Every flag of `queuescope serve` has a QUEUESCOPE_* environment twin (docs/product.md):
the twin, when set, is the flag's default."""

from __future__ import annotations

import os
from collections.abc import Callable


def env(name: str, default: str) -> str:
    """The value of QUEUESCOPE_<name>, else `default`."""
    return os.environ.get(f"QUEUESCOPE_{name}", default)


def add_switch(add: Callable[..., object], flag: str, twin: str, help: str | None = None) -> None:
    """An on/off flag (`add` is a parser's or group's add_argument): off unless given, or
    unless QUEUESCOPE_<twin> is `true`."""
    add(flag, action="store_true", default=env(twin, "") == "true", help=help)
