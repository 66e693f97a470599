"""[EXT] what-if: `POST G/{v}/namespaces/{ns}/localqueues/{name}/whatif` with a Job or a
Workload; the answer says what the next scheduling cycle would do with it
(docs/visibility-api.md#what-if). Nothing is created.

Authorization (before routing, as for every path): `create` on `localqueues/whatif`
with the namespace and the LocalQueue's name, so a caller who may not ask gets 403
whether or not the LocalQueue exists. Then: method 405 -> Accept 406 -> body size 413
-> the caller's rate limit 429 -> initial sync 503 -> LocalQueue 404 -> the body
400/422 -> 200. Victims are named only where the caller may list Workloads.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from starlette.requests import Request
from starlette.responses import Response

from scheduler.api.dry_run import DryRunError
from scheduler.runtime.estimates import MICROS, ServedForecast
from scheduler.runtime.snapshot import Snapshot
from visibility_server.authz.attributes import Attributes
from visibility_server.authz.identity import UserInfo
from visibility_server.http import status
from visibility_server.http.access import user_of
from visibility_server.http.app_state import VisibilityServer
from visibility_server.http.discovery import WHATIF_KIND, WHATIF_SUBRESOURCE
from visibility_server.http.encode import json_compact, json_pretty, to_yaml
from visibility_server.http.negotiation import OBJECT_MEDIA, Media, negotiate
from visibility_server.http.position import ForecastLookup
from visibility_server.http.ratelimit import UserRateLimiter
from visibility_server.http.requestinfo import info_of
from visibility_server.http.responses import BytesResponse
from visibility_server.http.routers.discovery import GROUP_PATH
from visibility_server.http.routers.table import Endpoint, PreRendered, RouteTable
from visibility_server.http.status import StatusError
from visibility_server.http.timestamps import rfc3339_seconds

DEFAULT_MAX_BODY_BYTES: Final = 1 << 20  # 1 MiB: a Job or Workload is a few KiB
WORKLOADS_GROUP: Final = "kueue.x-k8s.io"
ESTIMATE_METHOD: Final = "rate"
NEIGHBOURS: Final = "-neighbours"  # suffix of the method of a band read from the neighbours


class WhatIfBackend(Protocol):
    """The runtime's dry run (`scheduler.runtime.what_if.WhatIfService`): `decoder`, on
    the loop, gives a pure function of the body, run in a worker thread; `answer`, on the
    loop, runs the dry run on what it returned."""

    def local_queue_exists(self, namespace: str, name: str) -> bool: ...

    def decoder(self, namespace: str, local_queue: str) -> Callable[[bytes], Any]: ...

    def answer(self, prepared: Any) -> dict[str, Any]: ...


def _method_not_allowed() -> StatusError:
    error = status.method_not_allowed()
    return StatusError(error.code, error.reason, error.message, {}, (("allow", "POST"),))


def _too_large(limit: int) -> StatusError:
    message = f"the request body is larger than {limit} bytes"
    return StatusError(413, "RequestEntityTooLarge", message)


def _rate_limited(wait: float, rate: float) -> StatusError:
    seconds = max(1, math.ceil(wait))
    message = f"too many what-if requests: at most {rate:g} per second, retry in {seconds}s"
    return StatusError(
        429,
        "TooManyRequests",
        message,
        {"retryAfterSeconds": seconds},
        (("retry-after", str(seconds)),),
    )


def _invalid(error: DryRunError, name: str) -> StatusError:
    if error.code == 400:
        return StatusError(400, "BadRequest", error.message)
    causes = [
        {"reason": "FieldValueInvalid", "message": c.message, "field": c.field}
        for c in error.causes
    ]
    details = {"name": name, "group": WORKLOADS_GROUP, "kind": "Workload", "causes": causes}
    return StatusError(422, "Invalid", error.message, details)


@dataclass(frozen=True, eq=False)
class _WhatIfEndpoint:
    """The what-if subresource of one API version: `backend` answers, `limiter` bounds each
    user's rate, and a body larger than `max_body` bytes is refused unread."""

    server: VisibilityServer
    version: str
    backend: WhatIfBackend
    limiter: UserRateLimiter
    max_body: int

    async def serve(self, request: Request) -> Response:
        info = info_of(request.scope)
        if info.method != "POST":
            raise _method_not_allowed()
        media = negotiate(info.accept, OBJECT_MEDIA)
        if media is None:
            raise status.not_acceptable()
        body = await self._read_body(request)
        user = user_of(request.scope)
        wait = self.limiter.take(user.name)
        if wait > 0:
            raise _rate_limited(wait, self.limiter.limit.rate)
        snapshot = self.server.config.snapshot()
        if not snapshot.synced:
            raise status.not_synced()
        namespace, name = request.path_params["namespace"], request.path_params["name"]
        if not self.backend.local_queue_exists(namespace, name):
            raise status.object_not_found("localqueue", name)
        decode = self.backend.decoder(namespace, name)
        try:
            prepared = await asyncio.to_thread(decode, body)
        except DryRunError as err:
            raise _invalid(err, name) from None
        answer = self.backend.answer(prepared)
        document = await self._document(answer, user, snapshot)
        return _render(document, media, info.pretty)

    async def _read_body(self, request: Request) -> bytes:
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body:
            raise _too_large(self.max_body)
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > self.max_body:
                raise _too_large(self.max_body)
            chunks.append(chunk)
        return b"".join(chunks)

    async def _document(
        self, answer: dict[str, Any], user: UserInfo, snapshot: Snapshot
    ) -> dict[str, Any]:
        evaluated = int(answer.pop("evaluatedAt"))
        victims = answer.pop("victims")
        shown = [v for v in victims if await self._may_list(user, v["namespace"])]
        document: dict[str, Any] = {
            "kind": WHATIF_KIND,
            "apiVersion": f"{GROUP_PATH.removeprefix('/apis/')}/{self.version}",
            "metadata": {},
            **answer,
            "evaluatedAt": rfc3339_seconds(evaluated),
        }
        if victims:
            document["preemption"] = {"victims": shown, "hiddenVictims": len(victims) - len(shown)}
        estimate = estimated_start(answer, snapshot, evaluated, self.server.config.forecasts)
        if estimate is not None:
            document["estimatedStart"] = estimate
        return document

    async def _may_list(self, user: UserInfo, namespace: str) -> bool:
        attrs = Attributes(
            verb="list",
            path=f"/apis/{WORKLOADS_GROUP}/v1beta2/namespaces/{namespace}/workloads",
            resource_request=True,
            namespace=namespace,
            group=WORKLOADS_GROUP,
            version="v1beta2",
            resource="workloads",
        )
        return await self.server.allowed(user, attrs)


def estimated_start(
    answer: Mapping[str, Any],
    snapshot: Snapshot,
    now: int,
    forecasts: ForecastLookup | None = None,
) -> dict[str, Any] | None:
    """`estimatedStart` of the hypothetical workload (docs/visibility-api.md#what-if).

    Admitted now: the band is the instant itself. Queued at position `p` of its
    ClusterQueue: from the forecasts the worker serves for the workloads around that
    place (:func:`_from_neighbours`, method `<served method>-neighbours`), else with the
    `rate` method: the ClusterQueue's decayed admission rate applied to `p`
    (docs/dashboard.md). None when it would not be queued, or neither has anything."""
    made_at = rfc3339_seconds(now)
    common = {"method": ESTIMATE_METHOD, "madeAt": made_at, "snapshot": str(snapshot.generation)}
    if answer.get("admitted"):
        return {"p50": made_at, "low": made_at, "high": made_at, **common}
    cq = answer.get("workload", {}).get("clusterQueueName")
    position = answer.get("positionInClusterQueue")
    if cq is None or position is None or answer.get("decision") == "Inadmissible":
        return None
    if forecasts is not None:
        served = _from_neighbours(snapshot, cq, position, forecasts)
        if served is not None:
            return served
    velocity = snapshot.velocities.get(cq)
    found = velocity.estimate(position, now) if velocity is not None else None
    if found is None:
        return None

    def at(seconds: float) -> str:
        return rfc3339_seconds(now + round(seconds * MICROS))

    return {
        "p50": at(found.seconds),
        "low": at(found.low_seconds),
        "high": at(found.high_seconds),
        **common,
    }


def _from_neighbours(
    snapshot: Snapshot, cq: str, position: int, forecasts: ForecastLookup
) -> dict[str, Any] | None:
    """The band of the place the hypothetical would take: it would queue behind the
    workload now at `position - 1` and ahead of the one now at `position`, so it starts
    no earlier than the first and takes the place of the second. With a served
    forecast for both, each of p50, low and high is the midpoint of theirs; with one,
    or two of different methods, that of the one ahead (else the one there). `madeAt`
    and `snapshot` are those of the older forecast used."""
    view = snapshot.view(cq)
    if view is None:
        return None
    found: list[ServedForecast] = []
    for index in (position - 1, position):
        if 0 <= index < len(view):
            entry = view.item(index).entry
            served = forecasts(entry.namespace, entry.name)
            if served is not None:
                found.append(served)
    if not found:
        return None
    if len({f.method for f in found}) > 1:
        # One band is the fallback's (docs/forecasting.md#fallback): a midpoint of two
        # methods' bands is neither's; the one it would queue behind bounds its start.
        found = found[:1]
    oldest = min(found, key=lambda f: f.made_at)

    def mid(values: list[int]) -> str:
        return rfc3339_seconds(sum(values) // len(values))

    return {
        "p50": mid([f.p50 for f in found]),
        "low": mid([f.low for f in found]),
        "high": mid([f.high for f in found]),
        "method": oldest.method + NEIGHBOURS,
        "madeAt": rfc3339_seconds(oldest.made_at),
        "snapshot": str(oldest.generation),
    }


def _render(document: dict[str, Any], media: Media, pretty: bool) -> Response:
    if media is Media.YAML:
        body = to_yaml(document)
    else:
        body = json_pretty(document) if pretty else json_compact(document)
    headers = [("content-type", media.content_type), ("cache-control", "no-store")]
    return BytesResponse(200, headers, body)


def whatif_routes(
    server: VisibilityServer,
    table: RouteTable,
    backend: WhatIfBackend,
    limiter: UserRateLimiter,
    max_body: int = DEFAULT_MAX_BODY_BYTES,
) -> None:
    """One route per version; every method reaches it (non-POST gets 405, Allow: POST)."""
    for version in server.config.versions:
        path = (
            f"{GROUP_PATH}/{version}/namespaces/{{namespace}}/localqueues/{{name}}/"
            f"{WHATIF_SUBRESOURCE}"
        )
        endpoint: Endpoint = _WhatIfEndpoint(server, version, backend, limiter, max_body).serve
        table.add(path, PreRendered(endpoint), "whatif", version, methods=None)
