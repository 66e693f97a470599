"""The scheduler settings the core reads, distilled from the Kueue Configuration."""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduler.api.transformations import Transformation


@dataclass(frozen=True, slots=True)
class WaitForPodsReady:
    enable: bool = False
    timeout_micros: int = 300_000_000
    block_admission: bool = False
    recovery_timeout_micros: int | None = None
    timestamp: str = "Eviction"
    backoff_limit_count: int | None = None
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 3600


@dataclass(frozen=True, slots=True)
class QueueVisibility:
    update_interval_seconds: int = 5
    cluster_queue_max_count: int = 10
    local_queue_max_count: int | None = None  # None: the LocalQueue extension is off
    local_queue_max_position: int = 10


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    wait_for_pods_ready: WaitForPodsReady = field(default_factory=WaitForPodsReady)
    queue_visibility: QueueVisibility | None = None
    fair_sharing: bool = False
    fair_sharing_strategies: tuple[str, ...] = ()
    exclude_resource_prefixes: tuple[str, ...] = ()
    # resources.transformations (docs/scheduling.md#resource-transformations)
    transformations: tuple[Transformation, ...] = ()
    # resources.quotaCheckStrategy: IgnoreUndeclared
    ignore_undeclared_resources: bool = False
    default_queue_plugin: str | None = None

    @property
    def eviction_ordering(self) -> bool:
        """docs/scheduling.md#queue-order-timestamp: PodsReadyTimeout evictions reorder by eviction
        time under `Eviction`."""
        return self.wait_for_pods_ready.timestamp == "Eviction"
