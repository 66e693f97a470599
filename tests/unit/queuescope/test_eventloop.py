"""`serve --loop`: uvloop by default where installed, asyncio's loop as the fallback."""

from __future__ import annotations

import asyncio
import sys

import pytest
import uvloop

from queuescope import eventloop
from queuescope.cli import _parser


async def _running_loop() -> type[asyncio.AbstractEventLoop]:
    return type(asyncio.get_running_loop())


def _loop_class(name: str) -> type[asyncio.AbstractEventLoop]:
    _, factory = eventloop.loop_factory(name)
    return eventloop.run(_running_loop(), factory)


@pytest.mark.skipif(sys.platform == "win32", reason="uvloop does not exist on Windows")
@pytest.mark.parametrize("name", ["auto", "uvloop"])
def test_auto_and_uvloop_run_on_uvloop_where_it_is_installed(name: str) -> None:
    assert eventloop.loop_factory(name)[0] == "uvloop"
    assert _loop_class(name) is uvloop.Loop


def test_asyncio_runs_on_the_standard_loop() -> None:
    assert eventloop.loop_factory("asyncio")[0] == "asyncio"
    cls = _loop_class("asyncio")
    assert not issubclass(cls, uvloop.Loop)
    assert cls.__module__.startswith("asyncio.")


def test_without_uvloop_auto_falls_back_and_uvloop_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` raises ImportError
    assert eventloop.loop_factory("auto") == ("asyncio", asyncio.new_event_loop)
    with pytest.raises(ValueError, match="uvloop is not installed"):
        eventloop.loop_factory("uvloop")


def test_an_unknown_loop_is_an_error() -> None:
    with pytest.raises(ValueError, match="--loop must be one of auto, uvloop, asyncio"):
        eventloop.loop_factory("trio")


def test_run_closes_its_loop_and_returns_the_result() -> None:
    made: list[asyncio.AbstractEventLoop] = []

    def factory() -> asyncio.AbstractEventLoop:
        made.append(asyncio.new_event_loop())
        return made[-1]

    async def answer() -> int:
        return 42

    assert eventloop.run(answer(), factory) == 42
    assert len(made) == 1 and made[0].is_closed()


def test_serve_takes_the_flag_and_its_environment_twin(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _parser().parse_args(["serve", "--embedded", "x"]).loop == "auto"
    assert _parser().parse_args(["serve", "--embedded", "x", "--loop", "asyncio"]).loop == "asyncio"
    monkeypatch.setenv("QUEUESCOPE_LOOP", "asyncio")
    assert _parser().parse_args(["serve", "--embedded", "x"]).loop == "asyncio"
