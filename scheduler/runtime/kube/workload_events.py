"""The Events of a Workload status write (docs/cluster.md#events).

An Event says what the leader did, so it is derived from what a write changed on the
server, never from what the core decided: a condition the write turned True that the
server did not hold True before, or a pending reason it changed. The reasons and notes
are Kueue v0.19.2's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from scheduler.api.base import parse_timestamp
from scheduler.kubeapi.errors import Json
from scheduler.runtime.kube.events import Event, Regarding
from scheduler.runtime.kube.records import owner_of, owners_of
from scheduler.runtime.kube.resources import JOBS, WORKLOADS


def _conditions(status: Json | None) -> dict[str, Json]:
    found: dict[str, Json] = {}
    for c in (status or {}).get("conditions") or []:
        if isinstance(c, dict) and isinstance(c.get("type"), str):
            found[c["type"]] = c
    return found


def _turned_true(before: dict[str, Json], after: dict[str, Json], type_: str) -> Json | None:
    """`after`'s condition of this type if it is True and `before` did not hold it True
    since the same instant."""
    new = after.get(type_)
    if new is None or new.get("status") != "True":
        return None
    old = before.get(type_)
    if (
        old is not None
        and old.get("status") == "True"
        and old.get("lastTransitionTime") == new.get("lastTransitionTime")
    ):
        return None
    return new


def _pending(before: dict[str, Json], after: dict[str, Json]) -> str | None:
    """The message of a pending condition (`QuotaReserved` False for `Pending`) that the
    write changed; None when it wrote none, or the same again."""
    new = after.get("QuotaReserved")
    if new is None or (new.get("status"), new.get("reason")) != ("False", "Pending"):
        return None
    old = before.get("QuotaReserved") or {}
    said = (old.get("status"), old.get("reason"), old.get("message"))
    message = str(new.get("message", ""))
    return None if said == ("False", "Pending", message) else message


def _time(value: object) -> datetime | None:
    try:
        return parse_timestamp(value)
    except ValueError:
        return None


def _owner_job(meta: Json) -> Regarding | None:
    job = owner_of(owners_of(meta), JOBS)
    if job is None:
        return None
    return Regarding.of(JOBS, str(meta.get("namespace", "")), job.name, job.uid)


@dataclass(frozen=True, slots=True)
class Preemption:
    """Who preempted the Workload being written, as the core knows it: the preemptor's
    Workload and both priorities (queuescope has no priority boost: the effective
    priority is the base)."""

    preemptor: Regarding
    preemptor_priority: int
    preemptee_priority: int

    def priorities(self) -> str:
        p, q = self.preemptor_priority, self.preemptee_priority
        return (
            f"preemptor effective priority: {p} (base: {p}, boost: 0); "
            f"preemptee effective priority: {q} (base: {q}, boost: 0)"
        )


def _preempted(
    workload: Regarding, before: Json | None, message: str, preemption: Preemption | None
) -> list[Event]:
    """Kueue's two Events of a preemption: `Preempted` on the victim, with both
    priorities, and `PreemptedWorkload` on the preemptor (when the core still knows it)."""
    if preemption is None:
        return [Event(workload, "Preempted", message)]
    cluster_queue = str(((before or {}).get("admission") or {}).get("clusterQueue", ""))
    victim = f"{workload.namespace}/{workload.name} (UID: {workload.uid})"
    return [
        Event(workload, "Preempted", f"{message}; {preemption.priorities()}"),
        Event(
            preemption.preemptor,
            "PreemptedWorkload",
            f"Preempted workload {victim} in ClusterQueue {cluster_queue}; "
            f"{preemption.priorities()}",
        ),
    ]


def workload_events(
    before: Json | None, written: Json, preemption: Preemption | None = None
) -> list[Event]:
    """The Events of one status write: `before` the status the server held, `written`
    the Workload the server returned, `preemption` who preempted it (if the core says)."""
    meta = written.get("metadata") or {}
    status = written.get("status") or {}
    old, new = _conditions(before), _conditions(status)
    namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    workload = Regarding.of(WORKLOADS, namespace, name, str(meta.get("uid", "")))
    cluster_queue = str((status.get("admission") or {}).get("clusterQueue", ""))
    events: list[Event] = []

    reserved = _turned_true(old, new, "QuotaReserved")
    if reserved is not None:
        requeued = new.get("Requeued")
        queued = _time((requeued or {}).get("lastTransitionTime") or meta.get("creationTimestamp"))
        at = _time(reserved.get("lastTransitionTime"))
        waited = max(0.0, (at - queued).total_seconds()) if at and queued else 0.0
        events.append(
            Event(
                workload,
                "QuotaReserved",
                f"Quota reserved in ClusterQueue {cluster_queue}, "
                f"wait time since queued was {waited:.0f}s",
            )
        )
    evicted = _turned_true(old, new, "Evicted")
    pending = _pending(old, new)
    active = (written.get("spec") or {}).get("active") is not False
    # An eviction's pending condition is told by the eviction's Events; an inactive
    # Workload is not waiting for the scheduler.
    if pending is not None and evicted is None and active:
        events.append(Event(workload, "Pending", pending, type="Warning"))
    if _turned_true(old, new, "Admitted") is not None:
        events.append(
            Event(
                workload,
                "Admitted",
                f"Admitted by ClusterQueue {cluster_queue}, wait time since reservation was 0s",
            )
        )
    if evicted is not None and (before or {}).get("admission"):
        reason, message = str(evicted.get("reason", "")), str(evicted.get("message", ""))
        if reason == "Preempted":
            events += _preempted(workload, before, message, preemption)
        events.append(Event(workload, f"EvictedDueTo{reason}", message))
    job = _owner_job(meta)
    if job is not None and _turned_true(old, new, "Finished") is not None:
        events.append(
            Event(job, "FinishedWorkload", f"Workload '{namespace}/{name}' is declared finished")
        )
    return events
