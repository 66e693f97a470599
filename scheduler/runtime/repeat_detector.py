"""When the engine's cycles stop making progress: a repeated state, in constant memory.

The engine runs cycles back to back while they change something, and stops when a
cycle that admitted and preempted nothing leaves the queues as an earlier such cycle
left them (the same sizes and the same flavor scan positions of the heads): from there
the cycles would only go round. Remembering every state since the last admission cost
one fingerprint per cycle, and a deep BestEffortFIFO queue walks 100,000 heads without
admitting any: the set grew to 100,000 fingerprints, and freeing it when the cycles
ended held the event loop for 150 ms (docs/benchmarks.md, "The end of a long walk").

Brent's cycle detection keeps one fingerprint instead: it compares each state with a
checkpoint that moves to the current state after 2, 4, 8, 16, ... observations. A
sequence that goes round a loop of `period` states after `lead` others meets its
checkpoint again within 2 × max(lead + 2, period) + period observations, where the set
needed lead + period; a sequence of distinct states never reports a repeat. So the
engine may run up to about three times as many idle cycles before it stops, never fewer;
a blocked StrictFIFO head, the common case, still stops at the second identical cycle.
"""

from __future__ import annotations

from dataclasses import dataclass

_NOTHING = object()  # no checkpoint yet


@dataclass(slots=True)
class RepeatDetector:
    checkpoint: object = _NOTHING
    since: int = 0  # observations since the checkpoint was taken
    span: int = 1  # the checkpoint moves after this many

    def reset(self) -> None:
        """Progress was made: earlier states say nothing about the next ones."""
        self.checkpoint, self.since, self.span = _NOTHING, 0, 1

    def repeated(self, state: object) -> bool:
        """Observe `state`; True when it equals the checkpoint (the cycles go round)."""
        if self.checkpoint is not _NOTHING and state == self.checkpoint:
            return True
        self.since += 1
        if self.checkpoint is _NOTHING or self.since >= self.span:
            self.checkpoint, self.since, self.span = state, 0, self.span * 2
        return False
