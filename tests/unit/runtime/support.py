"""Helpers for the runtime tests: manifests as dicts and YAML, schedulers, bounded waits.

Every wait is bounded (a test fails rather than hangs) and nothing asserts on elapsed
wall-clock time: timing figures are recorded, not checked.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import Callable
from typing import Any

import yaml

from scheduler.api import Configuration, Workload, decode_object
from scheduler.core.ingest import apply_object, scheduler_config, workload_state
from scheduler.core.scheduler import Scheduler
from scheduler.runtime.clock import SystemClock

Json = dict[str, Any]
KUEUE = "kueue.x-k8s.io/v1beta1"
WAIT = 10.0  # seconds: generous, only reached when something is broken


def namespace(name: str) -> Json:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def flavor(name: str = "default") -> Json:
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}}


def cluster_queue(
    name: str, cpu: str = "4", *, strategy: str = "BestEffortFIFO", flavor_name: str = "default"
) -> Json:
    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "queueingStrategy": strategy,
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": flavor_name, "resources": [{"name": "cpu", "nominalQuota": cpu}]}
                    ],
                }
            ],
        },
    }


def local_queue(ns: str, name: str, cq: str) -> Json:
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"clusterQueue": cq},
    }


def one_queue(cpu: str = "2", *, strategy: str = "BestEffortFIFO") -> list[Json]:
    """Namespace `team`, flavor `default`, ClusterQueue `cq` of `cpu`, LocalQueue `main`."""
    return [
        namespace("team"),
        flavor(),
        cluster_queue("cq", cpu, strategy=strategy),
        local_queue("team", "main", "cq"),
    ]


def workload(
    ns: str,
    name: str,
    queue: str,
    cpu: str = "1",
    *,
    priority: int | None = None,
    creation: str | None = None,
) -> Json:
    meta: Json = {"name": name, "namespace": ns}
    if creation is not None:
        meta["creationTimestamp"] = creation
    spec: Json = {
        "queueName": queue,
        "podSets": [
            {
                "name": "main",
                "count": 1,
                "template": {
                    "spec": {
                        "containers": [
                            {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}
                        ]
                    }
                },
            }
        ],
    }
    if priority is not None:
        spec["priority"] = priority
    return {"apiVersion": KUEUE, "kind": "Workload", "metadata": meta, "spec": spec}


def job(ns: str, name: str, queue: str | None, cpu: str = "1", priority_class: str = "") -> Json:
    labels: dict[str, str] = {}
    if queue is not None:
        labels["kueue.x-k8s.io/queue-name"] = queue
    if priority_class:
        labels["kueue.x-k8s.io/priority-class"] = priority_class
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}
                    ],
                }
            }
        },
    }


def statefulset(
    ns: str, name: str, queue: str | None, cpu: str = "1", *, replicas: int = 3, **annotations: str
) -> Json:
    """An apps/v1 StatefulSet of `replicas` Pods of `cpu` each (docs/simulate.md#statefulsets),
    labelled as `job` labels a Job."""
    made = job(ns, name, queue, cpu)
    template = made["spec"]["template"]
    del template["spec"]["restartPolicy"]  # a StatefulSet's Pods always restart
    template["metadata"] = {"labels": {"app": name}}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {**made["metadata"], "annotations": annotations},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": template,
        },
    }


def jobset(
    ns: str, name: str, queue: str | None, cpu: str = "1", *, replicas: int = 2, **annotations: str
) -> Json:
    """A JobSet (docs/simulate.md#jobsets) of a replicated Job `workers` of `replicas`
    one-Pod Jobs and one `driver`, each Pod of `cpu`, labelled as `job` labels a Job."""
    made = job(ns, name, queue, cpu)

    def replicated(role: str, count: int) -> Json:
        return {"name": role, "replicas": count, "template": {"spec": copy.deepcopy(made["spec"])}}

    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {**made["metadata"], "annotations": annotations},
        "spec": {"replicatedJobs": [replicated("workers", replicas), replicated("driver", 1)]},
    }


def configuration(body: Json) -> Configuration:
    obj = decode_object(
        {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration", **body}
    )
    assert isinstance(obj, Configuration)
    return obj


def decode(data: Json) -> Any:
    return decode_object(data)


def to_yaml(*docs: Json) -> str:
    return yaml.safe_dump_all(list(docs), sort_keys=False)


def real_scheduler(config: Json | None = None) -> Scheduler:
    cfg = scheduler_config(configuration(config) if config is not None else None)
    return Scheduler(SystemClock(), cfg)


def cluster(s: Scheduler, *objects: Json) -> None:
    """Apply objects straight to the core (set-up before an engine runs)."""
    for data in objects:
        apply_object(s, decode_object(data))
    s.finalize_evictions()


def bulk_workloads(s: Scheduler, ns: str, queue: str, count: int, *, start: int = 0) -> None:
    """`count` pending workloads through the core's own entry point, without decoding
    each (decoding 100k manifests would dominate the test)."""
    obj = decode_object(workload(ns, "template", queue))
    assert isinstance(obj, Workload)
    template = workload_state(obj, s.config, s.now())
    base = template.creation
    for i in range(start, start + count):
        wl = template.sibling(f"w{i:06d}", f"uid-{i:06d}", base + i)
        s.set_workload(wl)


async def eventually(predicate: Callable[[], bool], timeout: float = WAIT) -> None:
    """Poll until `predicate()` holds; fail after `timeout` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


class LoopTurns:
    """Counts the event loop's turns while entered: a task that adds one to `count` and
    yields, again and again (work done between two counts ran in one turn)."""

    def __init__(self) -> None:
        self.count = 0
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> LoopTurns:
        self._task = asyncio.create_task(self._run())
        await asyncio.sleep(0)  # let it start
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            self.count += 1
            await asyncio.sleep(0)
