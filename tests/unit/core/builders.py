"""Small factories for API-object dicts and a test harness around the scheduler core.

Objects are built as plain dicts (the shape of a YAML manifest), decoded and
validated with :func:`scheduler.api.decode.decode_object` and applied with
:func:`scheduler.core.ingest.apply_object`, so every test goes through the same
path as the simulator. Nothing here reads the wall clock: time is a ManualClock.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from scheduler.api.decode import decode_object
from scheduler.core.clock import (
    MICROS_PER_SECOND,
    Instant,
    ManualClock,
    datetime_from_instant,
    instant_from_datetime,
)
from scheduler.core.config import SchedulerConfig
from scheduler.core.cycle import run_cycle
from scheduler.core.ingest import apply_object, delete_object
from scheduler.core.pods_ready import fire_due
from scheduler.core.scheduler import CycleStats, Scheduler
from scheduler.core.status import cluster_queue_status, local_queue_status, workload_status
from scheduler.core.visibility import PendingItem, pending_workloads
from scheduler.core.workload import WorkloadState

Json = dict[str, Any]

START: Instant = instant_from_datetime(datetime(2026, 1, 1, tzinfo=UTC))
SECOND = MICROS_PER_SECOND
KUEUE = "kueue.x-k8s.io/v1beta1"


def rfc3339(instant: Instant) -> str:
    return datetime_from_instant(instant).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# --------------------------------------------------------------------------- objects


def namespace(name: str, labels: dict[str, str] | None = None) -> Json:
    meta: Json = {"name": name}
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def flavor(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    taints: list[Json] | None = None,
    tolerations: list[Json] | None = None,
) -> Json:
    spec: Json = {}
    if labels:
        spec["nodeLabels"] = dict(labels)
    if taints:
        spec["nodeTaints"] = list(taints)
    if tolerations:
        spec["tolerations"] = list(tolerations)
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


QuotaSpec = str | int | tuple[Any, Any, Any]
"""A nominal quota, or (nominal, borrowingLimit | None, lendingLimit | None)."""


def _resource_quota(resource: str, q: QuotaSpec) -> Json:
    if isinstance(q, tuple):
        nominal, borrowing, lending = q
    else:
        nominal, borrowing, lending = q, None, None
    out: Json = {"name": resource, "nominalQuota": str(nominal)}
    if borrowing is not None:
        out["borrowingLimit"] = str(borrowing)
    if lending is not None:
        out["lendingLimit"] = str(lending)
    return out


def group(covered: list[str], flavors: dict[str, dict[str, QuotaSpec]]) -> Json:
    """A resource group; ``flavors`` maps flavor name -> resource -> quota, in try order."""
    return {
        "coveredResources": list(covered),
        "flavors": [
            {"name": f, "resources": [_resource_quota(r, quotas[r]) for r in covered]}
            for f, quotas in flavors.items()
        ],
    }


def cluster_queue(
    name: str,
    groups: list[Json],
    *,
    cohort: str | None = None,
    strategy: str | None = None,
    selector: Json | None = None,
    no_selector: bool = False,
    when_can_borrow: str | None = None,
    when_can_preempt: str | None = None,
    preemption: Json | None = None,
    stop_policy: str | None = None,
    admission_checks: list[str] | None = None,
) -> Json:
    spec: Json = {"resourceGroups": groups}
    if not no_selector:
        spec["namespaceSelector"] = {} if selector is None else selector
    if cohort is not None:
        spec["cohort"] = cohort
    if strategy is not None:
        spec["queueingStrategy"] = strategy
    fungibility: Json = {}
    if when_can_borrow is not None:
        fungibility["whenCanBorrow"] = when_can_borrow
    if when_can_preempt is not None:
        fungibility["whenCanPreempt"] = when_can_preempt
    if fungibility:
        spec["flavorFungibility"] = fungibility
    if preemption is not None:
        spec["preemption"] = preemption
    if stop_policy is not None:
        spec["stopPolicy"] = stop_policy
    if admission_checks is not None:
        spec["admissionChecks"] = admission_checks
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def simple_cq(
    name: str,
    cpu: QuotaSpec,
    *,
    flavor_name: str = "default",
    resource: str = "cpu",
    **kwargs: Any,
) -> Json:
    """A CQ with one group, one flavor and one resource."""
    return cluster_queue(name, [group([resource], {flavor_name: {resource: cpu}})], **kwargs)


def cohort(name: str, parent: str | None = None, groups: list[Json] | None = None) -> Json:
    spec: Json = {}
    if parent is not None:
        spec["parentName"] = parent
    if groups:
        spec["resourceGroups"] = groups
    return {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def local_queue(ns: str, name: str, cq: str, *, stop_policy: str | None = None) -> Json:
    spec: Json = {"clusterQueue": cq}
    if stop_policy is not None:
        spec["stopPolicy"] = stop_policy
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


def pod_set(
    requests: dict[str, str] | None = None,
    *,
    count: int = 1,
    name: str = "main",
    min_count: int | None = None,
    limits: dict[str, str] | None = None,
    tolerations: list[Json] | None = None,
    node_selector: dict[str, str] | None = None,
    affinity: Json | None = None,
) -> Json:
    resources: Json = {}
    if requests:
        resources["requests"] = dict(requests)
    if limits:
        resources["limits"] = dict(limits)
    spec: Json = {"containers": [{"name": "c", "image": "registry.example/app:1"}]}
    if resources:
        spec["containers"][0]["resources"] = resources
    if tolerations:
        spec["tolerations"] = list(tolerations)
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if affinity:
        spec["affinity"] = affinity
    out: Json = {"name": name, "count": count, "template": {"spec": spec}}
    if min_count is not None:
        out["minCount"] = min_count
    return out


def workload(
    ns: str,
    name: str,
    queue: str | None,
    requests: dict[str, str] | None = None,
    *,
    count: int = 1,
    pod_sets: list[Json] | None = None,
    priority: int | None = None,
    created: float = 0,
    uid: str | None = None,
    active: bool | None = None,
    labels: dict[str, str] | None = None,
    status: Json | None = None,
    min_count: int | None = None,
) -> Json:
    """A Workload; ``created`` is seconds after START (order in the queue)."""
    meta: Json = {
        "name": name,
        "namespace": ns,
        "uid": uid or f"uid-{ns}-{name}",
        "creationTimestamp": rfc3339(START + round(created * SECOND)),
    }
    if labels:
        meta["labels"] = dict(labels)
    if pod_sets is None:
        pod_sets = [pod_set(requests or {"cpu": "1"}, count=count, min_count=min_count)]
    spec: Json = {"podSets": pod_sets}
    if queue is not None:
        spec["queueName"] = queue
    if priority is not None:
        spec["priority"] = priority
    if active is not None:
        spec["active"] = active
    out: Json = {"apiVersion": KUEUE, "kind": "Workload", "metadata": meta, "spec": spec}
    if status is not None:
        out["status"] = status
    return out


def admitted_status(
    cq: str, assignments: list[tuple[str, dict[str, str], dict[str, str], int]]
) -> Json:
    """status of a workload that arrives holding quota: (podSet, flavors, usage, count)."""
    at = rfc3339(START)
    return {
        "admission": {
            "clusterQueue": cq,
            "podSetAssignments": [
                {"name": n, "flavors": dict(f), "resourceUsage": dict(u), "count": c}
                for n, f, u, c in assignments
            ],
        },
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": f"Quota reserved in ClusterQueue {cq}",
                "lastTransitionTime": at,
            },
            {
                "type": "Admitted",
                "status": "True",
                "reason": "Admitted",
                "message": "The workload is admitted",
                "lastTransitionTime": at,
            },
        ],
    }


def admitted_workload(
    ns: str,
    name: str,
    queue: str,
    cq: str,
    usage: dict[str, str],
    *,
    flavor_name: str = "default",
    count: int = 1,
    per_pod: dict[str, str] | None = None,
    **kwargs: Any,
) -> Json:
    """A single-pod-set workload already admitted to ``cq`` with ``usage`` (totals)."""
    flavors = {r: flavor_name for r in usage}
    return workload(
        ns,
        name,
        queue,
        per_pod or usage,
        count=count,
        status=admitted_status(cq, [("main", flavors, usage, count)]),
        **kwargs,
    )


# --------------------------------------------------------------------------- harness


class Cluster:
    """A Scheduler on a ManualClock, fed with manifest dicts."""

    def __init__(self, config: SchedulerConfig | None = None) -> None:
        self.clock = ManualClock(START)
        self.s = Scheduler(self.clock, config)

    # inputs -------------------------------------------------------------------
    def apply(self, *docs: Json) -> Cluster:
        for i, doc in enumerate(docs):
            obj = decode_object(doc, source="test", index=i)
            apply_object(self.s, obj)
            self.s.finalize_evictions()
        return self

    def delete(self, kind: str, ns: str | None, name: str) -> bool:
        done = delete_object(self.s, kind, ns, name)
        self.s.finalize_evictions()
        return done

    def finish(self, key: str, *, failed: bool = False) -> None:
        self.s.finish(key, failed=failed)
        self.s.finalize_evictions()

    def set_active(self, key: str, active: bool) -> None:
        self.s.set_active(key, active)
        self.s.finalize_evictions()

    def advance(self, seconds: float) -> None:
        self.clock.set(self.clock.now() + round(seconds * SECOND))
        fire_due(self.s)
        self.s.finalize_evictions()

    def cycle(self) -> CycleStats:
        return run_cycle(self.s)

    def cycles(self, n: int) -> list[CycleStats]:
        return [run_cycle(self.s) for _ in range(n)]

    def run_until_idle(self, limit: int = 100) -> int:
        """Cycles until one runs without admitting anything (or nothing to pop)."""
        for i in range(limit):
            stats = run_cycle(self.s)
            if not stats.admitted:
                return i + 1
        raise AssertionError("no idle state")

    # reading ------------------------------------------------------------------
    def wl(self, key: str) -> WorkloadState:
        return self.s.objects.workloads[key]

    def status(self, key: str) -> Json:
        return workload_status(self.s.objects.workloads[key])

    def condition(self, key: str, ctype: str) -> Json | None:
        for c in self.status(key).get("conditions", []):
            if c["type"] == ctype:
                return dict(c)
        return None

    def cond(self, key: str, ctype: str) -> tuple[str, str, str] | None:
        """(status, reason, message) of a workload condition."""
        c = self.condition(key, ctype)
        return None if c is None else (c["status"], c["reason"], c["message"])

    def admitted(self, key: str) -> bool:
        return self.s.objects.workloads[key].holds_quota

    def admission(self, key: str) -> Json | None:
        adm: Json | None = self.status(key).get("admission")
        return adm

    def flavors_of(self, key: str) -> list[dict[str, str]]:
        adm = self.admission(key)
        assert adm is not None, f"{key} is not admitted"
        return [ps["flavors"] for ps in adm["podSetAssignments"]]

    def admitted_keys(self) -> list[str]:
        return sorted(k for k, w in self.s.objects.workloads.items() if w.holds_quota)

    def cq_status(self, name: str) -> Json:
        return cluster_queue_status(self.s, name)

    def lq_status(self, key: str) -> Json:
        return local_queue_status(self.s, key)

    def pending(self, cq: str) -> list[str]:
        return [f"{p.namespace}/{p.name}" for p in pending_workloads(self.s, cq)]

    def pending_items(self, cq: str) -> list[PendingItem]:
        return pending_workloads(self.s, cq)

    def usage(self, cq: str, fr: tuple[str, str]) -> int:
        return self.s.quota.usage(cq, fr)

    def message(self, key: str) -> str:
        c = self.condition(key, "QuotaReserved")
        assert c is not None
        return str(c["message"])


def basic_cluster(
    cpu: QuotaSpec = 4, *, strategy: str | None = None, config: SchedulerConfig | None = None
) -> Cluster:
    """Namespace team-a, flavor default, CQ cq-a (cpu), LocalQueue team-a/lq-a."""
    c = Cluster(config)
    c.apply(
        namespace("team-a"),
        flavor("default"),
        simple_cq("cq-a", cpu, strategy=strategy),
        local_queue("team-a", "lq-a", "cq-a"),
    )
    return c
