"""The admission webhooks' endpoints: AdmissionReview in, AdmissionReview out.

    POST /validate      every kind the API layer knows (Kueue's kinds, batch/v1 Jobs), and
                        v1 Pods, apps/v1 Deployments and StatefulSets, JobSets with
                        their integrations on
    POST /mutate-job    batch/v1 Jobs: suspended (and the `default` LocalQueue) on create
    POST /mutate-pod    v1 Pods: held behind the admission gate on create (`pod`,
                        `deployment` and `statefulset` integrations)
    POST /mutate-deployment
                        apps/v1 Deployments: their pod template marked on create and
                        update (`deployment` integration)
    POST /mutate-statefulset
                        apps/v1 StatefulSets: the same (`statefulset` integration)
    POST /mutate-jobset jobset.x-k8s.io/v1alpha2 JobSets: as Jobs
                        (`jobset.x-k8s.io/jobset` integration)

What each answer means (docs/operations.md, "Admission webhooks"):

* A body that is not a well-formed AdmissionReview request is a 400 `Status` saying what
  is wrong: kube-apiserver treats it as a failed call and applies the failurePolicy; it is
  never an allowed response.
* Before the initial sync, a decision that needs the LocalQueues is a 503 `Status`: a
  failed call too, never a guess.
* Otherwise 200 with the review's response: allowed (for the /mutate-* paths with a
  JSONPatch), or denied with the broken rules.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

from scheduler.api.deployment_admission import DEPLOYMENT
from scheduler.api.integrations import NO_INTEGRATIONS, Integrations
from scheduler.api.parent_admission import PodParent
from scheduler.api.statefulset_admission import STATEFULSET, WorkloadInUse
from scheduler.runtime.snapshot import Snapshot
from visibility_server.webhooks import mutating, responses
from visibility_server.webhooks.asgi import Answer
from visibility_server.webhooks.default_queue import (
    DefaultQueueLookup,
    NotSyncedError,
    default_queue_lookup,
)
from visibility_server.webhooks.envelope import MalformedReviewError
from visibility_server.webhooks.mutating import WrongKindError
from visibility_server.webhooks.responses import JsonPatch
from visibility_server.webhooks.review import AdmissionRequest, parse_review
from visibility_server.webhooks.validating import validate_request
from visibility_server.webhooks.workload_in_use import workload_in_use_lookup

log = logging.getLogger(__name__)


def mutate_path(kind: str) -> str:
    """The mutating path of a kind (named in lower case): one path per kind, which mutates
    only that kind (another is a 400)."""
    return f"/mutate-{kind}"


VALIDATE_PATH: Final = "/validate"  # every kind
MUTATE_JOB_PATH: Final = mutate_path("job")
MUTATE_POD_PATH: Final = mutate_path("pod")
MUTATE_DEPLOYMENT_PATH: Final = mutate_path("deployment")
MUTATE_STATEFULSET_PATH: Final = mutate_path("statefulset")
MUTATE_JOBSET_PATH: Final = mutate_path("jobset")
# An UPDATE review holds two objects, each at most kube-apiserver's 3 MiB request limit.
MAX_BODY_BYTES: Final = 16 * 1024 * 1024


def validate_answer(
    body: bytes,
    default_queue: DefaultQueueLookup,
    integrations: Integrations,
    workload_in_use: WorkloadInUse,
) -> Answer:
    try:
        request = parse_review(body)
    except MalformedReviewError as err:
        return responses.malformed(str(err))
    try:
        verdict = validate_request(request, default_queue, integrations, workload_in_use)
    except NotSyncedError as err:
        return responses.not_ready(f"cannot validate yet: {err}")
    if verdict.errors:
        log.info(
            "denied %s %s %s/%s: %s",
            request.operation,
            request.kind.kind,
            request.namespace,
            request.name,
            responses.denial_message(verdict.errors),
        )
        return responses.denied(request.uid, verdict.errors)
    return responses.allowed(request.uid, warnings=verdict.warnings)


def mutate_answer(body: bytes, patch_for: Callable[[AdmissionRequest], JsonPatch]) -> Answer:
    """The answer of a /mutate-* path: `patch_for` the request (a Job's, a Pod's, a
    Deployment's), allowed with it; a 400 for what is not a review of that kind, a 503
    while a defaulting that needs the LocalQueues cannot read them yet."""
    try:
        request = parse_review(body)
        patch = patch_for(request)
    except (MalformedReviewError, WrongKindError) as err:
        return responses.malformed(str(err))
    except NotSyncedError as err:
        return responses.not_ready(f"cannot default the LocalQueue yet: {err}")
    return responses.allowed(request.uid, patch)


def answers(
    snapshot: Callable[[], Snapshot], integrations: Integrations = NO_INTEGRATIONS
) -> dict[str, Callable[[bytes], Answer]]:
    """Path → the body's answer, each reading the snapshot current when called;
    `integrations`: which Pods, Deployments, StatefulSets and JobSets are managed
    (docs/cluster.md#plain-pods, docs/cluster.md#deployments, docs/cluster.md#statefulsets,
    docs/cluster.md#jobsets)."""

    def validate(body: bytes) -> Answer:
        current = snapshot()
        return validate_answer(
            body,
            default_queue_lookup(current),
            integrations,
            workload_in_use_lookup(current),
        )

    def mutate_parent(parent: PodParent, enabled: bool) -> Callable[[bytes], Answer]:
        return lambda body: mutate_answer(
            body,
            lambda request: mutating.parent_patch(
                request, parent, default_queue_lookup(snapshot()), enabled=enabled
            ),
        )

    return {
        VALIDATE_PATH: validate,
        MUTATE_JOB_PATH: lambda body: mutate_answer(
            body,
            lambda request: mutating.job_patch(
                request, default_queue_lookup(snapshot()), integrations
            ),
        ),
        MUTATE_JOBSET_PATH: lambda body: mutate_answer(
            body,
            lambda request: mutating.jobset_patch(
                request, default_queue_lookup(snapshot()), enabled=integrations.jobsets
            ),
        ),
        MUTATE_POD_PATH: lambda body: mutate_answer(
            body, lambda request: mutating.pod_patch(request, integrations)
        ),
        MUTATE_DEPLOYMENT_PATH: mutate_parent(DEPLOYMENT, integrations.deployments),
        MUTATE_STATEFULSET_PATH: mutate_parent(STATEFULSET, integrations.statefulsets),
    }
