"""The embedded store: manifests loaded, then edits, additions, deletions and bad files."""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from scheduler.api import ApiError
from scheduler.api.workload_names import workload_name
from scheduler.core.clock import MICROS_PER_SECOND, ManualClock, instant_from_datetime
from scheduler.core.cycle import run_cycle
from scheduler.core.metadata import deterministic_uid
from scheduler.core.scheduler import Scheduler
from scheduler.runtime.embedded import EmbeddedStore, RbacObject, find_configuration
from scheduler.runtime.engine import Engine
from tests.unit.runtime.support import (
    KUEUE,
    cluster_queue,
    flavor,
    job,
    jobset,
    local_queue,
    namespace,
    statefulset,
    to_yaml,
    workload,
)

START = instant_from_datetime(datetime(2026, 3, 1, tzinfo=UTC))

RBAC = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "viewer"},
    "rules": [{"apiGroups": ["visibility.kueue.x-k8s.io"], "resources": ["*"], "verbs": ["get"]}],
}
WPC = {
    "apiVersion": KUEUE,
    "kind": "WorkloadPriorityClass",
    "metadata": {"name": "high"},
    "value": 50,
}
SCENARIO = {
    "apiVersion": "simulation.queuescope.io/v1alpha1",
    "kind": "Scenario",
    "metadata": {"name": "ignored"},
    "spec": {"cycles": 1},
}


class Harness:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.clock = ManualClock(START)
        self.scheduler = Scheduler(self.clock)
        self.engine = Engine(self.scheduler)
        self.rbac_calls: list[list[RbacObject]] = []
        self.store = EmbeddedStore([str(root)], self.engine, on_rbac_change=self.rbac_calls.append)

    def write(self, name: str, *docs: dict[str, Any]) -> Path:
        path = self.root / name
        path.write_text(to_yaml(*docs))
        return path

    def check(self) -> bool:
        changed = self.store.check_once()
        self.engine.apply_pending()
        return changed

    def load(self) -> None:
        self.store.load()
        self.engine.apply_pending()


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


def base(h: Harness) -> None:
    # Deliberately named so that the LocalQueue file sorts first: the store applies in
    # dependency order, not file order.
    h.write("a-queues.yaml", local_queue("team", "main", "cq"))
    h.write("b-cluster.yaml", namespace("team"), flavor(), cluster_queue("cq", "0"))


def test_initial_load_applies_in_dependency_order_and_syncs(h: Harness) -> None:
    base(h)
    h.write("c-work.yaml", workload("team", "w", "main"), job("team", "etl", "main"))
    h.write("d-rbac.yaml", RBAC, WPC)
    h.load()
    s = h.scheduler
    assert h.engine.synced
    assert s.queues.locate("team/w") == "cq"
    (job_wl,) = [k for k in s.objects.workloads if k.startswith("team/job-etl-")]
    assert s.queues.locate(job_wl) == "cq"
    # Simulator-style defaults, on the real clock of first sight, 1 ms apart in order.
    w = s.objects.workloads["team/w"]
    assert w.uid == deterministic_uid("team", "w")
    j = s.objects.workloads[job_wl]
    assert START <= w.creation < j.creation
    assert [o.metadata.name for o in h.store.rbac_objects()] == ["viewer"]
    assert len(h.rbac_calls) == 1
    assert h.store.local_queues() == [("team", "main")]
    assert h.store.priority_classes() == {"high": 50}


def test_invalid_file_stops_start_up_naming_file_document_and_field(h: Harness) -> None:
    base(h)
    bad = cluster_queue("broken", "1")
    bad["spec"]["queueingStrategy"] = "Sometimes"
    h.write("z-bad.yaml", namespace("ok"), bad)
    with pytest.raises(ApiError) as caught:
        h.store.load()
    message = str(caught.value)
    assert "z-bad.yaml" in message
    assert "document 1" in message
    assert "queueingStrategy" in message


def test_edits_additions_and_deletions(h: Harness) -> None:
    base(h)
    h.write("c-work.yaml", workload("team", "w1", "main"), workload("team", "w2", "main"))
    h.load()
    s = h.scheduler
    assert {"team/w1", "team/w2"} <= s.objects.workloads.keys()

    # edit: a ClusterQueue's quota
    h.write("b-cluster.yaml", namespace("team"), flavor(), cluster_queue("cq", "7"))
    assert h.check()
    assert s.objects.cluster_queues["cq"].quotas[("default", "cpu")].nominal == 7000

    # addition: a new file with a new LocalQueue and a workload in it
    h.write("e-more.yaml", local_queue("team", "extra", "cq"), workload("team", "w3", "extra"))
    assert h.check()
    assert "team/extra" in s.objects.local_queues
    assert "team/w3" in s.objects.workloads

    # a removed document deletes its object
    h.write("c-work.yaml", workload("team", "w1", "main"))
    assert h.check()
    assert "team/w2" not in s.objects.workloads
    assert "team/w1" in s.objects.workloads

    # a deleted file deletes all of its objects
    (h.root / "e-more.yaml").unlink()
    assert h.check()
    assert "team/extra" not in s.objects.local_queues
    assert "team/w3" not in s.objects.workloads
    assert not h.check()


def test_invalid_file_is_reported_and_its_objects_stay(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    base(h)
    h.write("c-work.yaml", workload("team", "w1", "main"))
    h.load()
    path = h.root / "c-work.yaml"
    broken = workload("team", "w1", "main")
    broken["spec"]["podSets"][0]["count"] = -1
    with caplog.at_level(logging.WARNING):
        h.write("c-work.yaml", broken)
        assert not h.check()
    assert "team/w1" in h.scheduler.objects.workloads  # the previous object stays
    assert str(path) in h.store.errors
    assert "podSets[0].count" in h.store.errors[str(path)]
    logged = [r.getMessage() for r in caplog.records if "manifest-invalid" in r.getMessage()]
    assert logged and str(path) in logged[0] and "document 0" in logged[0]
    # Not-YAML at all: same treatment.
    path.write_text("kind: [unclosed\n")
    assert not h.check()
    assert "invalid YAML" in h.store.errors[str(path)]
    # Fixed: applied, error gone.
    h.write("c-work.yaml", workload("team", "w1", "main"), workload("team", "w2", "main"))
    assert h.check()
    assert "team/w2" in h.scheduler.objects.workloads
    assert h.store.errors == {}


def test_unchanged_content_is_not_applied_again(h: Harness) -> None:
    base(h)
    path = h.write("c-work.yaml", workload("team", "w1", "main"))
    h.load()
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    assert not h.store.check_once()
    assert h.engine.apply_pending() == 0
    # Re-ordering documents of an unchanged object applies nothing either.
    h.write("b-cluster.yaml", flavor(), namespace("team"), cluster_queue("cq", "0"))
    h.store.check_once()
    assert h.engine.apply_pending() == 0


def test_first_sight_time_is_kept_across_edits(h: Harness) -> None:
    base(h)
    h.write("c-work.yaml", workload("team", "w1", "main"))
    h.load()
    s = h.scheduler
    first = s.objects.workloads["team/w1"].creation
    h.clock.set(START + 60 * MICROS_PER_SECOND)
    h.write("c-work.yaml", workload("team", "w1", "main", priority=5))
    assert h.check()
    assert s.objects.workloads["team/w1"].priority == 5
    assert s.objects.workloads["team/w1"].creation == first
    # Gone and back: a new object, first seen now.
    h.write("c-work.yaml", workload("team", "other", "main"))
    assert h.check()
    h.write("c-work.yaml", workload("team", "w1", "main"))
    assert h.check()
    assert s.objects.workloads["team/w1"].creation >= START + 60 * MICROS_PER_SECOND


def test_immutable_update_of_an_admitted_workload_is_rejected(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    h.write("a-queues.yaml", local_queue("team", "main", "cq"))
    h.write("b-cluster.yaml", namespace("team"), flavor(), cluster_queue("cq", "4"))
    h.write("c-work.yaml", workload("team", "w1", "main", cpu="1"))
    h.load()
    s = h.scheduler
    assert run_cycle(s).admitted == ["team/w1"]
    with caplog.at_level(logging.WARNING):
        h.write("c-work.yaml", workload("team", "w1", "main", cpu="2"))
        h.check()
    assert s.objects.workloads["team/w1"].pod_sets[0].per_pod["cpu"] == 1000
    assert any("update-rejected" in r.getMessage() for r in caplog.records)
    assert any("spec.podSets: field is immutable" in r.getMessage() for r in caplog.records)


def test_scenario_is_ignored_with_a_warning_and_rbac_changes_are_reported(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    base(h)
    h.write("d-rbac.yaml", RBAC)
    with caplog.at_level(logging.WARNING):
        h.write("s-scenario.yaml", SCENARIO)
        h.load()
    assert any("kind=Scenario" in r.getMessage() for r in caplog.records)
    assert len(h.rbac_calls) == 1
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "viewers"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "viewer",
        },
        "subjects": [{"kind": "Group", "name": "admins", "apiGroup": "rbac.authorization.k8s.io"}],
    }
    h.write("d-rbac.yaml", RBAC, binding)
    assert h.check()
    assert len(h.rbac_calls) == 2
    assert {o.kind for o in h.rbac_calls[-1]} == {"ClusterRole", "ClusterRoleBinding"}
    # A change elsewhere leaves the RBAC objects, and the callback, alone.
    h.write("c-work.yaml", workload("team", "w9", "main"))
    assert h.check()
    assert len(h.rbac_calls) == 2


def test_job_with_a_missing_priority_class_waits_for_it(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    base(h)
    h.load()
    with caplog.at_level(logging.WARNING):
        h.write("c-jobs.yaml", job("team", "etl", "main", priority_class="high"))
        h.check()
    assert not [k for k in h.scheduler.objects.workloads if "job-etl" in k]
    assert any('WorkloadPriorityClass "high" not found' in r.getMessage() for r in caplog.records)
    assert any("c-jobs.yaml" in r.getMessage() for r in caplog.records)
    h.write("d-classes.yaml", WPC)
    assert h.check()
    (key,) = [k for k in h.scheduler.objects.workloads if "job-etl" in k]
    assert h.scheduler.objects.workloads[key].priority == 50


def test_find_configuration(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(
        to_yaml(
            {
                "apiVersion": "config.kueue.x-k8s.io/v1beta1",
                "kind": "Configuration",
                "queueVisibility": {"updateIntervalSeconds": 2},
            }
        )
    )
    config = find_configuration([str(tmp_path)])
    assert config is not None and config.queue_visibility is not None
    assert find_configuration([str(tmp_path / "config.yaml")]) is not None


async def test_polling_reads_changed_files_off_the_loop(h: Harness) -> None:
    base(h)
    h.load()
    assert not await h.store.check()
    h.write("c-work.yaml", workload("team", "w1", "main"))
    assert await h.store.check()
    h.engine.apply_pending()
    assert "team/w1" in h.scheduler.objects.workloads


def plain_pod(name: str, queue: str = "main") -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": queue} if queue else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team", "labels": labels},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
        },
    }


POD_CONFIGURATION = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta1",
    "kind": "Configuration",
    "integrations": {"frameworks": ["batch/job", "pod"]},
}


def test_pods_are_workloads_with_the_pod_integration(h: Harness) -> None:
    base(h)
    h.write("c-config.yaml", POD_CONFIGURATION)
    h.write("d-pods.yaml", plain_pod("sleep"), plain_pod("unqueued", queue=""))
    h.load()
    (key,) = [k for k in h.scheduler.objects.workloads if k.startswith("team/pod-")]
    assert key.startswith("team/pod-sleep-")
    assert h.scheduler.queues.locate(key) == "cq"


def test_without_the_pod_integration_a_queued_pod_is_refused_by_name(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    base(h)
    h.write("d-pods.yaml", plain_pod("sleep"))
    with pytest.raises(ApiError) as err:
        h.load()
    assert 'd-pods.yaml: document 0 (Pod "sleep")' in str(err.value)
    assert "does not list `pod` in integrations.frameworks" in str(err.value)


STATEFULSET_CONFIGURATION = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta1",
    "kind": "Configuration",
    "integrations": {"frameworks": ["batch/job", "statefulset"]},
}


def test_statefulsets_are_workloads_with_the_statefulset_integration(h: Harness) -> None:
    """docs/simulate.md#statefulsets: the Workload `simulate` makes, named the same; an
    edit to no replicas leaves it no Workload (nothing to admit)."""
    base(h)
    h.write("c-config.yaml", STATEFULSET_CONFIGURATION)
    h.write("d-web.yaml", statefulset("team", "web", "main"), statefulset("team", "free", None))
    h.load()
    name = workload_name("StatefulSet", "apps", "web", deterministic_uid("team", "web"))
    (key,) = [k for k in h.scheduler.objects.workloads if "/statefulset-" in k]
    assert key == f"team/{name}"
    assert h.scheduler.queues.locate(key) == "cq"
    assert h.scheduler.objects.workloads[key].pod_sets[0].count == 3
    h.write("d-web.yaml", statefulset("team", "web", "main", replicas=0))
    assert h.check()
    assert key not in h.scheduler.objects.workloads


def test_without_the_statefulset_integration_a_queued_one_is_refused_by_name(
    h: Harness,
) -> None:
    base(h)
    h.write("d-web.yaml", statefulset("team", "web", "main"))
    with pytest.raises(ApiError) as err:
        h.load()
    assert 'd-web.yaml: document 0 (StatefulSet "web")' in str(err.value)
    assert "does not list `statefulset` in integrations.frameworks" in str(err.value)


def test_jobsets_are_workloads_with_the_jobset_integration(h: Harness) -> None:
    """docs/simulate.md#jobsets: the Workload `simulate` makes, one pod set per
    replicated Job; gone with its file."""
    base(h)
    h.write(
        "c-config.yaml",
        {**STATEFULSET_CONFIGURATION, "integrations": {"frameworks": ["jobset.x-k8s.io/jobset"]}},
    )
    h.write("d-train.yaml", jobset("team", "train", "main"), jobset("team", "free", None))
    h.load()
    uid = deterministic_uid("team", "train")
    key = f"team/{workload_name('JobSet', 'jobset.x-k8s.io', 'train', uid)}"
    assert [k for k in h.scheduler.objects.workloads if "/jobset-" in k] == [key]
    assert [(p.name, p.count) for p in h.scheduler.objects.workloads[key].pod_sets] == [
        ("workers", 2),
        ("driver", 1),
    ]
    (h.root / "d-train.yaml").unlink()
    assert h.check()
    assert key not in h.scheduler.objects.workloads
