from __future__ import annotations

import time

from scheduler.runtime.stepclock import TimeBox, since, stamp
from tests.unit.runtime.support import LoopTurns


def test_a_sleeping_stretch_costs_wall_time_but_no_cpu() -> None:
    started = stamp()
    time.sleep(0.05)
    wall, cpu = since(started)
    assert wall >= 0.05
    assert cpu < wall / 2


def test_a_busy_stretch_costs_cpu() -> None:
    started = stamp()
    begun = time.thread_time()
    while time.thread_time() - begun < 0.02:
        pass
    wall, cpu = since(started)
    assert cpu >= 0.02
    assert wall >= cpu - 0.001


async def _count_turns(box: TimeBox, pauses: int) -> int:
    """How many turns another task got while a loop paused `pauses` times."""
    async with LoopTurns() as turns:
        started = turns.count
        for _ in range(pauses):
            await box.pause()
        return turns.count - started


async def test_a_spent_box_yields_at_every_pause_and_measures_each_stretch() -> None:
    box = TimeBox(0.0)
    assert box.spent()
    assert await _count_turns(box, 5) == 5
    wall, cpu = box.end()
    assert box.max >= wall >= 0 and box.max_cpu >= cpu >= 0


async def test_a_box_with_budget_left_keeps_the_stretch() -> None:
    box = TimeBox(3600.0)
    assert not box.spent()
    assert box.spent(ahead=3600.0)  # the work announced would use it up
    assert await _count_turns(box, 5) == 0
    before = box.started
    await box.yield_()
    assert box.started != before


async def test_the_total_counts_the_cpu_of_every_closed_stretch() -> None:
    box = TimeBox(0.0)
    for _ in range(3):
        begun = time.thread_time()
        while time.thread_time() - begun < 0.005:
            pass
        await box.yield_()
    assert box.total_cpu >= 0.015
    assert box.total_cpu >= box.max_cpu >= 0.005
