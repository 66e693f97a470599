"""Leader election with a coordination.k8s.io/v1 Lease (docs/cluster.md#high-availability).

The candidate reads the Lease every `retry_period`. It takes it when the Lease is
absent, released (empty holder), or expired; it renews it while it holds it. Every
write carries the resourceVersion it read, so of two candidates racing only one
succeeds. Expiry is judged by this process's monotonic clock from the moment it last
*saw the record change*, never by comparing the holder's `renewTime` with local
time, so clock skew between nodes cannot make two leaders. A leader that has not
renewed within `renew_deadline` steps down on its own.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from scheduler.kubeapi.client import KubeRest
from scheduler.kubeapi.errors import Json, KubeError
from scheduler.runtime.kube.resources import LEASES

log = logging.getLogger(__name__)

LEASE_DURATION = 15.0
RENEW_DEADLINE = 10.0
RETRY_PERIOD = 2.0


def micro_time(now: datetime) -> str:
    """metav1.MicroTime: RFC 3339 with microseconds."""
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_identity(pod_name: str) -> str:
    return f"{pod_name}_{uuid.uuid4()}"


def _wall_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class LeaseRef:
    """The Lease the replicas compete for."""

    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class LeaseTiming:
    """The Lease's three durations, in seconds (client-go's names and defaults)."""

    lease_duration: float = LEASE_DURATION
    renew_deadline: float = RENEW_DEADLINE
    retry_period: float = RETRY_PERIOD


@dataclass(frozen=True, slots=True)
class ElectionClocks:
    """Where the elector reads time: the monotonic clock for its own deadlines, the wall
    clock for the Lease's timestamps (tests pass their own)."""

    monotonic: Callable[[], float] = time.monotonic
    wall: Callable[[], datetime] = _wall_now


class LeaderElector:
    def __init__(
        self,
        rest: KubeRest,
        *,
        lease: LeaseRef,
        identity: str,
        timing: LeaseTiming = LeaseTiming(),
        clocks: ElectionClocks = ElectionClocks(),
    ) -> None:
        self.rest = rest
        self.namespace = lease.namespace
        self.name = lease.name
        self.identity = identity
        self.timing = timing
        self.clocks = clocks
        self.leading = False
        self.changed = asyncio.Event()  # set on every leadership change
        self.transitions = 0
        self._observed: tuple[str, str, str] | None = None  # (holder, renewTime, rv)
        self._observed_at = 0.0
        self._last_renew = 0.0
        # Set by `release`: this process is shutting down and never campaigns again.
        self.resigned = False

    @property
    def path(self) -> str:
        return LEASES.item(self.name, self.namespace)

    def _set_leading(self, leading: bool) -> None:
        if leading != self.leading:
            self.leading = leading
            self.transitions += 1
            log.info(
                "event=%s lease=%s/%s identity=%s",
                "leader-elected" if leading else "leader-lost",
                self.namespace,
                self.name,
                self.identity,
            )
            self.changed.set()

    async def run(self) -> None:
        """Campaign and renew until cancelled or released."""
        while not self.resigned:
            try:
                await self.try_acquire_or_renew()
            except KubeError as err:
                log.warning("event=lease-error error=%s", err)
            if (
                self.leading
                and self.clocks.monotonic() - self._last_renew > self.timing.renew_deadline
            ):
                log.error("event=lease-renew-deadline-exceeded identity=%s", self.identity)
                self._set_leading(False)
            await asyncio.sleep(self.timing.retry_period)

    def _spec(self, *, transitions: int, acquire: str | None) -> Json:
        now = micro_time(self.clocks.wall())
        spec: Json = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.timing.lease_duration),
            "renewTime": now,
            "leaseTransitions": transitions,
        }
        spec["acquireTime"] = acquire or now
        return spec

    async def try_acquire_or_renew(self) -> bool:
        """One round; True if this candidate holds the Lease afterwards."""
        if self.resigned:
            return False
        try:
            lease = await self.rest.get(self.path)
        except KubeError as err:
            if err.status != 404:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(transitions=0, acquire=None),
            }
            try:
                await self.rest.create(LEASES.collection(self.namespace), body)
            except KubeError as create_err:
                if create_err.status == 409:
                    return False
                raise
            self._renewed()
            return True
        spec: Json = lease.get("spec") or {}
        meta: Json = lease.get("metadata") or {}
        holder = str(spec.get("holderIdentity") or "")
        record = (holder, str(spec.get("renewTime") or ""), str(meta.get("resourceVersion", "")))
        now = self.clocks.monotonic()
        if record[:2] != (self._observed or ("", "", ""))[:2]:
            self._observed, self._observed_at = record, now
        duration = float(spec.get("leaseDurationSeconds") or self.timing.lease_duration)
        mine = holder == self.identity
        expired = not holder or now - self._observed_at > duration
        if not mine and not expired:
            self._set_leading(False)
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        acquire = spec.get("acquireTime") if mine else None
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {**meta, "resourceVersion": meta.get("resourceVersion")},
            "spec": self._spec(
                transitions=transitions if mine else transitions + 1,
                acquire=str(acquire) if acquire else None,
            ),
        }
        try:
            await self.rest.replace(self.path, body)
        except KubeError as err:
            if err.status == 409:  # someone else wrote first
                return False
            raise
        self._renewed()
        return True

    def _renewed(self) -> None:
        self._last_renew = self.clocks.monotonic()
        # A round that began before `release` and won its write must not lead again;
        # `release` reads the Lease after it and gives it up.
        self._set_leading(not self.resigned)

    async def release(self) -> None:
        """Give the Lease up at shutdown, so a standby takes over in about one retry
        period instead of a whole lease duration; never campaign again afterwards (a
        process that re-took the Lease during its last seconds would leave it to
        expire: a whole lease duration without a leader)."""
        self.resigned = True
        self._set_leading(False)
        try:
            lease = await self.rest.get(self.path)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            lease["spec"] = {
                **spec,
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "renewTime": micro_time(self.clocks.wall()),
            }
            await self.rest.replace(self.path, lease)
            log.info("event=lease-released identity=%s", self.identity)
        except KubeError as err:
            log.warning("event=lease-release-failed error=%s", err)
