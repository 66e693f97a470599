"""Per-user token buckets (docs/visibility-api.md#what-if, "Rate limit").

Each user (the authenticated name; every anonymous caller shares one bucket) has a bucket
of `burst` tokens that refills at `rate` tokens per second; a request takes one token or
is refused with the seconds until one is back. Buckets are kept for the `max_users` most
recent users only: a forgotten user starts again with a full bucket, so memory stays
bounded whatever the number of identities.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

DEFAULT_RATE = 1.0  # tokens per second
DEFAULT_BURST = 5
DEFAULT_MAX_USERS = 10_000


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


@dataclass(frozen=True, slots=True)
class RateLimit:
    rate: float = DEFAULT_RATE
    burst: int = DEFAULT_BURST
    max_users: int = DEFAULT_MAX_USERS

    def __post_init__(self) -> None:
        if self.rate <= 0 or self.burst < 1 or self.max_users < 1:
            raise ValueError(f"invalid rate limit {self}: rate > 0, burst >= 1, max_users >= 1")


class UserRateLimiter:
    def __init__(self, limit: RateLimit, clock: Callable[[], float]) -> None:
        self._limit = limit
        self._clock = clock
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    @property
    def limit(self) -> RateLimit:
        return self._limit

    def take(self, user: str) -> float:
        """0 when `user` may go ahead (a token is taken), else the seconds to wait."""
        limit, now = self._limit, self._clock()
        bucket = self._buckets.get(user)
        if bucket is None:
            bucket = self._buckets[user] = _Bucket(float(limit.burst), now)
            if len(self._buckets) > limit.max_users:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(user)
            elapsed = max(0.0, now - bucket.at)
            bucket.tokens = min(float(limit.burst), bucket.tokens + elapsed * limit.rate)
            bucket.at = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / limit.rate
