"""Immutable snapshots of pending work: what the visibility server reads (KEP-168).

The runtime publishes a :class:`Snapshot` after each batch of changes; a request reads
the snapshot reference once and uses nothing else, so every answer comes from one
consistent state. Nothing here is ever mutated after publication, except memoized
renderings, which are pure functions of the immutable data.

Cost model (visibility-api.md §4.1): a ClusterQueue page is an O(limit) slice, a
LocalQueue page an O(limit) slice of its index list, a position lookup O(1). Building a
view is O(n) and done in slices (:meth:`ViewBuilder.steps`) so the event loop can run
between them.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

Instant = int  # microseconds since the epoch, as in the core
LocalQueueKey = tuple[str, str]  # (namespace, name)
WorkloadKey = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True, slots=True)
class OwnerRef:
    api_version: str
    kind: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class Blocker:
    """One thing that kept a workload from being admitted at its last attempt.

    `kind` is one of `Quota` (not enough unused quota: `amount` more is needed),
    `Capacity` (the request exceeds what the ClusterQueue could ever get: `amount` is
    that maximum), `Taint`, `NodeAffinity`, `FlavorNotFound`, `Policy` (the
    ClusterQueue, its namespace selector, resource validation, all-or-nothing
    admission), `Preemption` (waiting for victims to leave) or `Other`. `flavor`,
    `resource` and `amount` are empty where they do not apply; `amount` is a
    Kubernetes quantity as the message prints it.
    """

    kind: str
    message: str
    flavor: str = ""
    resource: str = ""
    amount: str = ""


@dataclass(frozen=True, slots=True)
class WhyPending:
    """The last `QuotaReserved=False` condition of a pending workload, with its blockers."""

    reason: str  # the condition's reason: Pending, Inadmissible, Waiting, ...
    message: str
    since: Instant  # the condition's lastTransitionTime
    blockers: tuple[Blocker, ...] = ()


@dataclass(frozen=True, slots=True)
class PendingEntry:
    """One pending workload as visibility shows it; built once per workload revision."""

    namespace: str
    name: str
    creation: Instant
    owners: tuple[OwnerRef, ...]
    priority: int
    local_queue: str
    why_pending: str = ""  # the last QuotaReserved=False message, for the position lookup
    fingerprint: bytes = field(default=b"", compare=False)
    # The same condition in full, with its parsed blockers; None before the first
    # attempt. Like `why_pending`, not part of the fingerprint (it does not move the
    # order), so lookups that show it hash it into their ETag themselves.
    why: WhyPending | None = None

    @staticmethod
    def make(
        namespace: str,
        name: str,
        creation: Instant,
        owners: tuple[OwnerRef, ...],
        priority: int,
        local_queue: str,
        why_pending: str = "",
        why: WhyPending | None = None,
    ) -> PendingEntry:
        h = hashlib.blake2b(digest_size=8)
        for part in (namespace, name, str(creation), str(priority), local_queue):
            h.update(part.encode())
            h.update(b"\0")
        for o in owners:
            for part in (o.api_version, o.kind, o.name, o.uid):
                h.update(part.encode())
                h.update(b"\1")
        return PendingEntry(
            namespace, name, creation, owners, priority, local_queue, why_pending, h.digest(), why
        )

    @property
    def key(self) -> WorkloadKey:
        return (self.namespace, self.name)

    @property
    def local_queue_key(self) -> LocalQueueKey:
        return (self.namespace, self.local_queue)


@dataclass(frozen=True, slots=True)
class PageItem:
    entry: PendingEntry
    position_in_cluster_queue: int
    position_in_local_queue: int


class ClusterQueueView:
    """The pending order of one ClusterQueue, frozen at one instant."""

    __slots__ = (
        "_by_lq",
        "_index_of",
        "_lq_position",
        "digest",
        "entries",
        "name",
        "rendered",
    )

    def __init__(
        self,
        name: str,
        entries: tuple[PendingEntry, ...],
        lq_position: tuple[int, ...],
        by_lq: Mapping[LocalQueueKey, tuple[int, ...]],
        index_of: Mapping[WorkloadKey, int],
        digest: str,
    ) -> None:
        self.name = name
        self.entries = entries
        self._lq_position = lq_position
        self._by_lq = by_lq
        self._index_of = index_of
        self.digest = digest
        # Memoized per-item renderings (compact JSON fragments), keyed by index; filled
        # lazily by the server. Items are identical on both endpoints and versions.
        self.rendered: dict[int, bytes] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def item(self, index: int) -> PageItem:
        return PageItem(self.entries[index], index, self._lq_position[index])

    def page(self, offset: int, limit: int) -> list[PageItem]:
        """Items [offset, offset+limit) of the ClusterQueue order: O(limit)."""
        offset = max(0, offset)
        stop = min(len(self.entries), offset + max(0, limit))
        return [self.item(i) for i in range(offset, stop)]

    def local_queue_indexes(self, namespace: str, name: str) -> tuple[int, ...]:
        return self._by_lq.get((namespace, name), ())

    def local_queue_page(
        self, namespace: str, name: str, offset: int, limit: int
    ) -> list[PageItem]:
        """The LocalQueue's subsequence, sliced: O(limit)."""
        indexes = self.local_queue_indexes(namespace, name)
        offset = max(0, offset)
        return [self.item(i) for i in indexes[offset : offset + max(0, limit)]]

    def position_of(self, namespace: str, name: str) -> PageItem | None:
        index = self._index_of.get((namespace, name))
        return None if index is None else self.item(index)

    def local_queue_digest(self, namespace: str, name: str) -> str:
        """A LocalQueue view's identity: the ClusterQueue digest plus its key and binding."""
        h = hashlib.blake2b(digest_size=8)
        for part in (self.digest, namespace, name, self.name):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()


EMPTY_DIGEST = hashlib.blake2b(b"", digest_size=8).hexdigest()


class ViewBuilder:
    """Builds a :class:`ClusterQueueView` in slices.

    Capture the order first (one cheap synchronous copy of a tuple), then run
    :meth:`steps`, which yields after every ``chunk`` entries so an asyncio caller can
    give the loop a turn; :attr:`view` is ready when the generator is exhausted.
    """

    def __init__(self, name: str, entries: Sequence[PendingEntry], chunk: int = 5000) -> None:
        self.name = name
        self.entries = tuple(entries)
        self.chunk = max(1, chunk)
        self._view: ClusterQueueView | None = None

    def steps(self) -> Iterator[None]:
        by_lq: dict[LocalQueueKey, list[int]] = {}
        lq_position: list[int] = []
        index_of: dict[WorkloadKey, int] = {}
        digest = hashlib.blake2b(digest_size=8)
        digest.update(self.name.encode())
        for i, entry in enumerate(self.entries):
            members = by_lq.setdefault(entry.local_queue_key, [])
            lq_position.append(len(members))
            members.append(i)
            index_of[entry.key] = i
            digest.update(entry.fingerprint)
            if (i + 1) % self.chunk == 0:
                yield
        self._view = ClusterQueueView(
            self.name,
            self.entries,
            tuple(lq_position),
            MappingProxyType({k: tuple(v) for k, v in by_lq.items()}),
            MappingProxyType(index_of),
            digest.hexdigest(),
        )

    @property
    def view(self) -> ClusterQueueView:
        if self._view is None:
            for _ in self.steps():
                pass
        assert self._view is not None
        return self._view


def build_view(name: str, entries: Sequence[PendingEntry]) -> ClusterQueueView:
    """Build a view in one go (tests, the simulator, small queues)."""
    return ViewBuilder(name, entries).view


@dataclass(frozen=True, slots=True)
class ResourceUsage:
    """One (flavor, resource) of a ClusterQueue or Cohort, in scheduler values (cpu in
    milli-units, everything else in base units).

    For a ClusterQueue `usage` is the quota its workloads hold and `subtree_quota`
    equals `nominal`. For a Cohort, `subtree_quota` is what the cohort's subtree offers
    to its members (its own nominal quota plus what its children lend) and `usage` is
    what members use of that shared part (scheduling.md §4.2's SQ and U).
    """

    flavor: str
    resource: str
    nominal: int
    usage: int
    subtree_quota: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None

    @property
    def borrowed(self) -> int:
        """Quota used above the node's own nominal quota (ClusterQueues)."""
        return max(0, self.usage - self.nominal)

    @property
    def lendable(self) -> int:
        """Unused nominal quota that the cohort may use: capped by the lending limit."""
        idle = max(0, self.nominal - self.usage)
        return idle if self.lending_limit is None else min(idle, self.lending_limit)


@dataclass(frozen=True, slots=True)
class ClusterQueueQuota:
    name: str
    cohort: str  # "" without one
    active: bool
    inactive_reasons: tuple[str, ...]
    strategy: str
    reserving: int  # workloads holding quota
    resources: tuple[ResourceUsage, ...]  # in resource-group then flavor order


@dataclass(frozen=True, slots=True)
class CohortQuota:
    name: str
    parent: str  # "" for a root
    resources: tuple[ResourceUsage, ...]  # by (flavor, resource)


@dataclass(frozen=True, slots=True)
class QuotaSnapshot:
    """The cohort forest with quotas and usage, captured with the pending views."""

    cluster_queues: tuple[ClusterQueueQuota, ...] = ()  # by name
    cohorts: tuple[CohortQuota, ...] = ()  # by name

    def cluster_queue(self, name: str) -> ClusterQueueQuota | None:
        return next((cq for cq in self.cluster_queues if cq.name == name), None)


EMPTY_QUOTA = QuotaSnapshot()

# A 90% interval: 5% of the mass below `low`, 5% above `high`.
_Z90 = 1.6448536269514722
MICROS = 1_000_000
# Below one effective admission the rate is a guess: no estimate is better than one.
# From one on, the wait's variation is at most sqrt(2) and the interval holds the mean.
MIN_EVIDENCE = 1.0


@dataclass(frozen=True, slots=True)
class WaitEstimate:
    """When a pending workload may be admitted, with a 90% interval (docs/dashboard.md)."""

    seconds: float  # the point estimate: (position + 1) / rate
    low_seconds: float
    high_seconds: float
    admissions_per_hour: float
    effective_admissions: float  # how much evidence the rate rests on


@dataclass(frozen=True, slots=True)
class AdmissionVelocity:
    """A ClusterQueue's exponentially decayed admission rate, frozen at `at`.

    `weight` is the decayed number of admissions and `window_seconds` the decayed
    length of observation, both with time constant `tau_seconds`; the rate at a
    later instant decays both without new admissions, so a queue that stopped
    admitting slows down in the estimate as time passes, without a new snapshot.
    """

    at: Instant
    weight: float
    window_seconds: float
    tau_seconds: float
    min_window_seconds: float = 0.0

    def state(self, now: Instant) -> tuple[float, float]:
        """(decayed admissions, decayed window in seconds) at `now`."""
        dt = max(0.0, (now - self.at) / MICROS)
        decay = math.exp(-dt / self.tau_seconds)
        weight = self.weight * decay
        window = self.window_seconds * decay + self.tau_seconds * (1.0 - decay)
        return weight, max(window, self.min_window_seconds)

    def rate(self, now: Instant) -> float:
        """Admissions per second at `now`."""
        weight, window = self.state(now)
        return weight / window if window > 0 else 0.0

    def estimate(self, position: int, now: Instant) -> WaitEstimate | None:
        """The wait of the workload at 0-based `position`; None while the decayed count
        of admissions is below one (nothing admitted yet, or not recently).

        Model: the workload needs `position + 1` more admissions; admissions arrive as
        a Poisson process at the decayed rate. The wait's coefficient of variation
        combines that process (1/k for k admissions) and the rate's own uncertainty
        (1/n for n effective admissions observed); the interval is the 5% and 95%
        quantiles of a log-normal with that mean and variation.
        """
        weight, window = self.state(now)
        if weight < MIN_EVIDENCE or window <= 0.0:
            return None
        rate = weight / window
        k = position + 1
        mean = k / rate
        cv2 = 1.0 / k + 1.0 / weight
        sigma = math.sqrt(math.log1p(cv2))
        mu = math.log(mean) - sigma * sigma / 2.0
        return WaitEstimate(
            seconds=mean,
            low_seconds=math.exp(mu - _Z90 * sigma),
            high_seconds=math.exp(mu + _Z90 * sigma),
            admissions_per_hour=rate * 3600.0,
            effective_admissions=weight,
        )


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything a request may read, at one instant. Publish a new one; never mutate."""

    generation: int
    synced: bool
    views: Mapping[str, ClusterQueueView]
    # (namespace, LocalQueue name) -> its ClusterQueue name ("" when the CQ does not exist)
    local_queues: Mapping[LocalQueueKey, str]
    # pending workload -> the ClusterQueue whose view lists it
    workloads: Mapping[WorkloadKey, str]
    # The cohort forest with quota and usage, and each ClusterQueue's admission rate:
    # what the dashboard and the wait estimates read.
    quota: QuotaSnapshot = EMPTY_QUOTA
    velocities: Mapping[str, AdmissionVelocity] = field(
        default_factory=lambda: MappingProxyType({})
    )

    def view(self, cluster_queue: str) -> ClusterQueueView | None:
        return self.views.get(cluster_queue)

    def local_queue_view(self, namespace: str, name: str) -> tuple[bool, ClusterQueueView | None]:
        """(LocalQueue exists, the view of its ClusterQueue if that exists)."""
        cq = self.local_queues.get((namespace, name))
        if cq is None:
            return False, None
        return True, self.views.get(cq)

    def locate(self, namespace: str, name: str) -> PageItem | None:
        cq = self.workloads.get((namespace, name))
        view = self.views.get(cq) if cq is not None else None
        return None if view is None else view.position_of(namespace, name)


EMPTY_SNAPSHOT = Snapshot(
    generation=0,
    synced=False,
    views=MappingProxyType({}),
    local_queues=MappingProxyType({}),
    workloads=MappingProxyType({}),
)
