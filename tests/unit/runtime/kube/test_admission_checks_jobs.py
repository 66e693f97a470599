"""A Job starts with the pod set updates of its admission checks
(docs/scheduling.md#admission-checks): labels and annotations on the pod template, node
selector entries and tolerations, merged over the template and the flavor's placement;
suspended again, the template gets back what the Workload recorded; a conflicting update
keeps the Job suspended."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from scheduler.kubeapi.errors import Json
from scheduler.runtime.kube.placement import (
    CheckUpdates,
    UpdateConflictError,
    admission_labels,
    check_updates,
)
from scheduler.runtime.kube.records import WorkloadRecord
from scheduler.runtime.kube.resources import JOBS, WORKLOADS
from tests.unit.runtime.kube.test_jobs import JOB_KEY, OWN_TOLERATION, Cluster, cluster, patches

UPDATE_TOLERATION = {"key": "provisioned", "operator": "Exists", "effect": "NoSchedule"}


def update(**fields: Any) -> Json:
    return {"name": "main", **fields}


async def admitted_with_updates(*updates: Json) -> tuple[Cluster, str]:
    """The Job's Workload admitted and written, then a check's controller adding its
    pod set updates to the Workload's status (as the server would hold it)."""
    c = await cluster()
    c.fake.server_update(
        JOBS, JOB_KEY, {"spec": {"template": {"metadata": {"labels": {"app": "x"}}}}}
    )
    c.refresh(JOBS, JOB_KEY)
    await c.jobs.reconcile(JOB_KEY)
    c.refresh(JOBS, JOB_KEY)
    wl_key = await c.admit()
    c.fake.server_update(
        WORKLOADS,
        wl_key,
        {
            "status": {
                "admissionChecks": [
                    {
                        "name": "ac-prov",
                        "state": "Ready",
                        "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                        "podSetUpdates": list(updates),
                    }
                ]
            }
        },
    )
    c.refresh(WORKLOADS, wl_key)
    return c, wl_key


async def test_the_job_starts_with_its_checks_pod_set_updates() -> None:
    c, _ = await admitted_with_updates(
        update(
            labels={"provisioned": "yes"},
            annotations={"example.com/request": "pr-1"},
            nodeSelector={"node-pool": "provisioned"},
            tolerations=[UPDATE_TOLERATION],
        ),
        update(name="other", labels={"ignored": "yes"}),  # another pod set: not the Job's
    )
    await c.jobs.reconcile(JOB_KEY)
    template = c.job()["spec"]["template"]
    assert c.job()["spec"]["suspend"] is False
    assert template["metadata"]["labels"] == {
        "app": "x",
        "provisioned": "yes",
        # Kueue's labels of an admitted workload's pods.
        "kueue.x-k8s.io/podset": "main",
        "kueue.x-k8s.io/local-queue-name": "main",
        "kueue.x-k8s.io/cluster-queue-name": "cq",
    }
    assert template["metadata"]["annotations"] == {"example.com/request": "pr-1"}
    assert template["spec"]["nodeSelector"] == {
        "own": "x",
        "zone": "z1",
        "pool": "a",
        "node-pool": "provisioned",
    }
    assert template["spec"]["tolerations"][-1] == UPDATE_TOLERATION

    # Evicted: suspended first, then the template goes back to the Workload's record.
    restore = (await c.stop(c.workload_key()))["spec"]["template"]
    assert restore["metadata"] == {
        "labels": {
            "provisioned": None,
            "kueue.x-k8s.io/podset": None,
            "kueue.x-k8s.io/local-queue-name": None,
            "kueue.x-k8s.io/cluster-queue-name": None,
        },
        "annotations": {"example.com/request": None},
    }
    template = c.job()["spec"]["template"]
    assert template["metadata"]["labels"] == {"app": "x"}
    assert not template["metadata"].get("annotations")
    assert template["spec"]["nodeSelector"] == {"own": "x"}
    assert template["spec"]["tolerations"] == [OWN_TOLERATION]
    # Restored: nothing more to do.
    before = len(patches(c))
    c.refresh(JOBS, JOB_KEY)
    await c.jobs.reconcile(JOB_KEY)
    assert len(patches(c)) == before


async def test_a_conflicting_update_keeps_the_job_suspended(
    caplog: pytest.LogCaptureFixture,
) -> None:
    c, _ = await admitted_with_updates(update(labels={"app": "other"}))
    before = len(patches(c))
    with caplog.at_level(logging.ERROR):
        await c.jobs.reconcile(JOB_KEY)
    assert len(patches(c)) == before
    assert c.job()["spec"]["suspend"] is True
    assert c.jobs.stats.errors == 1
    assert 'admission check "ac-prov" sets labels[app] to "other"' in caplog.text


def test_updates_merge_in_check_order_and_two_checks_may_not_disagree() -> None:
    states: list[Json] = [
        {"name": "a", "podSetUpdates": [update(nodeSelector={"k": "1"})]},
        {"name": "b", "podSetUpdates": [update(nodeSelector={"k": "1"}, labels={"l": "v"})]},
    ]
    merged = check_updates("main", states, CheckUpdates({}, {}, {"own": "x"}, []))
    assert merged.node_selector == {"own": "x", "k": "1"}
    assert merged.labels == {"l": "v"}
    states[1]["podSetUpdates"][0]["nodeSelector"] = {"k": "2"}
    with pytest.raises(UpdateConflictError, match=r'"b" sets nodeSelector\[k\] to "2"'):
        check_updates("main", states, CheckUpdates({}, {}, {}, []))


def test_a_cluster_queue_name_that_is_no_label_value_is_left_out() -> None:
    record = WorkloadRecord.of(
        {
            "metadata": {"name": "w", "namespace": "team"},
            "status": {"admission": {"clusterQueue": "team.a", "podSetAssignments": []}},
        }
    )
    assert admission_labels("main", "lq", record) == {
        "kueue.x-k8s.io/podset": "main",
        "kueue.x-k8s.io/local-queue-name": "lq",
    }
