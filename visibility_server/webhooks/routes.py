"""The webhooks' place in the app: POST routes that skip access checks.

kube-apiserver calls conversion and admission webhooks without credentials
(docs/operations.md, "API versions and the conversion webhook", "Admission webhooks"), so
the routes are registered as open: the access middleware neither authenticates nor
authorizes them. They only judge or transform what they are sent; the admission routes
read the published snapshot (whether a namespace has a `default` LocalQueue, whether a
StatefulSet's Workload is still in use) and change nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.types import Receive, Scope, Send

from scheduler.api.integrations import NO_INTEGRATIONS, Integrations
from scheduler.runtime.snapshot import Snapshot
from visibility_server.http.routers.table import RouteTable
from visibility_server.webhooks.admission import (
    MAX_BODY_BYTES,
    MUTATE_DEPLOYMENT_PATH,
    MUTATE_JOB_PATH,
    MUTATE_JOBSET_PATH,
    MUTATE_POD_PATH,
    MUTATE_STATEFULSET_PATH,
    VALIDATE_PATH,
    answers,
)
from visibility_server.webhooks.asgi import Answer, serve
from visibility_server.webhooks.conversion import CONVERSION_PATH, serve_conversion

# path -> metric labels (endpoint, API version of the review)
_LABELS = {
    CONVERSION_PATH: ("conversion", "v1"),
    VALIDATE_PATH: ("validating-webhook", "v1"),
    MUTATE_JOB_PATH: ("mutating-webhook", "v1"),
    MUTATE_POD_PATH: ("mutating-webhook-pod", "v1"),
    MUTATE_DEPLOYMENT_PATH: ("mutating-webhook-deployment", "v1"),
    MUTATE_STATEFULSET_PATH: ("mutating-webhook-statefulset", "v1"),
    MUTATE_JOBSET_PATH: ("mutating-webhook-jobset", "v1"),
}


class _ConversionEndpoint:
    """An ASGI endpoint: Starlette hands it every method, and it answers 405 itself."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await serve_conversion(scope, receive, send)


class _AdmissionEndpoint:
    def __init__(self, path: str, answer_for: Callable[[bytes], Answer]) -> None:
        self._path = path
        self._answer_for = answer_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await serve(
            scope,
            receive,
            send,
            path=self._path,
            what="AdmissionReview",
            limit=MAX_BODY_BYTES,
            answer_for=self._answer_for,
        )


def webhook_routes(
    table: RouteTable,
    snapshot: Callable[[], Snapshot],
    integrations: Integrations = NO_INTEGRATIONS,
) -> frozenset[str]:
    """Add the webhook routes with their metric labels; return the paths that are open.
    Every method reaches them: they answer 405 themselves. `integrations`: which Pods,
    Deployments and StatefulSets are managed (the others are allowed unchanged)."""
    table.add(CONVERSION_PATH, _ConversionEndpoint(), *_LABELS[CONVERSION_PATH], methods=None)
    for path, answer_for in answers(snapshot, integrations).items():
        table.add(path, _AdmissionEndpoint(path, answer_for), *_LABELS[path], methods=None)
    return frozenset(_LABELS)
