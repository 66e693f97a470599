"""Small scenarios built as Python data (no YAML), for the forecaster's tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scheduler.api.decode import Decoded, decode_object
from scheduler.sim.runtimes import RUNTIME_ANNOTATION

START = "2026-01-01T00:00:00Z"


@dataclass(frozen=True)
class Job:
    name: str
    at: int  # seconds after the start
    cpu: int
    runtime: int | None  # the true runtime annotation, seconds
    limit: int | None = None  # maximumExecutionTimeSeconds
    user: str = "alice"
    priority: int = 0
    annotation: str | None = None  # the annotation's raw text, instead of `runtime`


def cluster(cpu: int) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ResourceFlavor",
            "metadata": {"name": "f"},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {"name": "f", "resources": [{"name": "cpu", "nominalQuota": cpu}]}
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": "ns"},
            "spec": {"clusterQueue": "cq"},
        },
    ]


def workload(job: Job) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": job.name, "namespace": "ns", "labels": {"user": job.user}}
    raw = job.annotation if job.annotation is not None else job.runtime
    if raw is not None:
        meta["annotations"] = {RUNTIME_ANNOTATION: str(raw)}
    spec: dict[str, Any] = {
        "queueName": "lq",
        "priority": job.priority,
        "podSets": [
            {
                "name": "main",
                "count": job.cpu,
                "template": {
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
                },
            }
        ],
    }
    if job.limit is not None:
        spec["maximumExecutionTimeSeconds"] = job.limit
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": meta,
        "spec": spec,
    }


def scenario(cpu: int, jobs: list[Job], extra: list[dict[str, Any]] | None = None) -> list[Decoded]:
    events: list[dict[str, Any]] = [{"at": f"{j.at}s", "apply": workload(j)} for j in jobs]
    events += extra or []
    docs = [
        *cluster(cpu),
        {
            "apiVersion": "simulation.queuescope.io/v1alpha1",
            "kind": "Scenario",
            "metadata": {"name": "s"},
            "spec": {"startTime": START, "untilIdle": True, "events": events},
        },
    ]
    return [
        Decoded(obj=decode_object(d, source="test.yaml", index=i), source="test.yaml", index=i)
        for i, d in enumerate(docs)
    ]
