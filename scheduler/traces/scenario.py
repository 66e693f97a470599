"""A trace as a scenario: Kueue objects for its cluster and one `apply` event per job at
its submission instant (the mapping of docs/simulate.md#importing-traces)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, TextIO

import yaml

from scheduler.api.quantity import Quantity, QuantityError, format_resource, scheduler_value
from scheduler.traces.records import RUNTIME_ANNOTATION, Capacity, Skips, Trace, TraceJob

KUEUE = "kueue.x-k8s.io/v1beta1"
SCENARIO = "simulation.queuescope.io/v1alpha1"
WORKLOAD_PRIORITY_SOURCE = "kueue.x-k8s.io/workloadpriorityclass"
MAX_POD_SETS = 8  # Kueue's limit on pod sets per Workload

_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


@dataclass(slots=True)
class Cluster:
    """The cluster side of the scenario: its objects and what admission can ever give."""

    objects: list[dict[str, Any]]  # flavors, priority classes, cohorts, ClusterQueues
    cluster_queues: list[str]
    default_queue: str  # the ClusterQueue of a LocalQueue with no ClusterQueue of its name
    totals: dict[str, int]  # resource -> sum of nominal quotas: no job larger is admitted
    node_label_keys: set[str]  # node labels some flavor carries
    capacity: Capacity | None = None  # when generated: a pod set must fit one flavor
    source: str = ""  # where the quotas come from

    def queue_for(self, local_queue: str) -> str:
        return local_queue if local_queue in self.cluster_queues else self.default_queue


def _quota(resource: str, value: int) -> dict[str, str]:
    return {"name": resource, "nominalQuota": format_resource(resource, value)}


def cluster_from_capacity(
    capacity: Capacity, name: str, queueing_strategy: str = "BestEffortFIFO"
) -> Cluster:
    """One ClusterQueue `name` holding every flavor's quota in one resource group."""
    resources = capacity.resources()
    objects: list[dict[str, Any]] = []
    for flavor in capacity.flavors:
        selects = {"nodeLabels": dict(flavor.node_labels)} if flavor.node_labels else {}
        objects.append(
            {
                "apiVersion": KUEUE,
                "kind": "ResourceFlavor",
                "metadata": {"name": flavor.name},
                "spec": selects,
            }
        )
    for pc, value in capacity.priorities.items():
        objects.append(
            {
                "apiVersion": KUEUE,
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": pc},
                "value": value,
            }
        )
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "queueingStrategy": queueing_strategy,
        "resourceGroups": [
            {
                "coveredResources": resources,
                "flavors": [
                    {"name": f.name, "resources": [_quota(r, f.quota.get(r, 0)) for r in resources]}
                    for f in capacity.flavors
                ],
            }
        ],
    }
    if capacity.preempt_lower_priority:
        spec["preemption"] = {"withinClusterQueue": "LowerPriority"}
    objects.append(
        {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}
    )
    labels = {k for f in capacity.flavors for k in f.node_labels}
    return Cluster(objects, [name], name, capacity.totals(), labels, capacity, capacity.source)


QUOTA_FILE_KINDS = frozenset(
    {"ResourceFlavor", "ClusterQueue", "Cohort", "WorkloadPriorityClass", "PriorityClass"}
)


class QuotaFileError(ValueError):
    """A quota file that cannot serve: names the document and what is wrong."""


def cluster_from_documents(
    documents: Sequence[dict[str, Any]], source: str, cluster_queue: str | None
) -> Cluster:
    """The cluster of a quota file (already validated as Kueue objects by the caller):
    its documents as they are; LocalQueues go to the ClusterQueue of their own name, else
    to `cluster_queue`, else to the file's only ClusterQueue."""
    queues: list[str] = []
    totals: Counter[str] = Counter()
    labels: set[str] = set()
    for index, doc in enumerate(documents):
        kind = doc.get("kind")
        if kind not in QUOTA_FILE_KINDS:
            raise QuotaFileError(
                f"{source}: document {index}: kind {kind} does not belong in a quota file "
                f"(allowed: {', '.join(sorted(QUOTA_FILE_KINDS))})"
            )
        spec = doc.get("spec") or {}
        if kind == "ResourceFlavor":
            labels.update((spec.get("nodeLabels") or {}).keys())
        if kind == "ClusterQueue":
            queues.append(doc["metadata"]["name"])
            for group in spec.get("resourceGroups") or []:
                for flavor in group.get("flavors") or []:
                    for r in flavor.get("resources") or []:
                        totals[r["name"]] += _value(r["name"], r.get("nominalQuota", 0))
    if not queues:
        raise QuotaFileError(f"{source}: no ClusterQueue")
    default = cluster_queue or (queues[0] if len(queues) == 1 else "")
    if default not in queues:
        raise QuotaFileError(
            f"{source}: name the ClusterQueue for LocalQueues with --cluster-queue "
            f"(one of {', '.join(queues)})"
        )
    return Cluster(
        list(documents), queues, default, dict(totals), labels, source=f"quota file {source}"
    )


def _value(resource: str, raw: Any) -> int:
    try:
        return scheduler_value(resource, Quantity.parse(raw))
    except QuantityError as err:
        raise QuotaFileError(str(err)) from None


@dataclass(frozen=True, slots=True)
class ImportOptions:
    start_at: int = 0  # seconds after the trace's first submission; earlier jobs dropped
    limit: int | None = None  # at most this many jobs, the first submitted


@dataclass(slots=True)
class Imported:
    """The scenario's documents and what was left out on the way. The arrivals stay jobs
    until they are written, one at a time: a trace's Workloads are never all in memory."""

    objects: list[dict[str, Any]]  # everything but the Scenario, in apply order
    head: dict[str, Any]  # the Scenario without its events
    skips: Skips
    arrivals: list[TraceJob] = field(default_factory=list)
    start: int = 0  # Unix time of the scenario's start
    origin: int = 0  # Unix time of the trace's submit time 0
    priorities: dict[str, int] = field(default_factory=dict)
    dropped_requests: Counter[str] = field(default_factory=Counter)  # resource -> jobs
    dropped_constraints: int = 0
    quota_source: str = ""

    @property
    def workloads(self) -> int:
        return len(self.arrivals)

    def events(self) -> Iterator[dict[str, Any]]:
        """The `apply` events of the arrivals, in submission order."""
        for job in self.arrivals:
            created = self.origin + job.submit
            yield {
                "at": f"{created - self.start}s",
                "apply": workload(job, created, self.priorities),
            }

    @property
    def scenario(self) -> dict[str, Any]:
        """The whole Scenario document (events included: for small traces and tests)."""
        spec = {**self.head["spec"], "events": list(self.events())}
        return {**self.head, "spec": spec}

    def summary(self) -> list[str]:
        namespaces = sum(1 for o in self.objects if o["kind"] == "Namespace")
        queues = sum(1 for o in self.objects if o["kind"] == "LocalQueue")
        out = [
            f"imported {self.workloads} workloads into {namespaces} namespaces and "
            f"{queues} LocalQueues; quotas from the {self.quota_source}"
        ]
        out += [
            f"requests for {r} dropped (the quota has none): {n} jobs"
            for r, n in sorted(self.dropped_requests.items())
        ]
        if self.dropped_constraints:
            out.append(
                f"node constraints dropped (no flavor has the label): "
                f"{self.dropped_constraints} jobs"
            )
        return out + self.skips.summary()


def _fits(job: TraceJob, cluster: Cluster) -> bool:
    """Whether admission could ever give the job its requests: within the quota totals
    and, for a generated cluster, each pod set within one flavor it may use."""
    if any(v > cluster.totals.get(r, 0) for r, v in job.total().items()):
        return False
    if cluster.capacity is None:
        return True
    for group in job.pods:
        allowed = [
            f
            for f in cluster.capacity.flavors
            if all(f.node_labels.get(k) in values for k, values in job.node_labels.items())
        ]
        if not any(
            all(v * group.count <= f.quota.get(r, 0) for r, v in group.requests.items())
            for f in allowed
        ):
            return False
    return True


def _restrict(job: TraceJob, cluster: Cluster, imported: Imported) -> TraceJob:
    """The job without requests for resources no quota covers (counted), and without node
    constraints on labels no flavor carries: neither could ever be satisfied."""
    covered = cluster.totals.keys()
    extra = {r for g in job.pods for r in g.requests if r not in covered}
    for r in extra:
        imported.dropped_requests[r] += 1
    labels = {k: v for k, v in job.node_labels.items() if k in cluster.node_label_keys}
    if len(labels) != len(job.node_labels):
        imported.dropped_constraints += 1
    if not extra and len(labels) == len(job.node_labels):
        return job
    pods = tuple(
        replace(g, requests={r: v for r, v in g.requests.items() if r in covered}) for g in job.pods
    )
    return replace(job, pods=pods, node_labels=labels)


def _selected(trace: Trace, options: ImportOptions) -> Iterator[TraceJob]:
    """The jobs from --start-at on, at most --limit of them, in submission order."""
    jobs = sorted(trace.jobs, key=lambda j: (j.submit, j.order))
    if not jobs:
        return
    first = jobs[0].submit + options.start_at
    taken = 0
    for job in jobs:
        if job.submit < first:
            trace.skips.skip("submitted before --start-at")
        elif options.limit is not None and taken >= options.limit:
            trace.skips.skip("after --limit")
        else:
            taken += 1
            yield job


def _pod_spec(job: TraceJob, requests: dict[str, int]) -> dict[str, Any]:
    quantities = {r: format_resource(r, v) for r, v in requests.items()}
    # Extended resources (GPUs) need a limit equal to the request, as in a real pod.
    limits = {r: q for r, q in quantities.items() if "/" in r}
    resources: dict[str, Any] = {"requests": quantities}
    if limits:
        resources["limits"] = limits
    # Only what admission reads: a trace has no images, and every byte counts when the
    # simulator loads tens of thousands of arrivals.
    spec: dict[str, Any] = {"containers": [{"name": "main", "resources": resources}]}
    single = {k: v[0] for k, v in job.node_labels.items() if len(v) == 1}
    several = {k: v for k, v in job.node_labels.items() if len(v) > 1}
    if single:
        spec["nodeSelector"] = single
    if several:
        expressions = [
            {"key": k, "operator": "In", "values": list(v)} for k, v in sorted(several.items())
        ]
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": expressions}]
                }
            }
        }
    return spec


def _rfc3339(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def workload(job: TraceJob, created: int, priorities: dict[str, int]) -> dict[str, Any]:
    """The Workload of a job submitted at Unix time `created`."""
    pod_sets = [
        {
            "name": "main" if len(job.pods) == 1 else f"main-{i}",
            "count": group.count,
            "template": {"spec": _pod_spec(job, group.requests)},
        }
        for i, group in enumerate(job.pods)
    ]
    spec: dict[str, Any] = {"queueName": job.queue, "podSets": pod_sets}
    if job.requested_seconds is not None:
        spec["maximumExecutionTimeSeconds"] = job.requested_seconds
    if job.priority_class is not None and job.priority_class in priorities:
        spec["priorityClassName"] = job.priority_class
        spec["priorityClassSource"] = WORKLOAD_PRIORITY_SOURCE
        spec["priority"] = priorities[job.priority_class]
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {
            "name": job.name,
            "namespace": job.tenant,
            "creationTimestamp": _rfc3339(created),
            "labels": dict(job.labels),
            "annotations": {RUNTIME_ANNOTATION: str(job.runtime)},
        },
        "spec": spec,
    }


def _priorities(cluster: Cluster) -> dict[str, int]:
    return {
        o["metadata"]["name"]: int(o.get("value", 0))
        for o in cluster.objects
        if o["kind"] == "WorkloadPriorityClass"
    }


def build(trace: Trace, cluster: Cluster, options: ImportOptions) -> Imported:
    """The scenario of `trace` on `cluster`: objects, then arrivals as `apply` events."""
    imported = Imported([], {}, trace.skips, origin=trace.origin, priorities=_priorities(cluster))
    imported.quota_source = cluster.source
    queues: dict[tuple[str, str], None] = {}
    start: int | None = None
    for job in _selected(trace, options):
        if start is None:
            start = trace.origin + job.submit
        if len(job.pods) > MAX_POD_SETS:
            trace.skips.skip(f"more than {MAX_POD_SETS} pod sets")
            continue
        restricted = _restrict(job, cluster, imported)
        if not _fits(restricted, cluster):
            trace.skips.skip("larger than the quota: would never be admitted")
            continue
        imported.arrivals.append(restricted)
        queues.setdefault((job.tenant, job.queue), None)
    namespaces = sorted({t for t, _ in queues})
    imported.objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in namespaces
    ]
    imported.objects += cluster.objects
    imported.objects += [
        {
            "apiVersion": KUEUE,
            "kind": "LocalQueue",
            "metadata": {"namespace": t, "name": q},
            "spec": {"clusterQueue": cluster.queue_for(q)},
        }
        for t, q in sorted(queues)
    ]
    imported.start = start if start is not None else trace.origin
    imported.head = {
        "apiVersion": SCENARIO,
        "kind": "Scenario",
        "metadata": {"name": trace.name},
        "spec": {"startTime": _rfc3339(imported.start), "untilIdle": True},
    }
    return imported


def _dump(data: Any) -> str:
    text: str = yaml.dump(data, Dumper=_Dumper, default_flow_style=False, sort_keys=False)
    return text


def write(imported: Imported, out: TextIO, comments: Sequence[str] = ()) -> None:
    """The scenario as multi-document YAML, events written one at a time."""
    for line in comments:
        out.write(f"# {line}\n")
    for obj in imported.objects:
        out.write("---\n")
        out.write(_dump(obj))
    out.write("---\n")
    out.write(_dump({k: v for k, v in imported.head.items() if k != "spec"}))
    out.write("spec:\n")
    for line in _dump(imported.head["spec"]).splitlines():
        out.write(f"  {line}\n")
    if not imported.arrivals:
        out.write("  events: []\n")
        return
    # One event a line, in YAML's flow style (JSON is valid YAML): a trace's tens of
    # thousands of arrivals stay greppable and load fast.
    out.write("  events:\n")
    for event in imported.events():
        out.write(f"  - {json.dumps(event, separators=(', ', ': '))}\n")
