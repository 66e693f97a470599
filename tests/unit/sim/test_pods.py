"""Plain Pods in `simulate` (docs/simulate.md#pods): with the `pod` integration on, a
Pod that names a LocalQueue is the Workload Kueue's `pod` integration makes, in input
documents and in scenario events, named by its Pod in events; without it, said, never
skipped."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from scheduler.api.decode import ApiError, load_documents
from scheduler.core.workload import FINISHED, QUOTA_RESERVED
from scheduler.sim.runner import Simulation
from tests.unit.runtime import support
from tests.unit.runtime.support import Json, to_yaml


def configuration(*frameworks: str) -> Json:
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta1",
        "kind": "Configuration",
        "integrations": {"frameworks": list(frameworks)},
    }


QUEUES = (
    support.namespace("team"),
    support.flavor(),
    support.cluster_queue("cq", "2"),
    support.local_queue("team", "main", "cq"),
)
SETUP = to_yaml(configuration("batch/job", "pod"), *QUEUES)
JOBS_ONLY = to_yaml(configuration("batch/job"), *QUEUES)


def pod(name: str, *, queue: str = "main", runtime: str = "") -> str:
    doc: Json = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team",
            "labels": {"kueue.x-k8s.io/queue-name": queue} if queue else {},
            "annotations": {"simulation.queuescope.io/runtime": runtime} if runtime else {},
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
        },
    }
    return to_yaml(doc)


def scenario(*events: Json) -> str:
    doc = {
        "apiVersion": "simulation.queuescope.io/v1alpha1",
        "kind": "Scenario",
        "metadata": {"name": "s"},
        "spec": {"untilIdle": True, "events": list(events)},
    }
    return to_yaml(doc)


def simulate(tmp_path: Path, *documents: str) -> Simulation:
    path = tmp_path / "input.yaml"
    path.write_text("---\n".join(documents))
    return Simulation(load_documents([str(path)]), until_idle=True)


def pod_workloads(sim: Simulation) -> dict[str, str]:
    """The Pods' Workloads by Pod name (the name's middle)."""
    keys = sim.scheduler.objects.workloads
    return {k.split("/")[1].removeprefix("pod-")[:-6]: k for k in keys if "/pod-" in k}


def test_a_pod_runs_for_its_runtime_and_an_unqueued_one_is_no_workload(tmp_path: Path) -> None:
    sim = simulate(tmp_path, SETUP, pod("short", runtime="30s"), pod("free", queue=""))
    sim.run()
    found = pod_workloads(sim)
    assert list(found) == ["short"]
    wl = sim.scheduler.objects.workloads[found["short"]]
    assert wl.conditions.is_true(FINISHED)
    finished = wl.conditions.get(FINISHED)
    reserved = wl.conditions.get(QUOTA_RESERVED)
    assert finished is not None and reserved is not None
    assert finished.last_transition - reserved.last_transition == 30_000_000


def test_a_scenario_names_a_pods_workload_by_the_pod(tmp_path: Path) -> None:
    events = scenario({"at": "10s", "finish": "team/sleep", "failed": True})
    sim = simulate(tmp_path, SETUP, pod("sleep"), events)
    sim.run()
    wl = sim.scheduler.objects.workloads[pod_workloads(sim)["sleep"]]
    finished = wl.conditions.get(FINISHED)
    assert finished is not None and finished.reason == "Failed"


def test_without_the_pod_integration_a_queued_pod_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ApiError) as err:
        simulate(tmp_path, JOBS_ONLY, pod("sleep")).run()
    text = str(err.value)
    assert 'input.yaml: document 5 (Pod "sleep")' in text
    assert "metadata.labels[kueue.x-k8s.io/queue-name]" in text
    assert "does not list `pod` in integrations.frameworks" in text
    # An unqueued Pod is not Kueue's, with or without the integration.
    simulate(tmp_path, JOBS_ONLY, pod("free", queue="")).run()


def test_a_scenario_that_applies_a_pod_needs_the_integration_too(tmp_path: Path) -> None:
    late = scenario({"at": "5s", "apply": yaml.safe_load(pod("late"))})
    with pytest.raises(ApiError) as err:
        simulate(tmp_path, JOBS_ONLY, late).run()
    assert 'document 5 (Scenario "s")' in str(err.value)
    assert 'names the LocalQueue "main"' in str(err.value)
    sim = simulate(tmp_path, SETUP, late)
    sim.run()
    assert list(pod_workloads(sim)) == ["late"]


def test_a_scenario_names_a_jobs_workload_by_the_job_too(tmp_path: Path) -> None:
    """The event acts on the Job's Workload (it used to pass validation, then name no
    workload when it fired)."""
    events = scenario({"at": "10s", "finish": "team/etl"})
    sim = simulate(tmp_path, SETUP, to_yaml(support.job("team", "etl", "main")), events)
    sim.run()
    [key] = [k for k in sim.scheduler.objects.workloads if k.startswith("team/job-etl-")]
    assert sim.scheduler.objects.workloads[key].conditions.is_true(FINISHED)
