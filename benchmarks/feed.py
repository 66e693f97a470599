"""What the benchmark server holds: a cluster of manifests, and many pending workloads.

The cluster (namespaces, a flavor, ClusterQueues, LocalQueues) is written as manifest
files and loaded by the embedded store like any `serve --embedded` input. Pending
workloads at 100k and 1M are not: decoding a Workload manifest costs about 0.5 ms, so
1M would take minutes before the first measurement. They are fed into the scheduler
core in the server process, right after the manifests are applied and before the
engine starts, in one of two ways:

* ``bulk``: one decoded Workload per (namespace, priority), then shallow copies of its
  core state with their own name, uid and creation time, through `Scheduler.set_workload`
  (the core's own entry point). About 30 µs each. Copies share the decoded API object
  and pod specs, so this understates memory; it is what the latency benchmarks use.
* ``decode``: every workload its own manifest, decoded and applied through
  `decode_object` and `apply_object`, exactly as a manifest file would be. Distinct
  objects throughout; the memory benchmark uses it.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from scheduler.api import Workload, decode_object
from scheduler.core.clock import Clock
from scheduler.core.ingest import apply_object, scheduler_config, workload_state
from scheduler.core.metadata import fill_metadata
from scheduler.core.scheduler import Scheduler
from scheduler.core.workload import WorkloadState

KUEUE = "kueue.x-k8s.io/v1beta1"
CLUSTER_QUEUE = "bench"
LOCAL_QUEUE = "main"
PRIORITIES = (0, 50, 100)
HIGH_PRIORITY = 1000  # arrivals that preempt (loop-lag)
FEEDS = ("bulk", "decode")


@dataclass(frozen=True, slots=True)
class Shape:
    """The benchmark cluster: one ClusterQueue shared by `namespaces` LocalQueues."""

    namespaces: int = 10
    cpu_quota: str = "0"  # nothing admits: a stable queue for the latency benchmarks
    strategy: str = "StrictFIFO"
    # "uniform": one cpu each, no execution limit; "mixed": 1 to 8 cpu and a limit of
    # 1 minute to 2 hours (the forecaster's hard case, docs/forecasting.md#cost)
    sizes: str = "uniform"
    preemption: str = "LowerPriority"  # the ClusterQueue's withinClusterQueue policy
    # > 1: that many ClusterQueues in one Cohort, `cpu_quota` shared evenly among them
    # and the namespaces' LocalQueues spread over them in turn (forecast serving's
    # Cohort case, docs/forecasting.md#which-method-by-default)
    cohort_queues: int = 1

    def namespace(self, i: int) -> str:
        return f"team-{i:02d}"

    def cluster_queues(self) -> list[str]:
        if self.cohort_queues <= 1:
            return [CLUSTER_QUEUE]
        return [f"{CLUSTER_QUEUE}-{k}" for k in range(self.cohort_queues)]


def _cluster_queue(shape: Shape, name: str, quota: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "queueingStrategy": shape.strategy,
        "preemption": {"withinClusterQueue": shape.preemption},
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [
                    {"name": "default", "resources": [{"name": "cpu", "nominalQuota": quota}]}
                ],
            }
        ],
    }
    if shape.cohort_queues > 1:
        spec = {"cohort": "pool", **spec}
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def cluster_manifests(shape: Shape) -> str:
    """The cluster as one multi-document YAML text."""
    names = shape.cluster_queues()
    quota = str(int(shape.cpu_quota) // len(names)) if len(names) > 1 else shape.cpu_quota
    docs: list[dict[str, Any]] = [
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        *(_cluster_queue(shape, name, quota) for name in names),
    ]
    for i in range(shape.namespaces):
        ns = shape.namespace(i)
        docs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        docs.append(
            {
                "apiVersion": KUEUE,
                "kind": "LocalQueue",
                "metadata": {"name": LOCAL_QUEUE, "namespace": ns},
                "spec": {"clusterQueue": names[i % len(names)]},
            }
        )
    return yaml.safe_dump_all(docs, sort_keys=False)


def workload_manifest(namespace: str, name: str, priority: int, cpu: str = "1") -> dict[str, Any]:
    owner_uid = f"00000000-0000-4000-8000-{zlib.crc32(f'{namespace}/{name}'.encode()):012d}"
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": name,
                    "uid": owner_uid,
                    "controller": True,
                }
            ],
        },
        "spec": {
            "queueName": LOCAL_QUEUE,
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "registry.example.com/train:1",
                                    "resources": {"requests": {"cpu": cpu}},
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }


MIXED_LIMITS = (60, 300, 900, 1800, 3600, 7200)  # maximumExecutionTimeSeconds, "mixed"


@dataclass(frozen=True, slots=True)
class Size:
    cpu: int = 1
    limit: int | None = None  # maximumExecutionTimeSeconds


def decoded_workload(
    s: Scheduler, namespace: str, name: str, priority: int, size: Size = Size()
) -> Workload:
    manifest = workload_manifest(namespace, name, priority, str(size.cpu))
    if size.limit is not None:
        manifest["spec"]["maximumExecutionTimeSeconds"] = size.limit
    obj = fill_metadata(decode_object(manifest), s.now())
    assert isinstance(obj, Workload)
    return obj


def plan(shape: Shape, count: int, seed: int) -> Iterator[tuple[int, str, int, Size]]:
    """(index, namespace, priority, size) of each pending workload, the same for a seed."""
    rng = random.Random(seed)
    for i in range(count):
        ns, priority = shape.namespace(rng.randrange(shape.namespaces)), rng.choice(PRIORITIES)
        if shape.sizes == "mixed":
            yield i, ns, priority, Size(rng.randint(1, 8), rng.choice(MIXED_LIMITS))
        else:
            yield i, ns, priority, Size()


def feed(s: Scheduler, shape: Shape, count: int, *, how: str = "bulk", seed: int = 1) -> None:
    """Put `count` pending workloads into the ClusterQueue (see the module docstring)."""
    if how == "decode":
        for i, ns, priority, size in plan(shape, count, seed):
            apply_object(s, decoded_workload(s, ns, f"wl-{i:07d}", priority, size))
        s.finalize_evictions()
        return
    if how != "bulk":
        raise ValueError(f"unknown feed {how!r}; expected one of {FEEDS}")
    templates: dict[tuple[str, int, Size], WorkloadState] = {}
    base = s.now() - count  # distinct creation instants, all in the past
    for i, ns, priority, size in plan(shape, count, seed):
        template = templates.get((ns, priority, size))
        if template is None:
            obj = decoded_workload(s, ns, "template", priority, size)
            template = workload_state(obj, s.config, s.now())
            templates[(ns, priority, size)] = template
        wl = template.sibling(f"wl-{i:07d}", f"uid-{i:07d}", base + i)
        s.set_workload(wl)
    s.finalize_evictions()


def loaded_scheduler(clock: Clock, shape: Shape, pending: int) -> Scheduler:
    """A core holding the cluster of `shape` and `pending` bulk-fed workloads."""
    s = Scheduler(clock, scheduler_config(None))
    for doc in yaml.safe_load_all(cluster_manifests(shape)):
        apply_object(s, decode_object(doc))
    feed(s, shape, pending)
    return s
