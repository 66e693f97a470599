"""objectRetentionPolicies in cluster mode (docs/cluster.md#object-retention): which
object is deleted, from when, with which preconditions, and what the controller does
with conflicts, errors, changes of state and leadership. On the in-memory API server;
the real one is in tests/e2e/test_object_retention.py."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from scheduler.api.config import ObjectRetentionPolicies, WorkloadRetentionPolicy
from scheduler.kubeapi.errors import Json
from scheduler.runtime.kube import retention as retention_module
from scheduler.runtime.kube.leader_io import LeaderIO
from scheduler.runtime.kube.records import WorkloadRecord
from scheduler.runtime.kube.resources import JOBS, PODS, WORKLOADS
from scheduler.runtime.kube.retention import (
    RetentionController,
    RetentionPolicy,
    deletion_of,
)
from scheduler.runtime.kube.store import KubeStore
from tests.unit.runtime.kube.fakes import (
    FakeKube,
    FreeBucket,
    seed_cluster,
    status_error,
    synced_store,
    until,
)
from tests.unit.runtime.support import workload

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
POLICY = RetentionPolicy(after_finished=10 * MINUTE, after_deactivated_by_kueue=5 * MINUTE)
JOB_OWNER = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "name": "j",
    "uid": "job-uid",
    "controller": True,
    "blockOwnerDeletion": True,
}


def stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def cond(type_: str, reason: str, at: datetime = T0, status: str = "True") -> Json:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": "",
        "lastTransitionTime": stamp(at),
    }


def finished(at: datetime = T0) -> Json:
    return {"status": {"conditions": [cond("Finished", "Succeeded", at)]}}


def deactivated(reason: str = "DeactivatedDueToRequeuingLimitExceeded", at: datetime = T0) -> Json:
    return {"spec": {"active": False}, "status": {"conditions": [cond("Evicted", reason, at)]}}


def record(patch: Json, *, owners: list[Json] | None = None) -> WorkloadRecord:
    obj = workload("team", "w1", "main")
    obj["metadata"].update(uid="wl-uid", resourceVersion="7")
    if owners:
        obj["metadata"]["ownerReferences"] = owners
    obj.setdefault("spec", {}).update(patch.get("spec", {}))
    if "status" in patch:
        obj["status"] = patch["status"]
    return WorkloadRecord.of(obj)


class TestPolicy:
    def test_none_without_a_workloads_policy(self) -> None:
        assert RetentionPolicy.of(None) is None
        assert RetentionPolicy.of(ObjectRetentionPolicies()) is None
        empty = ObjectRetentionPolicies(workloads=WorkloadRetentionPolicy())
        assert RetentionPolicy.of(empty) is None

    def test_the_durations(self) -> None:
        policies = ObjectRetentionPolicies.model_validate(
            {"workloads": {"afterFinished": "1h30m", "afterDeactivatedByKueue": "0s"}}
        )
        assert RetentionPolicy.of(policies) == RetentionPolicy(timedelta(minutes=90), timedelta(0))


class TestDeletionOf:
    def test_a_finished_workload_itself_from_its_finished_condition(self) -> None:
        deletion = deletion_of(record(finished()), POLICY)
        assert deletion is not None
        assert (deletion.resource, deletion.namespace, deletion.name) == (WORKLOADS, "team", "w1")
        assert deletion.due == T0 + 10 * MINUTE
        assert deletion.path == WORKLOADS.item("w1", "team")
        assert deletion.options() == {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": "Background",
            "preconditions": {"uid": "wl-uid", "resourceVersion": "7"},
        }

    def test_a_finished_workload_of_a_job_is_still_the_workload(self) -> None:
        deletion = deletion_of(record(finished(), owners=[JOB_OWNER]), POLICY)
        assert deletion is not None and deletion.resource is WORKLOADS

    def test_finished_without_after_finished_is_kept_even_if_deactivated(self) -> None:
        both = {
            "spec": {"active": False},
            "status": {
                "conditions": [
                    cond("Finished", "Succeeded"),
                    cond("Evicted", "DeactivatedDueToRequeuingLimitExceeded"),
                ]
            },
        }
        policy = RetentionPolicy(after_deactivated_by_kueue=MINUTE)
        assert deletion_of(record(both, owners=[JOB_OWNER]), policy) is None

    def test_a_finished_condition_that_is_false_does_not_count(self) -> None:
        patch = {"status": {"conditions": [cond("Finished", "Succeeded", status="False")]}}
        assert deletion_of(record(patch), POLICY) is None

    def test_deactivated_by_kueue_deletes_the_owning_job_from_the_eviction(self) -> None:
        deletion = deletion_of(record(deactivated(), owners=[JOB_OWNER]), POLICY)
        assert deletion is not None
        assert (deletion.resource, deletion.namespace, deletion.name) == (JOBS, "team", "j")
        assert deletion.due == T0 + 5 * MINUTE
        assert deletion.options()["preconditions"] == {"uid": "job-uid"}

    @pytest.mark.parametrize(
        "reason", ["DeactivatedDueToMaximumExecutionTimeExceeded", "DeactivatedDueToX"]
    )
    def test_every_reason_of_kueues_rules(self, reason: str) -> None:
        assert deletion_of(record(deactivated(reason), owners=[JOB_OWNER]), POLICY) is not None

    def test_a_users_deactivation_is_not_kueues(self) -> None:
        assert deletion_of(record(deactivated("Deactivated"), owners=[JOB_OWNER]), POLICY) is None

    def test_an_active_workload_is_not_deactivated(self) -> None:
        evicted = deactivated()
        evicted["spec"]["active"] = True
        assert deletion_of(record(evicted, owners=[JOB_OWNER]), POLICY) is None

    def test_only_an_object_of_an_integration_is_deleted(self) -> None:
        assert deletion_of(record(deactivated()), POLICY) is None
        jobset = {**JOB_OWNER, "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet"}
        assert deletion_of(record(deactivated(), owners=[jobset]), POLICY) is None

    def test_a_plain_pod_deactivated_by_kueue_is_deleted(self) -> None:
        pod = {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pod-uid"}
        deletion = deletion_of(record(deactivated(), owners=[pod]), POLICY)
        assert deletion is not None
        assert (deletion.resource, deletion.name) == (PODS, "p")
        assert deletion.options()["preconditions"] == {"uid": "pod-uid"}

    def test_without_after_deactivated_nothing(self) -> None:
        policy = RetentionPolicy(after_finished=MINUTE)
        assert deletion_of(record(deactivated(), owners=[JOB_OWNER]), policy) is None

    def test_a_condition_without_a_valid_time_is_left_alone(self) -> None:
        patch = finished()
        patch["status"]["conditions"][0]["lastTransitionTime"] = "yesterday"
        assert deletion_of(record(patch), POLICY) is None
        del patch["status"]["conditions"][0]["lastTransitionTime"]
        assert deletion_of(record(patch), POLICY) is None

    def test_zero_means_at_once(self) -> None:
        deletion = deletion_of(record(finished()), RetentionPolicy(after_finished=timedelta(0)))
        assert deletion is not None and deletion.due == T0


@dataclass
class Wall:
    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Setup:
    fake: FakeKube
    store: KubeStore
    controller: RetentionController
    wall: Wall = field(default_factory=Wall)

    def change(self, key: str, patch: Json) -> None:
        """Another client changes the Workload; the watch delivers it."""
        self.fake.server_update(WORKLOADS, key, patch)
        self.observe(key)

    def observe(self, key: str) -> None:
        obj = self.fake.stored(WORKLOADS, key)
        assert obj is not None
        self.store.observe(WORKLOADS, obj)

    def deletes(self) -> list[tuple[str, Json]]:
        return [(path, body) for method, path, body in self.fake.writes("DELETE")]


async def setup(
    policy: RetentionPolicy = POLICY, *, workloads: int = 2, owned: bool = False
) -> Setup:
    fake = FakeKube()
    seed_cluster(fake, workloads=0)
    for i in range(1, workloads + 1):
        obj = workload("team", f"w{i}", "main")
        if owned:
            owner = {**JOB_OWNER, "name": f"j{i}", "uid": f"job-uid-{i}"}
            obj["metadata"]["ownerReferences"] = [owner]
            fake.seed(
                JOBS, {"metadata": {"name": f"j{i}", "namespace": "team", "uid": owner["uid"]}}
            )
        fake.seed(WORKLOADS, obj)
    store, engine = await synced_store(fake)
    wall = Wall()
    controller = RetentionController(
        LeaderIO(fake.rest, engine, store, FreeBucket()), policy, wall=wall, retry_delay=2.0
    )
    return Setup(fake, store, controller, wall)


async def test_a_finished_workload_is_deleted_when_its_time_comes() -> None:
    s = await setup()
    await s.controller.start()
    s.change("team/w1", finished(T0))
    s.wall.now = T0 + 9 * MINUTE
    assert await s.controller.step() == 60.0  # one minute to go
    assert s.deletes() == []

    s.wall.now = T0 + 10 * MINUTE
    assert await s.controller.step() is None
    assert s.fake.stored(WORKLOADS, "team/w1") is None
    assert s.fake.stored(WORKLOADS, "team/w2") is not None
    [(path, body)] = s.deletes()
    assert path == WORKLOADS.item("w1", "team")
    assert body["propagationPolicy"] == "Background"
    assert set(body["preconditions"]) == {"uid", "resourceVersion"}
    assert s.controller.stats.workload == 1
    assert s.controller.scheduled == 0


async def test_workloads_already_finished_when_leading_starts() -> None:
    s = await setup()
    s.change("team/w1", finished(T0 - 20 * MINUTE))
    s.change("team/w2", finished(T0))
    await s.controller.start()
    assert s.controller.scheduled == 2
    assert await s.controller.step() == 600.0
    assert [p for p, _ in s.deletes()] == [WORKLOADS.item("w1", "team")]


async def test_the_first_look_goes_in_slices_and_reads_each_workload_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(retention_module, "START_SLICE", 1)
    s = await setup(workloads=3)
    for i in (1, 2, 3):
        s.change(f"team/w{i}", finished(T0))
    start = asyncio.create_task(s.controller.start())
    await asyncio.sleep(0)  # the first slice is judged
    # w3 changes before its slice (its Finished condition is gone): judged as it is now.
    s.change("team/w3", {"status": {"conditions": []}})
    await start
    assert s.controller.scheduled == 2


async def test_not_leading_means_not_listening() -> None:
    s = await setup()
    s.change("team/w1", finished(T0))
    assert s.controller.scheduled == 0
    await s.controller.start()
    assert s.controller.scheduled == 1
    s.controller.stop()
    assert s.controller.scheduled == 0
    s.change("team/w2", finished(T0))
    assert s.controller.scheduled == 0
    s.wall.now = T0 + MINUTE * 60
    assert await s.controller.step() is None
    assert s.deletes() == []


async def test_a_changed_workload_is_not_deleted_and_is_judged_again() -> None:
    s = await setup()
    await s.controller.start()
    s.change("team/w1", finished(T0))
    # Another client changes it; the watch has not delivered that yet.
    s.fake.server_update(WORKLOADS, "team/w1", {"metadata": {"labels": {"a": "b"}}})
    s.wall.now = T0 + 10 * MINUTE
    await s.controller.step()
    assert s.controller.stats.conflict == 1
    assert s.fake.stored(WORKLOADS, "team/w1") is not None
    assert s.controller.scheduled == 0
    s.observe("team/w1")  # the event arrives: still finished, still due
    await s.controller.step()
    assert s.fake.stored(WORKLOADS, "team/w1") is None


async def test_an_error_is_tried_again_later() -> None:
    s = await setup()
    await s.controller.start()
    s.change("team/w1", finished(T0))
    s.wall.now = T0 + 10 * MINUTE
    s.fake.fail("DELETE", WORKLOADS.item("w1", "team"), status_error(500))
    assert await s.controller.step() == 2.0  # retry_delay
    assert s.controller.stats.error == 1
    assert s.fake.stored(WORKLOADS, "team/w1") is not None
    s.wall.now += timedelta(seconds=2)
    assert await s.controller.step() is None
    assert s.fake.stored(WORKLOADS, "team/w1") is None


async def test_already_gone_is_fine() -> None:
    s = await setup()
    await s.controller.start()
    s.change("team/w1", finished(T0))
    s.fake.server_delete(WORKLOADS, "team/w1")  # the watch has not said so yet
    s.wall.now = T0 + 10 * MINUTE
    assert await s.controller.step() is None
    assert (s.controller.stats.error, s.controller.stats.workload) == (0, 0)


async def test_a_later_state_replaces_the_deadline() -> None:
    s = await setup(owned=True)
    await s.controller.start()
    s.change("team/w1", deactivated(at=T0))
    assert s.controller.scheduled == 1
    # The user reactivates it before its time: nothing is deleted.
    s.change("team/w1", {"spec": {"active": True}})
    assert s.controller.scheduled == 0
    s.wall.now = T0 + 5 * MINUTE
    assert await s.controller.step() is None
    assert s.deletes() == []
    # Deactivated again later: the new eviction time counts.
    s.change("team/w1", deactivated(at=T0 + 4 * MINUTE))
    assert await s.controller.step() == 240.0
    s.wall.now = T0 + 9 * MINUTE
    await s.controller.step()
    assert s.fake.stored(JOBS, "team/j1") is None


async def test_kueues_deactivation_deletes_the_job_not_the_workload() -> None:
    s = await setup(owned=True)
    await s.controller.start()
    s.change("team/w1", deactivated(at=T0))
    s.change("team/w2", deactivated("Deactivated", at=T0))  # the user's: kept
    s.wall.now = T0 + 5 * MINUTE
    await s.controller.step()
    [(path, body)] = s.deletes()
    assert path == JOBS.item("j1", "team")
    assert body["preconditions"] == {"uid": "job-uid-1"}
    assert body["propagationPolicy"] == "Background"
    assert s.fake.stored(JOBS, "team/j2") is not None
    assert s.controller.stats.job == 1


async def test_a_replaced_job_is_not_deleted() -> None:
    s = await setup(owned=True)
    await s.controller.start()
    s.change("team/w1", deactivated(at=T0))
    # The Job was deleted and created again under its name: another uid.
    s.fake.server_delete(JOBS, "team/j1")
    s.fake.seed(JOBS, {"metadata": {"name": "j1", "namespace": "team", "uid": "new"}})
    s.wall.now = T0 + 5 * MINUTE
    await s.controller.step()
    assert s.fake.stored(JOBS, "team/j1") is not None
    assert s.controller.stats.conflict == 1


async def test_run_wakes_for_a_deadline_earlier_than_the_ones_it_sleeps_for() -> None:
    s = await setup()
    s.change("team/w2", finished(T0))  # due in ten minutes of the fake wall
    s.wall.now = T0 + MINUTE
    task = asyncio.create_task(s.controller.run())
    try:
        await until(lambda: s.controller.scheduled == 1)
        s.change("team/w1", finished(T0 - 20 * MINUTE))  # already due
        await until(lambda: s.fake.stored(WORKLOADS, "team/w1") is None)
        assert s.fake.stored(WORKLOADS, "team/w2") is not None
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert s.controller.scheduled == 0  # leadership lost: nothing kept
