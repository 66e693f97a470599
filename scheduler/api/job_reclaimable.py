"""How many of a running batch/v1 Job's Pods no longer need their quota, as Kueue's Job
integration counts them for `status.reclaimablePods` (docs/cluster.md#reclaimable-pods).

Once the Pods still to run are fewer than the Job's parallelism, the difference goes
back: parallelism − (completions − terminal). Terminal Pods are the succeeded ones, or
for an Indexed Job the union of its completed and failed indexes (a failed index has
used up its `backoffLimitPerIndex`), counted below `completions` only (an index at or
above it was removed by a scale-down). A single-Pod Job, or one with nothing terminal
yet, reclaims nothing. Works on the raw Job, as the integration keeps it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.api import raw_object as raw

INDEXED = "Indexed"


def reclaimable_pods(job: Mapping[str, Any]) -> int:
    spec, status = raw.mapping(job.get("spec")), raw.mapping(job.get("status"))
    parallelism = raw.integer(spec.get("parallelism"), 1)
    completions = raw.integer(spec.get("completions"), parallelism)
    if spec.get("completionMode") == INDEXED:
        terminal = terminal_indexes(
            str(status.get("completedIndexes") or ""),
            str(status.get("failedIndexes") or ""),
            completions,
        )
    else:
        terminal = raw.integer(status.get("succeeded"), 0)
    if parallelism <= 1 or terminal <= 0:
        return 0
    remaining = max(completions - terminal, 0)
    return parallelism - remaining if remaining < parallelism else 0


def terminal_indexes(completed: str, failed: str, completions: int) -> int:
    """How many distinct indexes below `completions` the two index lists ("1,3-5") name;
    a malformed interval is skipped."""
    if completions <= 0:
        return 0
    covered: list[tuple[int, int]] = []
    for listed in (completed, failed):
        for interval in filter(None, listed.split(",")):
            bounds = _interval(interval)
            if bounds is not None and bounds[0] <= min(bounds[1], completions - 1):
                covered.append((bounds[0], min(bounds[1], completions - 1)))
    count, counted_to = 0, -1
    for first, last in sorted(covered):
        start = max(first, counted_to + 1)
        if start <= last:
            count += last - start + 1
            counted_to = last
    return count


def _interval(text: str) -> tuple[int, int] | None:
    first, dash, last = text.strip().partition("-")
    try:
        low = int(first)
        high = int(last) if dash else low
    except ValueError:
        return None
    return (low, high) if 0 <= low <= high else None
