"""Trace jobs as a scenario: the objects, the arrivals, what is left out; and the
simulator loads the result."""

from __future__ import annotations

import io

import pytest
import yaml

from scheduler.api.decode import load_yaml
from scheduler.sim.output import build_list
from scheduler.sim.runner import Simulation
from scheduler.traces.records import (
    RUNTIME_ANNOTATION,
    Capacity,
    Flavor,
    PodGroup,
    Skips,
    Trace,
    TraceJob,
)
from scheduler.traces.scenario import (
    ImportOptions,
    QuotaFileError,
    build,
    cluster_from_capacity,
    cluster_from_documents,
    write,
)
from scheduler.traces.swf import CLUSTER_LABEL

ORIGIN = 1_000_000_000  # 2001-09-09T01:46:40Z


def _job(n: int, submit: int, cpus: int = 1, **extra: object) -> TraceJob:
    fields: dict[str, object] = {
        "name": f"job-{n}",
        "order": n,
        "submit": submit,
        "runtime": 60 * n,
        "pods": (PodGroup(cpus, {"cpu": 1000}),),
        "tenant": "user-1",
        "queue": "batch",
    }
    fields.update(extra)
    return TraceJob(**fields)  # type: ignore[arg-type]


def _trace(*jobs: TraceJob) -> Trace:
    return Trace("t", ORIGIN, list(jobs), Skips())


CAPACITY = Capacity([Flavor("default", {"cpu": 4000})], "test")


def _documents(text: str) -> list[dict[str, object]]:
    return [d for d in yaml.safe_load_all(text) if d is not None]


def _reserved_at(text: str) -> dict[str, str | None]:
    """namespace/name -> when the simulator reserved its quota (None: never), from the
    `QuotaReserved=True` condition of its output List."""
    items = build_list(Simulation(load_yaml(text, "t.yaml")).run())["items"]
    return {
        f"{i['metadata']['namespace']}/{i['metadata']['name']}": next(
            (
                c["lastTransitionTime"]
                for c in i["status"].get("conditions", [])
                if c["type"] == "QuotaReserved" and c["status"] == "True"
            ),
            None,
        )
        for i in items
        if i["kind"] == "Workload"
    }


def test_objects_and_arrivals() -> None:
    trace = _trace(
        _job(2, 130, requested_seconds=600, labels={"a": "b"}),
        _job(1, 100, cpus=2),
        _job(3, 130, tenant="user-2", queue="q-1d"),
    )
    imported = build(trace, cluster_from_capacity(CAPACITY, "cq"), ImportOptions())
    kinds = [
        (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in imported.objects
    ]
    assert kinds == [
        ("Namespace", None, "user-1"),
        ("Namespace", None, "user-2"),
        ("ResourceFlavor", None, "default"),
        ("ClusterQueue", None, "cq"),
        ("LocalQueue", "user-1", "batch"),
        ("LocalQueue", "user-2", "q-1d"),
    ]
    cq = imported.objects[3]["spec"]
    assert cq["resourceGroups"] == [
        {
            "coveredResources": ["cpu"],
            "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "4"}]}],
        }
    ]
    assert cq["queueingStrategy"] == "BestEffortFIFO"
    spec = imported.scenario["spec"]
    assert spec["startTime"] == "2001-09-09T01:48:20Z"  # the first submission
    assert spec["untilIdle"] is True
    events = spec["events"]
    # submission order; equal submit times keep file order
    assert [(e["at"], e["apply"]["metadata"]["name"]) for e in events] == [
        ("0s", "job-1"),
        ("30s", "job-2"),
        ("30s", "job-3"),
    ]
    wl = events[1]["apply"]
    assert wl["metadata"]["creationTimestamp"] == "2001-09-09T01:48:50Z"
    assert wl["metadata"]["annotations"] == {RUNTIME_ANNOTATION: "120"}
    assert wl["metadata"]["labels"] == {"a": "b"}
    assert wl["spec"]["maximumExecutionTimeSeconds"] == 600
    assert wl["spec"]["podSets"][0]["count"] == 1
    assert "maximumExecutionTimeSeconds" not in events[0]["apply"]["spec"]
    assert imported.workloads == 3


def test_written_scenario_reads_back_and_runs_in_the_simulator() -> None:
    trace = _trace(_job(1, 0, cpus=3), _job(2, 10, cpus=3), _job(3, 20, cpus=1))
    imported = build(trace, cluster_from_capacity(CAPACITY, "cq"), ImportOptions())
    out = io.StringIO()
    write(imported, out, ["made by a test"])
    text = out.getvalue()
    assert text.startswith("# made by a test\n---\n")
    docs = _documents(text)
    assert docs[:-1] == imported.objects
    assert docs[-1] == imported.scenario
    # 4 cpus: job-1 (3) is admitted at once; job-2 (3) waits until job-1's runtime (60 s)
    # is over; job-3 (1) passes it on arrival (BestEffortFIFO). Start: 01:46:40.
    assert _reserved_at(text) == {
        "user-1/job-1": "2001-09-09T01:46:40Z",
        "user-1/job-2": "2001-09-09T01:47:40Z",
        "user-1/job-3": "2001-09-09T01:47:00Z",
    }


def test_start_at_and_limit_select_by_submission() -> None:
    trace = _trace(*(_job(n, 10 * n) for n in range(1, 7)))
    imported = build(
        trace, cluster_from_capacity(CAPACITY, "cq"), ImportOptions(start_at=25, limit=2)
    )
    events = imported.scenario["spec"]["events"]
    assert [e["apply"]["metadata"]["name"] for e in events] == ["job-4", "job-5"]
    assert [e["at"] for e in events] == ["0s", "10s"]  # the first imported job starts it
    assert imported.scenario["spec"]["startTime"] == "2001-09-09T01:47:20Z"
    assert dict(imported.skips.reasons) == {"submitted before --start-at": 3, "after --limit": 1}


def test_jobs_larger_than_the_quota_or_a_flavor_are_skipped() -> None:
    capacity = Capacity(
        [
            Flavor("a", {"cpu": 4000}, {CLUSTER_LABEL: "a"}),
            Flavor("b", {"cpu": 2000}, {CLUSTER_LABEL: "b"}),
        ],
        "test",
    )
    trace = _trace(
        _job(1, 0, cpus=4),
        _job(2, 0, cpus=5),  # more than one flavor holds
        _job(3, 0, cpus=7),  # more than both
        _job(4, 0, cpus=3, node_labels={CLUSTER_LABEL: ("b",)}),  # more than b holds
        _job(5, 0, cpus=2, node_labels={CLUSTER_LABEL: ("b",)}),
    )
    imported = build(trace, cluster_from_capacity(capacity, "cq"), ImportOptions())
    names = [e["apply"]["metadata"]["name"] for e in imported.scenario["spec"]["events"]]
    assert names == ["job-1", "job-5"]
    assert imported.skips.reasons["larger than the quota: would never be admitted"] == 3
    pod = imported.scenario["spec"]["events"][1]["apply"]["spec"]["podSets"][0]["template"]
    assert pod["spec"]["nodeSelector"] == {CLUSTER_LABEL: "b"}


def test_uncovered_requests_and_unknown_node_labels_are_dropped_and_counted() -> None:
    job = _job(
        1,
        0,
        pods=(PodGroup(1, {"cpu": 1000, "memory": 2**30}),),
        node_labels={"elsewhere": ("x",)},
    )
    imported = build(_trace(job), cluster_from_capacity(CAPACITY, "cq"), ImportOptions())
    pod = imported.scenario["spec"]["events"][0]["apply"]["spec"]["podSets"][0]["template"]
    assert pod["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1"}}
    assert "nodeSelector" not in pod["spec"]
    assert dict(imported.dropped_requests) == {"memory": 1}
    assert imported.dropped_constraints == 1
    summary = imported.summary()
    assert "requests for memory dropped (the quota has none): 1 jobs" in summary
    assert "node constraints dropped (no flavor has the label): 1 jobs" in summary


def test_several_allowed_values_become_node_affinity_and_gpus_get_limits() -> None:
    capacity = Capacity(
        [
            Flavor("t4", {"cpu": 8000, "nvidia.com/gpu": 4}, {"m": "T4"}),
            Flavor("v100", {"cpu": 8000, "nvidia.com/gpu": 4}, {"m": "V100"}),
        ],
        "test",
        priorities={"high": 1000},
        preempt_lower_priority=True,
    )
    job = _job(
        1,
        0,
        pods=(PodGroup(1, {"cpu": 1000, "nvidia.com/gpu": 2}),),
        node_labels={"m": ("T4", "V100")},
        priority_class="high",
    )
    cluster = cluster_from_capacity(capacity, "cq")
    imported = build(_trace(job), cluster, ImportOptions())
    wl = imported.scenario["spec"]["events"][0]["apply"]
    pod = wl["spec"]["podSets"][0]["template"]["spec"]
    assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "m", "operator": "In", "values": ["T4", "V100"]}]}
        ]
    }
    assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert wl["spec"]["priorityClassName"] == "high"
    assert wl["spec"]["priority"] == 1000
    kinds = [o["kind"] for o in imported.objects]
    assert "WorkloadPriorityClass" in kinds
    cq = next(o for o in imported.objects if o["kind"] == "ClusterQueue")
    assert cq["spec"]["preemption"] == {"withinClusterQueue": "LowerPriority"}
    out = io.StringIO()
    write(imported, out)
    items = build_list(Simulation(load_yaml(out.getvalue(), "t.yaml")).run())["items"]
    admission = next(i for i in items if i["kind"] == "Workload")["status"]["admission"]
    assert admission["podSetAssignments"][0]["flavors"] == {"cpu": "t4", "nvidia.com/gpu": "t4"}


QUOTA_FILE = [
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "f"}},
    *(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ClusterQueue",
            "metadata": {"name": name},
            "spec": {
                "cohort": "all",
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {"name": "f", "resources": [{"name": "cpu", "nominalQuota": q}]}
                        ],
                    }
                ],
            },
        }
        for name, q in (("q-1d", "2"), ("rest", "1500m"))
    ),
]


def test_quota_file_routes_local_queues_by_name() -> None:
    cluster = cluster_from_documents(QUOTA_FILE, "quota.yaml", "rest")
    assert cluster.totals == {"cpu": 3500}
    trace = _trace(_job(1, 0, queue="q-1d"), _job(2, 0, queue="batch"), _job(3, 0, cpus=4))
    imported = build(trace, cluster, ImportOptions())
    lqs = {
        o["metadata"]["name"]: o["spec"]["clusterQueue"]
        for o in imported.objects
        if o["kind"] == "LocalQueue"
    }
    assert lqs == {"q-1d": "q-1d", "batch": "rest"}
    assert imported.skips.reasons["larger than the quota: would never be admitted"] == 1
    assert imported.quota_source == "quota file quota.yaml"


def test_quota_file_errors() -> None:
    with pytest.raises(QuotaFileError, match="name the ClusterQueue for LocalQueues"):
        cluster_from_documents(QUOTA_FILE, "q.yaml", None)
    with pytest.raises(QuotaFileError, match="no ClusterQueue"):
        cluster_from_documents(QUOTA_FILE[:1], "q.yaml", None)
    with pytest.raises(QuotaFileError, match="document 0: kind LocalQueue does not belong"):
        cluster_from_documents([{"kind": "LocalQueue", "metadata": {"name": "x"}}], "q.yaml", None)
    assert cluster_from_documents(QUOTA_FILE[:2], "q.yaml", None).default_queue == "q-1d"


def test_an_empty_trace_is_an_empty_scenario() -> None:
    imported = build(_trace(), cluster_from_capacity(CAPACITY, "cq"), ImportOptions())
    out = io.StringIO()
    write(imported, out)
    assert _documents(out.getvalue())[-1]["spec"]["events"] == []
    assert imported.scenario["spec"]["startTime"] == "2001-09-09T01:46:40Z"
