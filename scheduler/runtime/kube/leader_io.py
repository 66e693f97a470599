"""What every controller the leader runs (docs/cluster.md#high-availability) works through."""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.kubeapi.client import KubeRest
from scheduler.runtime.engine import Engine
from scheduler.runtime.kube.events import Event, EventRecorder
from scheduler.runtime.kube.ratelimit import TokenBucket
from scheduler.runtime.kube.store import KubeStore


@dataclass(frozen=True, slots=True)
class LeaderIO:
    """The API server client, the engine the controllers signal, the informer cache they
    read, the token bucket every write takes from (shared, so all writes together keep
    to the configured rate), and where they say what they did (None: nowhere)."""

    rest: KubeRest
    engine: Engine
    store: KubeStore
    limiter: TokenBucket
    events: EventRecorder | None = None

    def record(self, *events: Event) -> None:
        if self.events is not None:
            self.events.record(*events)
