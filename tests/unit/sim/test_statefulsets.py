"""StatefulSets in `simulate` (docs/simulate.md#statefulsets): with the `statefulset`
integration on, a StatefulSet that names a LocalQueue is one Workload of its replicas,
a serving workload that holds its quota until a `finish` event (naming it by the
StatefulSet) or its runtime annotation ends it; scaled to zero by an event it is held
and its quota freed; without the integration, said, never skipped."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from scheduler.api.decode import ApiError
from scheduler.core.clock import MICROS_PER_SECOND
from scheduler.core.workload import FINISHED, QUOTA_RESERVED, WorkloadState
from scheduler.sim.runner import Simulation
from tests.unit.runtime import support
from tests.unit.runtime.support import Json, to_yaml
from tests.unit.sim.test_pods import configuration, scenario, simulate

SCALED_TO_ZERO = "StatefulSet scaled to zero; workload on hold"  # Kueue's message
# Four cpus: the StatefulSet's three replicas leave too little for a 2-cpu Job.
QUEUES = support.one_queue("4")
SETUP = to_yaml(configuration("batch/job", "statefulset"), *QUEUES)
JOBS_ONLY = to_yaml(configuration("batch/job"), *QUEUES)


def web(*, replicas: int = 3, runtime: str = "") -> Json:
    annotations = {"simulation.queuescope.io/runtime": runtime} if runtime else {}
    return support.statefulset("team", "web", "main", replicas=replicas, **annotations)


def etl() -> str:
    return to_yaml(support.job("team", "etl", "main", "2"))


def workload(sim: Simulation, prefix: str) -> WorkloadState:
    [wl] = [w for k, w in sim.scheduler.objects.workloads.items() if k.startswith(prefix)]
    return wl


def reserved_at(wl: WorkloadState) -> int | None:
    """Seconds from the start to the workload's last QuotaReserved=True, None if never."""
    condition = wl.conditions.get(QUOTA_RESERVED)
    if condition is None or condition.status != "True":
        return None
    return condition.last_transition // MICROS_PER_SECOND


def ran(tmp_path: Path, *documents: str) -> Simulation:
    sim = simulate(tmp_path, *documents)
    sim.run()
    return sim


def test_the_statefulset_holds_quota_until_its_finish_event(tmp_path: Path) -> None:
    events = scenario({"at": "10m", "finish": "team/web"})
    sim = ran(tmp_path, SETUP, to_yaml(web()), etl(), events)
    serving = workload(sim, "team/statefulset-web-")
    assert serving.pod_sets[0].count == 3
    assert serving.conditions.is_true(FINISHED)
    job = workload(sim, "team/job-etl-")
    start = reserved_at(serving)
    assert start is not None
    # The Job waited behind the StatefulSet until the event freed its quota.
    assert reserved_at(job) == start + 600


def test_the_runtime_annotation_ends_it_too(tmp_path: Path) -> None:
    sim = ran(tmp_path, SETUP, to_yaml(web(runtime="5m")), etl())
    serving = workload(sim, "team/statefulset-web-")
    finished = serving.conditions.get(FINISHED)
    start = reserved_at(serving)
    assert finished is not None and finished.reason == "Succeeded" and start is not None
    assert finished.last_transition // MICROS_PER_SECOND == start + 300
    assert reserved_at(workload(sim, "team/job-etl-")) == start + 300


def test_a_serving_workload_runs_until_told_otherwise(tmp_path: Path) -> None:
    sim = ran(tmp_path, SETUP, to_yaml(web()), etl())
    assert not workload(sim, "team/statefulset-web-").finished
    assert reserved_at(workload(sim, "team/job-etl-")) is None


def test_scaled_to_zero_by_an_event_it_is_held_and_back_up_it_is_let_go(
    tmp_path: Path,
) -> None:
    """As in a cluster (docs/cluster.md#statefulsets): the hold frees its quota at once,
    without an eviction; scaled up again it waits for quota like any workload."""
    down = {"at": "10m", "apply": web(replicas=0)}
    held = ran(tmp_path, SETUP, to_yaml(web()), etl(), scenario(down))
    serving = workload(held, "team/statefulset-web-")
    reservation = serving.conditions.get(QUOTA_RESERVED)
    assert reservation is not None
    assert (reservation.status, reservation.reason) == ("False", "OnHold")
    assert reservation.message == SCALED_TO_ZERO
    assert serving.admission is None and not serving.finished
    start = reservation.last_transition // MICROS_PER_SECOND - 600
    assert reserved_at(workload(held, "team/job-etl-")) == start + 600
    # Back up at 20m it waits behind the Job, which finishes at 30m.
    up = {"at": "20m", "apply": web()}
    done = {"at": "30m", "finish": "team/etl"}
    sim = ran(tmp_path, SETUP, to_yaml(web()), etl(), scenario(down, up, done))
    assert reserved_at(workload(sim, "team/statefulset-web-")) == start + 1800


def test_no_replicas_make_no_workload(tmp_path: Path) -> None:
    sim = ran(tmp_path, SETUP, to_yaml(web(replicas=0)), etl())
    assert [k for k in sim.scheduler.objects.workloads if "statefulset" in k] == []
    # Nor is it an error without the integration: nothing would run in a cluster either.
    ran(tmp_path, JOBS_ONLY, to_yaml(web(replicas=0)))


def test_without_the_integration_a_queued_statefulset_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ApiError) as err:
        ran(tmp_path, JOBS_ONLY, to_yaml(web()))
    text = str(err.value)
    assert 'input.yaml: document 5 (StatefulSet "web")' in text
    assert "metadata.labels[kueue.x-k8s.io/queue-name]" in text
    assert "does not list `statefulset` in integrations.frameworks" in text
    # An unqueued one is not Kueue's, with or without the integration.
    ran(tmp_path, JOBS_ONLY, to_yaml(support.statefulset("team", "free", None)))


def test_a_scenario_that_applies_a_statefulset_needs_the_integration_too(
    tmp_path: Path,
) -> None:
    late = scenario({"at": "5s", "apply": yaml.safe_load(to_yaml(web()))})
    with pytest.raises(ApiError) as err:
        ran(tmp_path, JOBS_ONLY, late)
    text = str(err.value)
    assert 'document 5 (Scenario "s")' in text
    assert "spec.events[0].apply.metadata.labels[kueue.x-k8s.io/queue-name]" in text
    assert "`statefulset`" in text
    # An event may name the Workload by a StatefulSet that a later event applies.
    finish = {"at": "10m", "finish": "team/web"}
    late = scenario({"at": "5s", "apply": yaml.safe_load(to_yaml(web()))}, finish)
    sim = ran(tmp_path, SETUP, late)
    applied = workload(sim, "team/statefulset-web-")
    assert applied.pod_sets[0].count == 3
    assert applied.finished


def test_a_new_count_while_it_holds_quota_is_a_rejected_update(tmp_path: Path) -> None:
    """As cluster mode's webhook refuses it (docs/cluster.md#statefulsets)."""
    grown = scenario({"at": "10m", "apply": web(replicas=4)})
    sim = ran(tmp_path, SETUP, to_yaml(web()), grown)
    [rejected] = sim.rejected_updates
    assert rejected.startswith("event 0 (Workload statefulset-web-")
    assert rejected.endswith("update rejected: spec.podSets: field is immutable")
    assert workload(sim, "team/statefulset-web-").pod_sets[0].count == 3
