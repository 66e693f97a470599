"""The loop-step timer of the benchmarks: every step counted, by the task that ran it."""

from __future__ import annotations

import asyncio
from asyncio import events

from benchmarks.loop_steps import LoopSteps


async def _yields_three_times() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def test_each_step_of_a_task_is_counted_under_its_coroutine() -> None:
    original = events.Handle._run  # noqa: SLF001 - what install replaces
    steps = LoopSteps()
    steps.install()
    try:
        await asyncio.create_task(_yields_three_times())
    finally:
        steps.uninstall()
    assert events.Handle._run is original  # noqa: SLF001
    mine = steps.by_task["_yields_three_times"]
    assert mine.steps == 4  # the first step and one after each of the three yields
    assert mine.cpu >= 0 and mine.wall >= mine.cpu_of_wall >= 0
    figures = steps.figures(top=len(steps.by_task))
    assert figures["_yields_three_times"]["steps"] == 4


async def test_steps_after_uninstall_are_not_counted() -> None:
    steps = LoopSteps()
    steps.install()
    steps.uninstall()
    await asyncio.create_task(_yields_three_times())
    assert "_yields_three_times" not in steps.by_task
