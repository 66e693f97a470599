"""Every step the asyncio event loop runs, timed from outside: its wall time and the loop
thread's CPU time, by the task that ran it (docs/benchmarks.md, "Forecast serving").

A component's own count of its stretches can miss one: a stretch no time box closes, or
a frame that frees what it held when it returns. This counts at the loop itself (each
ready handle's run), so nothing a task does between two yields escapes it; a step's
wall time far above its CPU time is the machine taking the core away, not the task's
work. For benchmarks only: it replaces `asyncio.Handle._run` while installed (the
standard event loop's; uvloop runs its own handles).
"""

from __future__ import annotations

import asyncio
import time
from asyncio import events
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(slots=True)
class Longest:
    """The longest steps of one task (or of the plain callbacks)."""

    steps: int = 0
    wall: float = 0.0  # seconds: the longest step's wall time
    cpu_of_wall: float = 0.0  # ... and its CPU time
    cpu: float = 0.0  # the most CPU one step used
    wall_of_cpu: float = 0.0  # ... and that step's wall time

    def figures(self) -> dict[str, float]:
        return {
            "steps": self.steps,
            "max_cpu_ms": round(self.cpu * 1000, 2),
            "its_wall_ms": round(self.wall_of_cpu * 1000, 2),
            "max_wall_ms": round(self.wall * 1000, 2),
            "its_cpu_ms": round(self.cpu_of_wall * 1000, 2),
        }


def _owner(handle: events.Handle) -> str:
    """The qualified name of the coroutine of the task a handle steps, or "callbacks"."""
    task = getattr(getattr(handle, "_callback", None), "__self__", None)
    if not isinstance(task, asyncio.Task):
        return "callbacks"
    return getattr(task.get_coro(), "__qualname__", "task")


class LoopSteps:
    """Times every step while installed; `by_task` keeps the longest per task."""

    def __init__(self) -> None:
        self.by_task: dict[str, Longest] = {}
        self._original: Callable[[events.Handle], None] | None = None

    def install(self) -> None:
        original: Callable[[events.Handle], None] = events.Handle._run  # noqa: SLF001
        self._original = original
        by_task = self.by_task

        def run(handle: events.Handle) -> None:
            name = _owner(handle)
            wall, cpu = time.perf_counter(), time.thread_time()
            original(handle)
            wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
            longest = by_task.get(name)
            if longest is None:
                longest = by_task[name] = Longest()
            longest.steps += 1
            if wall > longest.wall:
                longest.wall, longest.cpu_of_wall = wall, cpu
            if cpu > longest.cpu:
                longest.cpu, longest.wall_of_cpu = cpu, wall

        events.Handle._run = run  # type: ignore[method-assign,assignment]  # noqa: SLF001

    def uninstall(self) -> None:
        if self._original is not None:
            events.Handle._run = self._original  # type: ignore[method-assign,assignment]  # noqa: SLF001
            self._original = None

    def figures(self, top: int = 6) -> dict[str, dict[str, float]]:
        """The `top` tasks by the most CPU one of their steps used."""
        ordered = sorted(self.by_task.items(), key=lambda item: -item[1].cpu)
        return {name: longest.figures() for name, longest in ordered[:top]}
