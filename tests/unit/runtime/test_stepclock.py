from __future__ import annotations

import time

from scheduler.runtime.stepclock import since, stamp


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
