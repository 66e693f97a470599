"""What the outside of the core may ask of the cluster state.

See docs/architecture.md#the-cluster-state.

The runtime, the simulator, the forecaster, the CLI and the benchmarks read the core's
state only through :class:`ClusterStateView`; they change it only through the
Scheduler's command methods (``set_*``, ``delete_*``, ``finish``, ``run_cycle``, ...).
The Scheduler keeps its containers private (ruff's SLF001 stops a reach into them
from outside the core).

Every mapping handed out here is the core's own live container typed read-only: no
copy per call (the publisher and the snapshot capture read them on every publish), and
a reader sees each change as soon as the core makes it, so it must not keep one across
an ``await`` expecting it to stay fixed.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from scheduler.core.clock import Clock, Instant
    from scheduler.core.cohort_forest import NodeRef, ResourceQuota
    from scheduler.core.config import SchedulerConfig
    from scheduler.core.model import (
        AdmissionCheckInfo,
        ClusterQueueInfo,
        FlavorInfo,
        LocalQueueInfo,
    )
    from scheduler.core.queue.interface import PendingQueue
    from scheduler.core.resources import FlavorResource
    from scheduler.core.scheduler import CohortInfo
    from scheduler.core.workload import WorkloadState


@dataclass(frozen=True, slots=True)
class ClusterObjects:
    """The objects the core knows, each by its key; read-only views of the core's own
    dictionaries (built once, they follow every change)."""

    namespaces: Mapping[str, Mapping[str, str]]  # name -> labels
    flavors: Mapping[str, FlavorInfo]
    admission_checks: Mapping[str, AdmissionCheckInfo]
    cohorts: Mapping[str, CohortInfo]
    cluster_queues: Mapping[str, ClusterQueueInfo]
    local_queues: Mapping[str, LocalQueueInfo]  # "namespace/name" -> queue
    workloads: Mapping[str, WorkloadState]  # "namespace/name" -> workload
    terminating: Set[str]  # ClusterQueues deleted while workloads still hold quota in them


class PendingQueues(Protocol):
    """The read side of the pending queues: which ClusterQueues have one, each queue (the
    plugin interface, whose ordered runs the publisher reads), where a workload waits."""

    def cluster_queues(self) -> list[str]: ...

    def queue(self, cq: str) -> PendingQueue | None: ...

    def locate(self, key: str) -> str | None: ...


class QuotaHolders(Protocol):
    """The workloads holding quota, per ClusterQueue (whether or not the queue exists)."""

    def epoch(self, cq: str) -> int: ...

    def cluster_queue_of(self, key: str) -> str | None: ...

    def keys(self, cq: str) -> list[str]: ...

    def count(self, cq: str) -> int: ...

    def lowest_priority(self, cq: str) -> int | None: ...

    def all_keys(self) -> list[str]: ...


class QuotaReader(Protocol):
    """The quota tree as numbers: quotas, limits and usage of ClusterQueues and cohorts."""

    def has_cluster_queue(self, cq: str) -> bool: ...

    def cohorts(self) -> list[str]: ...

    def parent(self, node: NodeRef) -> NodeRef | None: ...

    def quotas(self, node: NodeRef) -> Mapping[FlavorResource, ResourceQuota]: ...

    def subtree_quotas(self, node: NodeRef) -> dict[FlavorResource, int]: ...

    def node_usages(self, node: NodeRef) -> dict[FlavorResource, int]: ...

    def nominal(self, cq: str, fr: FlavorResource) -> int: ...

    def usage(self, cq: str, fr: FlavorResource) -> int: ...

    def borrowing_limit(self, cq: str, fr: FlavorResource) -> int | None: ...

    def lending_limit(self, cq: str, fr: FlavorResource) -> int | None: ...


class ClusterStateView(Protocol):
    """Everything the outside of the core may ask of the cluster state, in one place."""

    @property
    def config(self) -> SchedulerConfig: ...

    @property
    def clock(self) -> Clock: ...

    def now(self) -> Instant: ...

    @property
    def objects(self) -> ClusterObjects:
        """The known objects by key."""
        ...

    def workload(self, key: str) -> WorkloadState | None:
        """The workload of key "namespace/name", if known."""
        ...

    @property
    def queues(self) -> PendingQueues: ...

    @property
    def holders(self) -> QuotaHolders: ...

    @property
    def quota(self) -> QuotaReader: ...

    def queue_plugin_error(self, cq: str) -> str | None:
        """Why the queue plugin the ClusterQueue names could not be loaded (it then runs
        its built-in queueing strategy), or None."""
        ...

    def inactive_reasons(self, cq: str) -> list[str]:
        """The reasons of the ClusterQueue's Active=False condition; empty when active."""
        ...

    def local_queue_of(self, wl: WorkloadState) -> LocalQueueInfo | None:
        """The LocalQueue the workload names, if it exists."""
        ...

    def namespace_matches(self, cq: str, namespace: str) -> bool:
        """Whether the ClusterQueue's namespace selector admits workloads of `namespace`."""
        ...
