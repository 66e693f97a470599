"""JobSets in `simulate` (docs/simulate.md#jobsets): with the integration on, a JobSet
that names a LocalQueue is one Workload of a pod set per replicated Job, admitted all or
none, ended by a `finish` event naming the JobSet or by its runtime annotation; without
the integration, said, never skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.api.decode import ApiError
from scheduler.core.workload import FINISHED
from tests.unit.runtime import support
from tests.unit.runtime.support import to_yaml
from tests.unit.sim.test_pods import configuration, scenario
from tests.unit.sim.test_statefulsets import ran, reserved_at, workload

# Four cpus: the JobSet's three Pods leave too little for a 2-cpu Job.
QUEUES = support.one_queue("4")
SETUP = to_yaml(configuration("batch/job", "jobset.x-k8s.io/jobset"), *QUEUES)


def etl() -> str:
    return to_yaml(support.job("team", "etl", "main", "2"))


def test_a_jobset_holds_its_quota_until_a_finish_event_names_it(tmp_path: Path) -> None:
    events = scenario({"at": "10m", "finish": "team/train"})
    sim = ran(tmp_path, SETUP, to_yaml(support.jobset("team", "train", "main")), etl(), events)
    trained = workload(sim, "team/jobset-train-")
    assert [(p.name, p.count) for p in trained.pod_sets] == [("workers", 2), ("driver", 1)]
    assert trained.conditions.is_true(FINISHED)
    start = reserved_at(trained)
    assert start is not None
    # The Job waited behind the JobSet until the event freed its quota.
    assert reserved_at(workload(sim, "team/job-etl-")) == start + 600


def test_all_or_none(tmp_path: Path) -> None:
    """Five workers and a driver are more than four cpus: none of it is admitted."""
    wide = support.jobset("team", "train", "main", replicas=5)
    sim = ran(tmp_path, SETUP, to_yaml(wide), etl())
    assert reserved_at(workload(sim, "team/jobset-train-")) is None
    assert reserved_at(workload(sim, "team/job-etl-")) is not None


def test_the_runtime_annotation_ends_it(tmp_path: Path) -> None:
    timed = support.jobset("team", "train", "main", **{"simulation.queuescope.io/runtime": "5m"})
    sim = ran(tmp_path, SETUP, to_yaml(timed))
    trained = workload(sim, "team/jobset-train-")
    finished = trained.conditions.get(FINISHED)
    assert finished is not None and finished.reason == "Succeeded"


def test_without_the_integration_a_queued_jobset_is_refused_by_name(tmp_path: Path) -> None:
    jobs_only = to_yaml(configuration("batch/job"), *QUEUES)
    with pytest.raises(ApiError) as err:
        ran(tmp_path, jobs_only, to_yaml(support.jobset("team", "train", "main")))
    assert 'JobSet "train"' in str(err.value)
    assert "does not list `jobset.x-k8s.io/jobset` in integrations.frameworks" in str(err.value)


def test_a_bad_jobset_is_refused_naming_the_field(tmp_path: Path) -> None:
    bad = support.jobset("team", "train", "main")
    bad["spec"]["replicatedJobs"][1]["name"] = "workers"
    bad["spec"]["replicatedJobs"][0]["replicas"] = -1
    with pytest.raises(ApiError) as err:
        ran(tmp_path, SETUP, to_yaml(bad))
    said = str(err.value)
    assert 'spec.replicatedJobs[1].name: Duplicate value: "workers"' in said
    assert "spec.replicatedJobs[0].replicas: Invalid value: -1" in said
