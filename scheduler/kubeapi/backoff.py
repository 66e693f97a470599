"""The one backoff formula of every call to kube-apiserver (docs/cluster.md#decision-pipeline).

The pause before retry `n` (0-based) is `initial * factor**n`, plus a random fraction of at
most `jitter` of it (so that many clients that failed together do not retry together),
and never more than `cap`. The reflectors' reconnects, the initial list's retries, the
visibility server's budgeted retries and its ConfigMap relists are settings of it; the
caller passes the random draw, so tests choose it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

# Past this many doublings every useful setting is at its cap already; it keeps
# `factor**n` finite however long a failure lasts.
_MAX_EXPONENT: Final = 64


@dataclass(frozen=True, slots=True)
class Backoff:
    initial: float
    factor: float
    cap: float = math.inf
    jitter: float = 0.0

    def delay(self, retry: int, rand: float = 0.0) -> float:
        """Seconds to wait before retry `retry` (0 for the first); `rand` in [0, 1)."""
        base = self.initial * self.factor ** min(retry, _MAX_EXPONENT)
        return min(self.cap, base * (1 + self.jitter * rand))


# Reconnecting a watch: 0.5 s, 1 s, 2 s, ... up to 30 s, each plus up to 20 %.
RECONNECT: Final = Backoff(initial=0.5, factor=2.0, cap=30.0, jitter=0.2)

__all__ = ["RECONNECT", "Backoff"]
