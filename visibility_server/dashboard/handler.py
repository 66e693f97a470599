"""The dashboard's paths (docs/dashboard.md): the page, its assets and its JSON endpoints.

Every path is under `/dashboard`, so none overlaps the visibility API (docs/visibility-api.md
docs/visibility-api.md#paths-served) and none is reachable through kube-apiserver, which proxies
only `/apis/visibility.kueue.x-k8s.io/...`. The caller is authenticated exactly as for the
API. The page and its assets hold no data and are the same for everyone, so, like
`/healthz`, they are always allowed. The JSON endpoints refuse anonymous callers (401)
and authorize every object they show with the attributes of the API request that
would show it, so a caller sees on the dashboard exactly what RBAC lets them read
through the API, and the decisions share the API's cache:

| shown | attributes (group visibility.kueue.x-k8s.io) |
|---|---|
| a ClusterQueue, its usage and pending list | `get clusterqueues/pendingworkloads`, name |
| the cohort tree with totals | the same without a name (every ClusterQueue) |
| a LocalQueue and its pending list | `get localqueues/pendingworkloads`, namespace, name |
| every LocalQueue | the same at the cluster scope, without a name |
| why it waits, wait estimate | `get workloads/pendingposition`, cluster-wide or in its namespace |
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Final

from scheduler.runtime.snapshot import Snapshot
from visibility_server.authz.attributes import Attributes, request_attributes
from visibility_server.authz.identity import UserInfo, is_anonymous
from visibility_server.authz.messages import forbidden_details, forbidden_message
from visibility_server.dashboard import data
from visibility_server.http import status
from visibility_server.http.encode import json_compact
from visibility_server.http.etag import none_match, tag_of_bytes
from visibility_server.http.query import parse_int64
from visibility_server.http.sources import AnswerSources

DASHBOARD_PREFIX: Final = "/dashboard"
API_PREFIX: Final = "/dashboard/api/v1/"
STATIC_PREFIX: Final = "/dashboard/static/"
DEFAULT_LIMIT: Final = 100
MAX_LIMIT: Final = 1000

_GROUP: Final = status.VISIBILITY_GROUP
_ASSETS: Final = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "whatif.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
# The page loads only its own script and style and talks only to this server.
_PAGE_HEADERS: Final = (
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
    ("x-content-type-options", "nosniff"),
)
_DATA_HEADERS: Final = (
    ("cache-control", "private, no-cache"),
    ("x-content-type-options", "nosniff"),
)

Headers = list[tuple[str, str]]


def is_dashboard_path(path: str) -> bool:
    """Every path the dashboard answers, 404s included: the access middleware authorizes
    none of them (the dashboard decides per object it shows)."""
    return path == DASHBOARD_PREFIX or path.startswith(DASHBOARD_PREFIX + "/")


@dataclass(frozen=True, slots=True)
class DashboardRequest:
    params: Mapping[str, str]  # first value of each query parameter
    if_none_match: tuple[str, ...]
    user: UserInfo


@dataclass(frozen=True, slots=True)
class DashboardResponse:
    code: int
    headers: Headers
    body: bytes


# Whether `user` may do `attrs`; backend failures raise the API's 500/503 Status errors.
Allowed = Callable[[UserInfo, Attributes], Awaitable[bool]]


@dataclass(frozen=True, slots=True)
class _Asset:
    content_type: str
    body: bytes
    etag: str


def _load_assets() -> dict[str, _Asset]:
    folder = resources.files("visibility_server.dashboard").joinpath("static")
    assets: dict[str, _Asset] = {}
    for name, content_type in _ASSETS.items():
        body = folder.joinpath(name).read_bytes()
        assets[name] = _Asset(content_type, body, tag_of_bytes(body))
    return assets


class _Rights:
    """One request's authorization decisions, by the API attributes they stand for."""

    def __init__(self, user: UserInfo, allowed: Allowed, version: str) -> None:
        self.user = user
        self._allowed = allowed
        self._base = f"/apis/{_GROUP}/{version}"
        self._version = version
        self._details: dict[str, bool] = {}

    def cluster_queue(self, name: str) -> Attributes:
        return request_attributes("GET", f"{self._base}/clusterqueues/{name}/pendingworkloads")

    def local_queue(self, namespace: str, name: str) -> Attributes:
        path = f"{self._base}/namespaces/{namespace}/localqueues/{name}/pendingworkloads"
        return request_attributes("GET", path)

    def every(self, resource: str, subresource: str, namespace: str = "") -> Attributes:
        """`get resource/subresource` of every name (in `namespace`, or cluster-wide)."""
        return Attributes(
            verb="get",
            path=self._base,
            resource_request=True,
            namespace=namespace,
            group=_GROUP,
            version=self._version,
            resource=resource,
            subresource=subresource,
        )

    async def may(self, attrs: Attributes) -> bool:
        return await self._allowed(self.user, attrs)

    async def details(self, namespaces: list[str]) -> Callable[[str], bool]:
        """Whether why-pending and estimates may be shown, per namespace."""
        if await self.may(self.every("workloads", "pendingposition")):
            return lambda _namespace: True
        for namespace in namespaces:
            if namespace not in self._details:
                attrs = self.every("workloads", "pendingposition", namespace)
                self._details[namespace] = await self.may(attrs)
        return lambda namespace: self._details.get(namespace, False)


class Dashboard:
    """The answers of the dashboard's routes (`routes.py`), from the current snapshot."""

    def __init__(self, sources: AnswerSources, allowed: Allowed, *, version: str) -> None:
        self._sources = sources
        self._allowed = allowed
        self._version = version
        self._assets = _load_assets()

    # -- the page and its assets ----------------------------------------------------------

    async def page(self, request: DashboardRequest) -> DashboardResponse:
        return self._asset("index.html", request)

    async def static(self, name: str, request: DashboardRequest) -> DashboardResponse:
        if name in self._assets and name != "index.html":
            return self._asset(name, request)
        raise status.path_not_found()

    def _asset(self, name: str, request: DashboardRequest) -> DashboardResponse:
        asset = self._assets[name]
        headers: Headers = [("etag", asset.etag), ("cache-control", "no-cache")]
        if none_match(request.if_none_match, asset.etag):
            return DashboardResponse(304, headers, b"")
        return DashboardResponse(
            200, [("content-type", asset.content_type), *_PAGE_HEADERS, *headers], asset.body
        )

    # -- JSON ----------------------------------------------------------------------------

    async def overview(self, request: DashboardRequest) -> DashboardResponse:
        rights = self._rights(request)
        return self._json(
            await self._overview(rights, request.params.get("namespace", "")), request
        )

    async def cluster_queue(self, name: str, request: DashboardRequest) -> DashboardResponse:
        rights = self._rights(request)
        return self._json(await self._cluster_queue(rights, name, request.params), request)

    async def local_queue(
        self, namespace: str, name: str, request: DashboardRequest
    ) -> DashboardResponse:
        rights = self._rights(request)
        document = await self._local_queue(rights, namespace, name, request.params)
        return self._json(document, request)

    async def api_not_found(self, rest: str, request: DashboardRequest) -> DashboardResponse:
        """Any other path under the JSON prefix: 404, but 401 first for anonymous callers
        (unless the path has an empty segment, which is never a resource)."""
        if all(rest.split("/")):
            self._rights(request)
        raise status.path_not_found()

    @staticmethod
    async def not_found() -> DashboardResponse:
        raise status.path_not_found()

    def _rights(self, request: DashboardRequest) -> _Rights:
        if is_anonymous(request.user):
            raise status.unauthorized()
        return _Rights(request.user, self._allowed, self._version)

    @staticmethod
    def _json(document: data.Json, request: DashboardRequest) -> DashboardResponse:
        body = json_compact(document)
        etag = tag_of_bytes(body)
        headers: Headers = [*_DATA_HEADERS, ("etag", etag)]
        if none_match(request.if_none_match, etag):
            return DashboardResponse(304, headers, b"")
        return DashboardResponse(200, [("content-type", "application/json"), *headers], body)

    def _synced(self) -> Snapshot:
        snapshot = self._sources.snapshot()
        if not snapshot.synced:
            raise status.not_synced()
        return snapshot

    async def _require(self, rights: _Rights, attrs: Attributes) -> None:
        if not await rights.may(attrs):
            raise status.forbidden(forbidden_message(rights.user, attrs), forbidden_details(attrs))

    async def _overview(self, rights: _Rights, namespace: str) -> data.Json:
        # Decide first, then read the snapshot once: the document is one instant.
        snapshot = self._synced()
        all_cqs = await rights.may(rights.every("clusterqueues", "pendingworkloads"))
        cqs: set[str] = set()
        if not all_cqs:
            for cq in snapshot.quota.cluster_queues:
                if await rights.may(rights.cluster_queue(cq.name)):
                    cqs.add(cq.name)
        all_lqs = await rights.may(rights.every("localqueues", "pendingworkloads"))
        lqs: set[tuple[str, str]] = set()
        if not all_lqs and namespace:
            for key in data.local_queues_of(snapshot, namespace):
                if await rights.may(rights.local_queue(*key)):
                    lqs.add(key)
        visible = data.Visible(
            user=rights.user.name,
            groups=tuple(rights.user.groups),
            all_cluster_queues=all_cqs,
            cluster_queues=frozenset(cqs),
            all_local_queues=all_lqs,
            local_queues=frozenset(lqs),
            namespace=namespace,
        )
        return data.overview(snapshot, visible, self._sources.estimate_now())

    @staticmethod
    def _limit(params: Mapping[str, str]) -> int:
        raw = params.get("limit")
        if raw is None:
            return DEFAULT_LIMIT
        return min(MAX_LIMIT, max(1, parse_int64("limit", raw)))

    async def _cluster_queue(
        self, rights: _Rights, name: str, params: Mapping[str, str]
    ) -> data.Json:
        await self._require(rights, rights.cluster_queue(name))
        limit = self._limit(params)
        snapshot = self._synced()
        view = snapshot.view(name)
        if view is None:
            raise status.object_not_found("clusterqueue", name)
        items = view.page(0, limit)
        details = await rights.details(list(data.namespaces_of(items)))
        page = data.PendingPage(view, items, len(view))
        return data.pending_list(
            snapshot, page, self._sources.estimate_now(), details, self._sources.forecasts
        )

    async def _local_queue(
        self, rights: _Rights, namespace: str, name: str, params: Mapping[str, str]
    ) -> data.Json:
        await self._require(rights, rights.local_queue(namespace, name))
        limit = self._limit(params)
        snapshot = self._synced()
        exists, view = snapshot.local_queue_view(namespace, name)
        if not exists:
            raise status.object_not_found("localqueue", name)
        key = (namespace, name)
        if view is None:
            return {
                "kind": "DashboardPendingList",
                "clusterQueue": snapshot.local_queues.get(key, ""),
                "localQueue": {"namespace": namespace, "name": name},
                "total": 0,
                "admissionsPerHour": 0.0,
                "items": [],
            }
        items = view.local_queue_page(namespace, name, 0, limit)
        total = len(view.local_queue_indexes(namespace, name))
        details = await rights.details([namespace])
        page = data.PendingPage(view, items, total, key)
        return data.pending_list(
            snapshot, page, self._sources.estimate_now(), details, self._sources.forecasts
        )
