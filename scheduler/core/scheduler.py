"""The scheduler core: cluster state, the events that change it, and the cycle entry point.

Everything is synchronous and deterministic. Time is read only from the injected
clock. The runtime (embedded store, Kubernetes store, simulator) feeds objects and
signals in; the status the core writes is read back out through
:mod:`scheduler.core.status`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from scheduler.core.blockers import PendingWhy, other, policy
from scheduler.core.changes import ChangeFeed, Changes
from scheduler.core.clock import Clock, Instant
from scheduler.core.config import SchedulerConfig
from scheduler.core.holders import Holders
from scheduler.core.model import AdmissionCheckInfo, ClusterQueueInfo, FlavorInfo, LocalQueueInfo
from scheduler.core.nomination import NominationCache
from scheduler.core.queue.interface import QueueEntry, QueueSettings
from scheduler.core.queue.loader import QueuePluginError
from scheduler.core.queue.manager import QueueManager
from scheduler.core.quota import QuotaTree, ResourceQuota
from scheduler.core.resources import FlavorResource, FRAmounts
from scheduler.core.selectors import label_selector_matches
from scheduler.core.state_view import ClusterObjects, PendingQueues, QuotaHolders, QuotaReader
from scheduler.core.workload import (
    ADMITTED,
    EVICTED,
    FINISHED,
    ON_HOLD,
    PODS_READY,
    QUOTA_RESERVED,
    REQUEUED,
    WAITING_FOR_REPLACEMENT_PODS,
    WorkloadState,
    reset_checks,
)

QUEUE_PLUGIN_ANNOTATION = "queuescope.io/queue-plugin"


@dataclass(frozen=True, slots=True)
class CohortInfo:
    name: str
    parent: str | None
    quotas: dict[FlavorResource, ResourceQuota]
    weight: float = 1.0


@dataclass(slots=True)
class PendingEviction:
    key: str
    reason: str
    message: str
    requeued_status: str  # "True" after preemption, else "False"
    requeued_reason: str
    why: PendingWhy | None = None  # why it waits once requeued; None: the message


@dataclass(slots=True)
class CycleStats:
    ran: bool = False
    admitted: list[str] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    requeued: int = 0
    blocked: bool = False  # admission stayed blocked with nothing left to unblock it


class Scheduler:
    """The cluster state and the events that change it. The outside reads it through
    the names of :class:`scheduler.core.state_view.ClusterStateView` and changes it only
    through the command methods below; its containers are the core's own."""

    def __init__(
        self,
        clock: Clock,
        config: SchedulerConfig | None = None,
    ) -> None:
        # The attributes of scheduler.core.state_view.ClusterStateView (these two and the
        # four at the end) are Final: the outside reads them and nothing rebinds them.
        self.clock: Final = clock
        self.config: Final = config or SchedulerConfig()
        self._namespaces: dict[str, dict[str, str]] = {}
        self._flavors: dict[str, FlavorInfo] = {}
        self._flavors_epoch = 0  # moves on every flavor change (nomination cache key)
        self._admission_checks: dict[str, AdmissionCheckInfo] = {}
        self._checks_epoch = 0  # moves on every AdmissionCheck change
        # Moves on every change of a ClusterQueue, Cohort or LocalQueue object (and of a
        # ClusterQueue's terminating state): with the two epochs above and the tree's
        # structure version, all that the queue conditions depend on.
        self._queues_epoch = 0
        self._observed: tuple[int, int, int, int] | None = None  # at the last observation
        self._cluster_queues: dict[str, ClusterQueueInfo] = {}
        self._cohorts: dict[str, CohortInfo] = {}
        self._local_queues: dict[str, LocalQueueInfo] = {}
        self._workloads: dict[str, WorkloadState] = {}
        self._keep_objects = True  # see set_keep_objects
        self._tree = QuotaTree()
        self._queues = QueueManager()
        # What changed since the reader last drained it; None until one asks.
        self._feed: ChangeFeed | None = None
        # quota-holding workloads per ClusterQueue name, whether or not the CQ exists
        self._holders = Holders()
        # usage each holder currently contributes to the tree (exact removal later)
        self._counted: dict[str, FRAmounts] = {}
        self._pending_evictions: list[PendingEviction] = []
        # ClusterQueues deleted while workloads still held quota in them.
        self._terminating: set[str] = set()
        # ClusterQueue -> why its configured queue plugin could not be loaded; the CQ
        # then runs its built-in queueingStrategy instead of stopping the scheduler.
        self._plugin_errors: dict[str, str] = {}
        self._cycle_count = 0
        # Nomination results of earlier heads and cycles, keyed by what they depend on.
        self._nominations = NominationCache()
        self._block_waiter: Callable[[], bool] | None = None
        # CQ -> (the inputs of inactive_reasons, its answer)
        self._inactive: dict[str, tuple[tuple[object, ...], tuple[str, ...], object]] = {}
        # (kind, name) -> (condition state, instant it took that state)
        self._condition_states: dict[tuple[str, str], tuple[str, Instant]] = {}
        # Read-only views of the containers above (they are never rebound).
        self.objects: Final = ClusterObjects(
            namespaces=self._namespaces,
            flavors=self._flavors,
            admission_checks=self._admission_checks,
            cohorts=self._cohorts,
            cluster_queues=self._cluster_queues,
            local_queues=self._local_queues,
            workloads=self._workloads,
            terminating=self._terminating,
        )
        # The core's own containers, as the outside sees them: their read interfaces.
        self.queues: Final[PendingQueues] = self._queues
        self.holders: Final[QuotaHolders] = self._holders
        self.quota: Final[QuotaReader] = self._tree

    # ------------------------------------------------------- what the outside reads
    # With the attributes above, the names of scheduler.core.state_view.ClusterStateView;
    # nothing else of the state is read from outside the core.
    def workload(self, key: str) -> WorkloadState | None:
        return self._workloads.get(key)

    def queue_plugin_error(self, cq: str) -> str | None:
        return self._plugin_errors.get(cq)

    # ------------------------------------------------------ how the runtime drives it
    def set_keep_objects(self, keep: bool) -> None:
        """Whether workloads keep their API object for output (the simulator does; the
        runtime shows only what snapshots hold and turns this off)."""
        self._keep_objects = keep

    def set_block_waiter(self, waiter: Callable[[], bool] | None) -> None:
        """What the cycle calls while admission is blocked
        (docs/scheduling.md#blocking-admission): advance to and apply the next external or
        timed event; False when nothing is left that could unblock."""
        self._block_waiter = waiter

    def retry(self, cqs: Iterable[str]) -> None:
        """Flush exactly these ClusterQueues (not the trees they belong to): their parked
        workloads are tried again by the next cycle."""
        names = sorted(cqs)
        if names:
            self._queues.flush(names, self.now(), self.namespace_matches)

    # ------------------------------------------------------------------ changes
    def follow_changes(self) -> ChangeFeed:
        """Start recording what changes (idempotent): the queues whose pending order
        may have changed, the heads cycles examine, admissions and evictions."""
        if self._feed is None:
            self._feed = ChangeFeed()
            self._queues.record_to(self._feed)
        return self._feed

    def take_changes(self) -> Changes:
        """Everything recorded since the previous call (nothing unless followed)."""
        return self._feed.drain() if self._feed is not None else Changes()

    # ------------------------------------------------------------------ helpers
    def now(self) -> Instant:
        return self.clock.now()

    def namespace_labels(self, namespace: str) -> dict[str, str]:
        return self._namespaces.get(namespace, {})

    def namespace_matches(self, cq: str, namespace: str) -> bool:
        info = self._cluster_queues.get(cq)
        if info is None:
            return False
        return label_selector_matches(info.namespace_selector, self.namespace_labels(namespace))

    def inactive_reasons(self, cq: str) -> list[str]:
        """The reasons of the CQ `Active=False` condition, in the order of
        docs/scheduling.md#clusterqueue-status."""
        return list(self._known_inactive_reasons(cq))

    def _known_inactive_reasons(self, cq: str) -> tuple[str, ...]:
        info = self._cluster_queues[cq]
        # Asked for every CQ several times per cycle; the answer depends only on these.
        # (The entry keeps `info` alive, so its id cannot be reused while it is stored.)
        inputs = (
            id(info),
            cq in self._terminating,
            self._flavors_epoch,
            self._checks_epoch,
            self._tree.structure_version,
        )
        known = self._inactive.get(cq)
        if known is not None and known[0] == inputs:
            return known[1]
        reasons = tuple(self._inactive_reasons(cq, info))
        self._inactive[cq] = (inputs, reasons, info)
        return reasons

    def _inactive_reasons(self, cq: str, info: ClusterQueueInfo) -> list[str]:
        reasons: list[str] = []
        if cq in self._terminating:
            reasons.append("Terminating")
        if info.stop_policy != "None":
            reasons.append("Stopped")
        if any(f not in self._flavors for f in info.flavor_names()):
            reasons.append("FlavorNotFound")
        if self.missing_checks(info):
            reasons.append("AdmissionCheckNotFound")
        if self.inactive_checks(info):
            reasons.append("AdmissionCheckInactive")
        if self._tree.in_cycle(cq):
            reasons.append("CohortCycleDetected")
        return reasons

    def missing_checks(self, info: ClusterQueueInfo) -> list[str]:
        """The AdmissionChecks the queue names that do not exist, sorted."""
        return sorted(c for c in info.admission_checks if c not in self._admission_checks)

    def inactive_checks(self, info: ClusterQueueInfo) -> list[str]:
        """The AdmissionChecks the queue names whose controller is not Active, sorted."""
        return sorted(
            c
            for c in info.admission_checks
            if c in self._admission_checks and not self._admission_checks[c].active
        )

    def cq_active(self, cq: str) -> bool:
        return cq in self._cluster_queues and not self._known_inactive_reasons(cq)

    def local_queue_of(self, wl: WorkloadState) -> LocalQueueInfo | None:
        return self._local_queues.get(f"{wl.namespace}/{wl.queue_name}")

    def queue_entry(self, wl: WorkloadState, previous: QueueEntry | None = None) -> QueueEntry:
        """The workload's queue entry now; `previous` itself when it is still exact
        (a head requeued unchanged: the queue then moves its item without comparing)."""
        rs = wl.requeue_state
        timestamp = wl.queue_order_timestamp(self.config.eviction_ordering)
        requeued_false = wl.conditions.is_false(REQUEUED)
        requeue_at = rs.requeue_at if rs is not None else None
        if (
            previous is not None
            # Compared field by field before building: a frozen record costs more to
            # make than to compare, and most requeued heads are unchanged.
            and previous.revision == wl.revision
            and previous.key == wl.key
            and previous.uid == wl.uid
            and previous.local_queue == wl.queue_name
            and previous.priority == wl.priority
            and previous.timestamp == timestamp
            and previous.requeued_false == requeued_false
            and previous.requeue_at == requeue_at
        ):
            return previous
        return QueueEntry(
            key=wl.key,
            namespace=wl.namespace,
            name=wl.name,
            uid=wl.uid,
            local_queue=wl.queue_name,
            priority=wl.priority,
            timestamp=timestamp,
            revision=wl.revision,
            requeued_false=requeued_false,
            requeue_at=requeue_at,
        )

    def tree_scope(self, cq: str) -> list[str]:
        """The ClusterQueues a flush of `cq` reaches (docs/scheduling.md#flush)."""
        if cq not in self._cluster_queues:
            return []
        return self._tree.tree_cluster_queues(cq)

    def flush(self, cqs: Iterable[str]) -> None:
        scope: set[str] = set()
        for cq in cqs:
            scope.update(self.tree_scope(cq))
        if scope:
            self._queues.flush(sorted(scope), self.now(), self.namespace_matches)

    def queue_condition_state(self, kind: str, name: str) -> str:
        """A token of the Active condition of a queue or cohort, to detect transitions."""
        if kind == "ClusterQueue":
            return ",".join(self._known_inactive_reasons(name)) or "Ready"
        if kind == "LocalQueue":
            lq = self._local_queues[name]
            if lq.stop_policy != "None":
                return "Stopped"
            if lq.cluster_queue not in self._cluster_queues:
                return "ClusterQueueDoesNotExist"
            return "Ready" if self.cq_active(lq.cluster_queue) else "ClusterQueueIsInactive"
        return "Cycle" if self._tree.cohort_in_cycle(name) else "Ready"

    def observe_conditions(self) -> None:
        """Stamp the transition time of every queue and cohort condition that changed."""
        inputs = (
            self._queues_epoch,
            self._flavors_epoch,
            self._checks_epoch,
            self._tree.structure_version,
        )
        if inputs == self._observed:
            return  # called after every cycle; nothing a condition reads has moved
        self._observed = inputs
        now = self.now()
        names: list[tuple[str, str]] = [("ClusterQueue", n) for n in self._cluster_queues]
        names += [("LocalQueue", k) for k in self._local_queues]
        names += [("Cohort", c) for c in self._cohorts]
        for kind, name in names:
            state = self.queue_condition_state(kind, name)
            old = self._condition_states.get((kind, name))
            if old is None or old[0] != state:
                self._condition_states[(kind, name)] = (state, now)

    def condition_since(self, kind: str, name: str) -> Instant:
        self.observe_conditions()
        return self._condition_states[(kind, name)][1]

    # ---------------------------------------------------------- queue resolution
    def resolve(self, wl: WorkloadState) -> tuple[str | None, str | None]:
        """(ClusterQueue it queues in, or None with the Inadmissible message)."""
        lq = self.local_queue_of(wl)
        if lq is None:
            return None, f"LocalQueue {wl.queue_name} doesn't exist"
        if lq.stop_policy != "None":
            return None, f"LocalQueue {wl.queue_name} is inactive"
        if lq.cluster_queue not in self._cluster_queues:
            return None, f"ClusterQueue {lq.cluster_queue} doesn't exist"
        return lq.cluster_queue, None

    def sync_workload(self, wl: WorkloadState) -> None:
        """Put the workload where it belongs: queued in its CQ, or out of every queue."""
        now = self.now()
        if (
            not wl.active
            or wl.finished
            or wl.holds_quota
            or wl.conditions.is_true(WAITING_FOR_REPLACEMENT_PODS)
            or wl.on_hold
        ):
            self._queues.delete(wl.key)
            return
        cq, problem = self.resolve(wl)
        if cq is None:
            self._queues.delete(wl.key)
            assert problem is not None
            wl.set_pending("Inadmissible", policy(problem), now)
            return
        if not self.cq_active(cq):
            wl.set_pending("Inadmissible", policy(f"ClusterQueue {cq} is inactive"), now)
        self._queues.push(cq, self.queue_entry(wl), now)

    def withhold(self, key: str) -> bool:
        """Take a pending workload out of its queue, leaving it pending: no cycle is
        offered it until `sync_workload` queues it again, in the same place (the queue
        orders by priority and queue-order timestamp). For the forecaster's forward run
        only (docs/forecasting.md#cost); returns whether it was queued."""
        return self._queues.delete(key) is not None

    def sync_workloads(self, keys: Iterable[str] | None = None) -> None:
        targets = self._workloads.keys() if keys is None else keys
        for key in sorted(targets):
            wl = self._workloads.get(key)
            if wl is not None:
                self.sync_workload(wl)

    def workloads_of_local_queue(self, lq_key: str) -> list[str]:
        ns, _, name = lq_key.partition("/")
        return sorted(
            k for k, w in self._workloads.items() if w.namespace == ns and w.queue_name == name
        )

    def workloads_of_cluster_queue(self, cq: str) -> list[str]:
        lqs = [k for k, lq in self._local_queues.items() if lq.cluster_queue == cq]
        keys: list[str] = []
        for lq in lqs:
            keys.extend(self.workloads_of_local_queue(lq))
        return sorted(keys)

    # ------------------------------------------------------------- quota usage
    def usage_of(self, wl: WorkloadState) -> FRAmounts:
        """The usage an admitted workload holds, scaled for reclaimable pods
        (docs/scheduling.md#quantities)."""
        usage: FRAmounts = {}
        if wl.admission is None:
            return usage
        by_name = {ps.name: ps for ps in wl.pod_sets}
        for psa in wl.admission.pod_sets:
            remaining = psa.count
            spec = by_name.get(psa.name)
            if spec is not None:
                remaining = min(psa.count, spec.count - wl.reclaimable.get(psa.name, 0))
            for resource, total in psa.resource_usage.items():
                flavor = psa.flavors.get(resource)
                if flavor is None:
                    continue
                value = total
                if psa.count and remaining < psa.count:
                    value = total // psa.count * remaining
                fr = (flavor, resource)
                usage[fr] = usage.get(fr, 0) + value
        return usage

    def hold(self, wl: WorkloadState, cq: str, usage: FRAmounts | None = None) -> None:
        """Record that `wl` holds quota in `cq`, counting its usage in the tree when the
        CQ exists (docs/scheduling.md#invalid-input: usage of a CQ that does not exist yet counts
        once it does)."""
        self.unhold(wl.key)
        self._holders.add(cq, wl.key, wl.priority)
        if cq in self._cluster_queues:
            amounts = self.usage_of(wl) if usage is None else usage
            self._tree.add_usage(cq, amounts)
            self._counted[wl.key] = amounts

    def unhold(self, key: str) -> str | None:
        """Forget `key`'s quota; returns the CQ it held quota in."""
        cq = self._holders.discard(key)
        amounts = self._counted.pop(key, None)
        if cq is not None and amounts is not None and cq in self._cluster_queues:
            self._tree.remove_usage(cq, amounts)
        if cq is not None and cq in self._terminating and self._holders.count(cq) == 0:
            self.delete_cluster_queue(cq)
        return cq

    def count_usage(self, wl: WorkloadState) -> None:
        """Make the tree reflect exactly what `wl` holds now."""
        if wl.holds_quota and wl.admission is not None:
            self.hold(wl, wl.admission.cluster_queue)
        else:
            self.unhold(wl.key)

    def release_quota(self, wl: WorkloadState) -> str | None:
        """Drop the workload's usage; returns the CQ it held quota in."""
        return self.unhold(wl.key)

    # ---------------------------------------------------------------- evictions
    def evict(  # noqa: PLR0913 - keyword-only options of one eviction
        self,
        wl: WorkloadState,
        reason: str,
        message: str,
        *,
        requeued_status: str = "False",
        requeued_reason: str | None = None,
        why: PendingWhy | None = None,
    ) -> None:
        """Set Evicted=True now; quota is released by :meth:`finalize_evictions`
        (docs/scheduling.md#eviction-finalisation). Admission checks go back to Pending
        (docs/scheduling.md#admission-checks)."""
        now = self.now()
        wl.conditions.set(EVICTED, "True", reason, message, now)
        wl.admission_checks = reset_checks(wl.admission_checks, now)
        wl.revision += 1
        if self._feed is not None:
            self._feed.evicted(wl.key)
        self._holders.touch(wl.key)  # an evicted holder sorts first in a preemption search
        self._pending_evictions.append(
            PendingEviction(
                wl.key, reason, message, requeued_status, requeued_reason or reason, why
            )
        )

    def finalize_evictions(self) -> None:
        now = self.now()
        pending, self._pending_evictions = self._pending_evictions, []
        flush: list[str] = []
        for ev in pending:
            wl = self._workloads.get(ev.key)
            if wl is None or wl.admission is None:
                continue
            wl.conditions.set(REQUEUED, ev.requeued_status, ev.requeued_reason, ev.message, now)
            if ev.requeued_reason == "AdmissionCheck":
                self.finish_backoff_if_due(wl)
            wl.set_pending("Pending", ev.why or other(ev.message), now)
            cq = self.release_quota(wl)
            wl.admission = None
            wl.conditions.set(
                ADMITTED, "False", "NoReservation", "The workload has no reservation", now
            )
            if self.config.wait_for_pods_ready.enable:
                wl.conditions.set(
                    PODS_READY, "False", "WaitForStart", "Not all pods are ready or succeeded", now
                )
            wl.revision += 1
            if cq is not None:
                flush.append(cq)
            self.sync_workload(wl)
        self.flush(flush)

    def finish_backoff_if_due(self, wl: WorkloadState) -> None:
        """An admission check's Retry with no delay still to run: requeued at once
        (docs/scheduling.md#admission-checks); a later one ends at its deadline."""
        rs = wl.requeue_state
        if rs is not None and rs.requeue_at is not None and rs.requeue_at > self.now():
            return
        if rs is not None:
            rs.requeue_at = None
        wl.conditions.set(
            REQUEUED, "True", "BackoffFinished", "The workload backoff was finished", self.now()
        )

    # ----------------------------------------------------------------- signals
    def finish(
        self, key: str, *, failed: bool = False, reason: str = "", message: str = ""
    ) -> bool:
        """The workload's job ended; the Finished condition says `reason` and `message`
        (by default the Job integration's words for success or failure)."""
        wl = self._workloads.get(key)
        if wl is None or wl.finished:
            return False
        now = self.now()
        if not reason:
            reason, message = (
                ("Failed", "Job failed") if failed else ("Succeeded", "Job finished successfully")
            )
        wl.conditions.set(FINISHED, "True", reason, message, now)
        wl.finished = True
        cq = self.release_quota(wl)
        self._queues.delete(key)
        if cq is not None:
            self.flush([cq])
        return True

    def pods_ready(self, key: str) -> bool:
        wl = self._workloads.get(key)
        if wl is None:
            return False
        now = self.now()
        old = wl.conditions.get(PODS_READY)
        reason = "Recovered" if old is not None and old.reason == "WaitForRecovery" else "Started"
        return wl.conditions.set(
            PODS_READY,
            "True",
            reason,
            "All pods reached readiness and the workload is running",
            now,
        )

    def set_reclaimable(self, key: str, counts: Mapping[str, int]) -> bool:
        """So many pods of each pod set ended and give their quota back
        (`status.reclaimablePods`, docs/scheduling.md#quantities): the usage shrinks and
        the workloads parked behind it may fit. Counts only grow while the workload
        holds quota, as Kueue's validation demands."""
        wl = self._workloads.get(key)
        wanted = {name: count for name, count in counts.items() if count > 0}
        if wl is None or wl.finished or dict(wl.reclaimable) == wanted:
            return False
        if wl.holds_quota and any(wanted.get(n, 0) < c for n, c in wl.reclaimable.items()):
            return False
        wl.reclaimable = wanted
        wl.revision += 1
        self.count_usage(wl)
        if wl.holds_quota and wl.admission is not None:
            self.flush([wl.admission.cluster_queue])
        return True

    def set_waiting_for_replacements(self, key: str, waiting: bool) -> bool:
        """A pod group misses Pods (`waiting`) or is whole again
        (docs/cluster.md#pod-groups): Kueue's `WaitingForReplacementPods` condition, its
        reason the eviction's while the workload is evicted; while True the workload is
        not queued (one holding quota keeps it). Whole again, the condition turns False
        if it was ever set, and the workload is queued."""
        wl = self._workloads.get(key)
        if wl is None or wl.finished:
            return False
        now = self.now()
        current = wl.conditions.get(WAITING_FOR_REPLACEMENT_PODS)
        if waiting:
            evicted = wl.conditions.get(EVICTED)
            if evicted is not None and evicted.is_true:
                reason, message = evicted.reason, evicted.message
            elif current is not None and current.is_true:
                return False
            else:
                reason, message = "PodsFailed", "Some Failed pods need replacement"
            changed = wl.conditions.set(WAITING_FOR_REPLACEMENT_PODS, "True", reason, message, now)
        elif current is None or not current.is_true:
            return False
        else:
            changed = wl.conditions.set(
                WAITING_FOR_REPLACEMENT_PODS, "False", "PodsReady", "No pods need replacement", now
            )
        if changed:
            self.sync_workload(wl)
        return changed

    def set_on_hold(self, key: str, message: str | None) -> bool:
        """Put the workload on hold with `message`, or lift its hold (None): Kueue's
        `QuotaReserved=False` reason `OnHold` (docs/cluster.md#statefulsets). A held
        workload gives its quota back without an eviction and is not queued; lifted,
        it is queued again, `Pending`."""
        wl = self._workloads.get(key)
        if wl is None or wl.finished:
            return False
        now = self.now()
        if message is None:
            if not wl.on_hold:
                return False
            wl.conditions.set(
                QUOTA_RESERVED,
                "False",
                "Pending",
                "Workload no longer on hold; waiting for quota reservation",
                now,
            )
            wl.revision += 1
            self.sync_workload(wl)
            return True
        if wl.on_hold and wl.admission is None:
            return False
        cq = self.release_quota(wl)
        wl.admission = None
        wl.admission_checks = reset_checks(wl.admission_checks, now)
        wl.why = None
        wl.conditions.set(QUOTA_RESERVED, "False", ON_HOLD, message, now)
        if wl.conditions.get(ADMITTED) is not None:
            wl.conditions.set(
                ADMITTED, "False", "NoReservation", "The workload has no reservation", now
            )
        wl.revision += 1
        self.sync_workload(wl)
        if cq is not None:
            self.flush([cq])
        return True

    def set_active(self, key: str, active: bool) -> bool:
        wl = self._workloads.get(key)
        if wl is None or wl.active == active:
            return False
        now = self.now()
        wl.active = active
        wl.revision += 1
        if not active:
            wl.requeue_state = None
            if wl.holds_quota:
                self.evict(wl, "Deactivated", "The workload is deactivated")
            else:
                wl.conditions.set(
                    EVICTED, "True", "Deactivated", "The workload is deactivated", now
                )
                wl.admission_checks = reset_checks(wl.admission_checks, now)
            self._queues.delete(key)
        else:
            requeued = wl.conditions.get(REQUEUED)
            if (
                requeued is not None
                and requeued.status == "False"
                and requeued.reason.startswith("Deactivated")
            ):
                wl.conditions.set(
                    REQUEUED, "True", "Reactivated", "The workload was reactivated", now
                )
            self.sync_workload(wl)
        return True

    # ------------------------------------------------------------ object changes
    def set_namespace(self, name: str, labels: dict[str, str]) -> None:
        old = self._namespaces.get(name, {})
        self._namespaces[name] = dict(labels)
        if old == labels:
            return
        newly = [
            cq
            for cq, info in sorted(self._cluster_queues.items())
            if label_selector_matches(info.namespace_selector, labels)
            and not label_selector_matches(info.namespace_selector, old)
        ]
        self.flush(newly)

    def set_flavor(self, info: FlavorInfo | None, name: str) -> None:
        before = {cq for cq in self._cluster_queues if self.cq_active(cq)}
        if info is None:
            self._flavors.pop(name, None)
        else:
            self._flavors[name] = info
        self._flavors_epoch += 1
        self._after_activity_change(before)
        # A changed flavor may now match or tolerate: every CQ using it is worth a retry.
        users = [cq for cq, c in sorted(self._cluster_queues.items()) if name in c.flavor_names()]
        self.flush(users)

    def set_admission_check(self, info: AdmissionCheckInfo) -> None:
        before = {cq for cq in self._cluster_queues if self.cq_active(cq)}
        self._admission_checks[info.name] = info
        self._checks_epoch += 1
        self._after_activity_change(before)

    def delete_admission_check(self, name: str) -> None:
        if name not in self._admission_checks:
            return
        before = {cq for cq in self._cluster_queues if self.cq_active(cq)}
        del self._admission_checks[name]
        self._checks_epoch += 1
        self._after_activity_change(before)

    def _after_activity_change(self, before: set[str]) -> None:
        after = {cq for cq in self._cluster_queues if self.cq_active(cq)}
        changed = sorted(after ^ before)
        for cq in changed:
            self.sync_workloads(self.workloads_of_cluster_queue(cq))
        self.flush(sorted(after - before))

    def set_cluster_queue(self, info: ClusterQueueInfo) -> None:
        before = {cq for cq in self._cluster_queues if self.cq_active(cq)}
        old = self._cluster_queues.get(info.name)
        self._queues_epoch += 1
        self._terminating.discard(info.name)
        self._cluster_queues[info.name] = info
        self._tree.set_cluster_queue(info.name, info.cohort or None, info.quotas, info.weight)
        settings = QueueSettings(cluster_queue=info.name, strategy=info.strategy)
        plugin = info.queue_plugin or self.config.default_queue_plugin
        self._plugin_errors.pop(info.name, None)
        try:
            self._queues.set_cluster_queue(settings, plugin, now=self.now())
        except QueuePluginError as err:
            self._plugin_errors[info.name] = str(err)
            self._queues.set_cluster_queue(settings, None, now=self.now())
        if old is None:
            # usage of workloads admitted before this CQ existed is counted now
            # (docs/scheduling.md#invalid-input)
            for key in self._holders.keys(info.name):
                wl = self._workloads.get(key)
                if wl is not None:
                    self.count_usage(wl)
            self.sync_workloads(self.workloads_of_cluster_queue(info.name))
        self._apply_stop_policy(info, old)
        self._after_activity_change(before)
        self.flush([info.name])

    def _drop_unadmitted_reservations(self, keys: Iterable[str], message: str) -> None:
        """docs/scheduling.md#stop-policies: a stopped queue keeps its running workloads, but a
        reservation that is not yet admitted is given back (Inadmissible)."""
        now = self.now()
        released: list[str] = []
        for key in list(keys):
            wl = self._workloads.get(key)
            if wl is None or not wl.holds_quota or wl.is_admitted:
                continue
            cq = self.release_quota(wl)
            wl.admission = None
            wl.set_pending("Inadmissible", policy(message), now)
            wl.revision += 1
            if cq is not None:
                released.append(cq)
            self.sync_workload(wl)
        self.flush(released)

    def _apply_stop_policy(self, info: ClusterQueueInfo, old: ClusterQueueInfo | None) -> None:
        now = self.now()
        if info.stop_policy != "None" and (old is None or old.stop_policy == "None"):
            self._drop_unadmitted_reservations(
                self._holders.keys(info.name), f"ClusterQueue {info.name} is stopped"
            )
        if info.stop_policy == "HoldAndDrain" and (
            old is None or old.stop_policy != "HoldAndDrain"
        ):
            for key in self._holders.keys(info.name):
                wl = self._workloads[key]
                if not wl.conditions.is_true(EVICTED):
                    self.evict(wl, "ClusterQueueStopped", "The ClusterQueue is stopped")
        if info.stop_policy == "None" and old is not None and old.stop_policy != "None":
            self._mark_restarted(self.workloads_of_cluster_queue(info.name), "ClusterQueue", now)

    def _mark_restarted(self, keys: Iterable[str], kind: str, now: Instant) -> None:
        """Requeued=True again for the workloads that stopping the `kind` (ClusterQueue or
        LocalQueue) had marked Requeued=False."""
        stopped = f"{kind}Stopped"
        for key in keys:
            wl = self._workloads[key]
            rq = wl.conditions.get(REQUEUED)
            if rq is not None and rq.status == "False" and rq.reason == stopped:
                wl.conditions.set(
                    REQUEUED,
                    "True",
                    f"{kind}Restarted",
                    f"The {kind} was restarted after being stopped",
                    now,
                )
                wl.revision += 1

    def delete_cluster_queue(self, name: str) -> None:
        if name not in self._cluster_queues:
            return
        self._queues_epoch += 1
        if self._holders.count(name) > 0:
            # Like a ClusterQueue held by Kueue's finalizer: it stays, inactive and
            # `Terminating`, until its last workload gives its quota back
            # (docs/scheduling.md#clusterqueue-status).
            before = {cq for cq in self._cluster_queues if self.cq_active(cq)}
            self._terminating.add(name)
            self._after_activity_change(before)
            return
        self._terminating.discard(name)
        before = {cq for cq in self._cluster_queues if self.cq_active(cq)}
        # The tree forgets this CQ's usage; holders stay, to be counted if it returns.
        for key in self._holders.keys(name):
            self._counted.pop(key, None)
        del self._cluster_queues[name]
        self._tree.delete_cluster_queue(name)
        self._queues.delete_cluster_queue(name)
        self.sync_workloads(self.workloads_of_cluster_queue(name))
        self._after_activity_change(before)

    def set_cohort(self, info: CohortInfo) -> None:
        before = {cq for cq in self._cluster_queues if self.cq_active(cq)}
        self._queues_epoch += 1
        self._cohorts[info.name] = info
        self._tree.set_cohort(info.name, info.parent, info.quotas, info.weight)
        self._after_activity_change(before)
        self.flush(self._cluster_queues_under(info.name))

    def delete_cohort(self, name: str) -> None:
        if name not in self._cohorts:
            return
        before = {cq for cq in self._cluster_queues if self.cq_active(cq)}
        self._queues_epoch += 1
        del self._cohorts[name]
        self._tree.delete_cohort(name)
        self._after_activity_change(before)
        self.flush(self._cluster_queues_under(name))

    def _cluster_queues_under(self, cohort: str) -> list[str]:
        return [c for c, info in sorted(self._cluster_queues.items()) if info.cohort == cohort]

    def set_local_queue(self, info: LocalQueueInfo) -> None:
        old = self._local_queues.get(info.key)
        self._queues_epoch += 1
        self._local_queues[info.key] = info
        now = self.now()
        if info.stop_policy != "None" and (old is None or old.stop_policy == "None"):
            self._drop_unadmitted_reservations(
                self.workloads_of_local_queue(info.key), f"LocalQueue {info.name} is stopped"
            )
        if info.stop_policy == "HoldAndDrain" and (
            old is None or old.stop_policy != "HoldAndDrain"
        ):
            for key in self.workloads_of_local_queue(info.key):
                wl = self._workloads[key]
                if wl.holds_quota and not wl.conditions.is_true(EVICTED):
                    self.evict(wl, "LocalQueueStopped", "The LocalQueue is stopped")
        if info.stop_policy == "None" and old is not None and old.stop_policy != "None":
            self._mark_restarted(self.workloads_of_local_queue(info.key), "LocalQueue", now)
        self.sync_workloads(self.workloads_of_local_queue(info.key))

    def delete_local_queue(self, key: str) -> None:
        if self._local_queues.pop(key, None) is not None:
            self._queues_epoch += 1
            self.sync_workloads(self.workloads_of_local_queue(key))

    def set_workload(self, wl: WorkloadState) -> None:
        """Create or replace a workload (spec from the API object; status kept if known)."""
        old = self._workloads.get(wl.key)
        if old is not None:
            self.unhold(old.key)
            # Only a change the queue reacts to may un-park the workload
            # (docs/scheduling.md#queue-structures).
            changed = old.queue_signature() != wl.queue_signature()
            wl.revision = old.revision + 1 if changed else old.revision
        self._workloads[wl.key] = wl
        if self.config.wait_for_pods_ready.enable and wl.conditions.get(PODS_READY) is None:
            # docs/scheduling.md#podsready-condition: not ready until the pods-ready signal says so.
            wl.conditions.set(
                PODS_READY,
                "False",
                "WaitForStart",
                "Not all pods are ready or succeeded",
                self.now(),
            )
        self.count_usage(wl)
        self._finish_arriving_eviction(wl)
        self._drain_if_stopped(wl)
        # docs/scheduling.md#deactivation applies however spec.active changes: by a signal or by an
        # update.
        was_active = old.active if old is not None else True
        if wl.active != was_active:
            wl.active = was_active
            self.set_active(wl.key, not was_active)
        # Quota given back (reservation dropped, or pods became reclaimable): others
        # parked behind it may fit now (docs/scheduling.md#flush).
        gave_back = old is not None and (not wl.holds_quota or old.reclaimable != wl.reclaimable)
        if old is not None and old.holds_quota and old.admission is not None and gave_back:
            self.flush([old.admission.cluster_queue])
        self.sync_workload(wl)

    def _finish_arriving_eviction(self, wl: WorkloadState) -> None:
        """A workload that arrives holding quota with Evicted=True is mid-eviction: the
        job integration finishes it at the end of this event
        (docs/scheduling.md#eviction-finalisation, D9), else its quota would never be given back."""
        evicted = wl.conditions.get(EVICTED)
        if not wl.holds_quota or evicted is None or not evicted.is_true:
            return
        if any(p.key == wl.key for p in self._pending_evictions):
            return
        preempted = evicted.reason == "Preempted"
        self._pending_evictions.append(
            PendingEviction(
                wl.key,
                evicted.reason,
                evicted.message,
                "True" if preempted else "False",
                evicted.reason,
            )
        )

    def _drain_if_stopped(self, wl: WorkloadState) -> None:
        """A quota holder of a HoldAndDrain ClusterQueue or LocalQueue is evicted
        (docs/scheduling.md#stop-policies), also when it arrives after the stop policy was set."""
        if not wl.holds_quota or wl.admission is None or wl.conditions.is_true(EVICTED):
            return
        cq = self._cluster_queues.get(wl.admission.cluster_queue)
        lq = self.local_queue_of(wl)
        if cq is not None and cq.stop_policy == "HoldAndDrain":
            self.evict(wl, "ClusterQueueStopped", "The ClusterQueue is stopped")
        elif lq is not None and lq.stop_policy == "HoldAndDrain":
            self.evict(wl, "LocalQueueStopped", "The LocalQueue is stopped")

    def delete_workload(self, key: str) -> None:
        wl = self._workloads.pop(key, None)
        if wl is None:
            return
        cq = self.unhold(key)
        self._queues.delete(key)
        if cq is not None:
            self.flush([cq])
