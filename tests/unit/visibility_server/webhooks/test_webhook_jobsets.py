"""The `jobset.x-k8s.io/jobset` integration's admission through the app
(docs/cluster.md#jobsets): a JobSet that names a LocalQueue is stored suspended as a Job
is, the `default` LocalQueue on creation, a Job's label rules judged by the JobSet's
`spec.suspend` with Kueue's messages, a Job its JobSet controls left alone by the Job
webhook, and nothing at all while the integration is off."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scheduler.api.integrations import NO_INTEGRATIONS, Integrations
from tests.unit.test_webhook_rules import review
from tests.unit.visibility_server.webhooks.test_webhook_admission import apply_patch
from tests.unit.visibility_server.webhooks.test_webhook_deployments import (
    NS,
    PRIORITY,
    QUEUE,
    answer,
    causes,
    post,
    with_default_queue,
)
from visibility_server.webhooks.default_queue import NotSyncedError

JOBSETS = Integrations(jobsets=True)
MAX_EXEC = "kueue.x-k8s.io/max-exec-time-seconds"


def jobset(*, suspend: bool | None = None, **labels: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "replicatedJobs": [
            {
                "name": "workers",
                "replicas": 2,
                "template": {
                    "spec": {
                        "parallelism": 1,
                        "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}},
                    }
                },
            }
        ]
    }
    if suspend is not None:
        spec["suspend"] = suspend
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "train", "namespace": NS, "labels": dict(labels)},
        "spec": spec,
    }


def child_job(**labels: str) -> dict[str, Any]:
    """A Job as the JobSet controller makes it: controlled by its JobSet."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train-workers-0",
            "namespace": NS,
            "labels": dict(labels),
            "ownerReferences": [
                {
                    "apiVersion": "jobset.x-k8s.io/v1alpha2",
                    "kind": "JobSet",
                    "name": "train",
                    "uid": "9d3c",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}},
    }


async def mutate(body: bytes, **kwargs: Any) -> dict[str, Any]:
    kwargs.setdefault("integrations", JOBSETS)
    return await post("/mutate-jobset", body, **kwargs)


async def validate(body: bytes, **kwargs: Any) -> dict[str, Any]:
    kwargs.setdefault("integrations", JOBSETS)
    return await post("/validate", body, **kwargs)


# -- mutation -------------------------------------------------------------------------
async def test_a_queued_jobset_is_stored_suspended() -> None:
    obj = jobset(**{QUEUE: "user-queue"})
    out = apply_patch(obj, await mutate(review(obj)))
    assert out["spec"]["suspend"] is True
    assert out["metadata"] == obj["metadata"]
    # Suspended already: nothing to change.
    assert await mutate(review(out)) == {"uid": "0b7f6e2a-rules", "allowed": True}


async def test_the_default_local_queue_is_named_on_creation() -> None:
    obj = jobset()
    out = apply_patch(obj, await mutate(review(obj), holder=with_default_queue()))
    assert out["metadata"]["labels"][QUEUE] == "default"
    assert out["spec"]["suspend"] is True
    # No such queue: left as written.
    assert await mutate(review(obj)) == {"uid": "0b7f6e2a-rules", "allowed": True}


async def test_the_defaulting_waits_for_the_sync() -> None:
    reply = await answer(
        "/mutate-jobset",
        review(jobset()),
        integrations=JOBSETS,
        holder=with_default_queue(synced=False),
    )
    assert reply.status_code == 503, reply.text
    assert reply.json()["kind"] == "Status"
    assert NotSyncedError.__name__ not in reply.text  # said in words, not by class


async def test_nothing_changes_while_the_integration_is_off() -> None:
    obj = jobset(**{QUEUE: "user-queue"})
    reply = await mutate(review(obj), integrations=NO_INTEGRATIONS, holder=with_default_queue())
    assert reply == {"uid": "0b7f6e2a-rules", "allowed": True}
    assert (await validate(review(jobset(**{QUEUE: "Bad_Name"})), integrations=NO_INTEGRATIONS))[
        "allowed"
    ] is True


async def test_an_update_is_not_mutated() -> None:
    old = jobset(suspend=False, **{QUEUE: "user-queue"})
    assert await mutate(review(old, "UPDATE", old)) == {"uid": "0b7f6e2a-rules", "allowed": True}


async def test_a_jobsets_job_is_left_alone_by_the_job_webhook() -> None:
    """Kueue skips a Job whose owner it manages: the JobSet is the workload, so its Jobs
    get neither the `default` LocalQueue nor a suspension from the Job webhook."""
    holder = with_default_queue()
    for labels in ({}, {QUEUE: "user-queue"}):
        job = child_job(**labels)
        untouched = await post("/mutate-job", review(job), integrations=JOBSETS, holder=holder)
        assert untouched == {"uid": "0b7f6e2a-rules", "allowed": True}
        # Without the integration it is a Job like any other.
        out = apply_patch(
            job, await post("/mutate-job", review(job), integrations=NO_INTEGRATIONS, holder=holder)
        )
        assert out["spec"]["suspend"] is True
        assert out["metadata"]["labels"][QUEUE] == labels.get(QUEUE, "default")


async def test_a_wrong_kind_is_a_bad_request() -> None:
    job = child_job(**{QUEUE: "user-queue"})
    reply = await answer("/mutate-jobset", review(job), integrations=JOBSETS)
    assert reply.status_code == 400
    assert "only jobset.x-k8s.io/v1alpha2 JobSets are mutated here, not Job" in reply.text


# -- validation -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("label", "value", "says"),
    [
        (
            QUEUE,
            "Not_A_Name",
            'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "Not_A_Name"',
        ),
        (
            PRIORITY,
            "Not_A_Name",
            'metadata.labels[kueue.x-k8s.io/priority-class]: Invalid value: "Not_A_Name"',
        ),
        (
            MAX_EXEC,
            "0",
            "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: 0: "
            "should be greater than 0",
        ),
    ],
)
async def test_the_labels_follow_a_jobs_rules(label: str, value: str, says: str) -> None:
    labels = {QUEUE: "user-queue", label: value}
    found = causes(await validate(review(jobset(suspend=True, **labels))))
    assert len(found) == 1
    assert found[0].startswith(says)


async def test_the_queue_moves_only_while_suspended() -> None:
    old = jobset(suspend=True, **{QUEUE: "a"})
    moved = jobset(suspend=True, **{QUEUE: "b"})
    assert (await validate(review(moved, "UPDATE", old)))["allowed"] is True
    running = jobset(suspend=False, **{QUEUE: "a"})
    moved_running = jobset(suspend=False, **{QUEUE: "b"})
    assert causes(await validate(review(moved_running, "UPDATE", running))) == [
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "b": field is immutable'
    ]


async def test_the_queue_name_stays_where_a_default_queue_exists() -> None:
    old = jobset(suspend=True, **{QUEUE: "a"})
    gone = jobset(suspend=True)
    # The webhook only sees JobSets that name a queue before or after the change.
    assert causes(await validate(review(gone, "UPDATE", old), holder=with_default_queue())) == [
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "": '
        "queue-name must not be empty in namespace with default queue"
    ]
    assert (await validate(review(gone, "UPDATE", old)))["allowed"] is True


async def test_priority_and_maximum_execution_time_rules() -> None:
    running = jobset(suspend=False, **{QUEUE: "a"})
    added = copy.deepcopy(running)
    added["metadata"]["labels"][PRIORITY] = "high"
    assert causes(await validate(review(added, "UPDATE", running))) == [
        'metadata.labels[kueue.x-k8s.io/priority-class]: Invalid value: "high": '
        "WorkloadPriorityClass cannot be added to a non-suspended workload"
    ]
    bounded = copy.deepcopy(running)
    bounded["metadata"]["labels"][MAX_EXEC] = "60"
    assert causes(await validate(review(bounded, "UPDATE", running))) == [
        'metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: "60": '
        "field is immutable"
    ]
    waiting = jobset(suspend=True, **{QUEUE: "a"})
    waiting_bounded = jobset(suspend=True, **{QUEUE: "a", MAX_EXEC: "60", PRIORITY: "high"})
    assert (await validate(review(waiting_bounded, "UPDATE", waiting)))["allowed"] is True
