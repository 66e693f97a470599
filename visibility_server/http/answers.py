"""Answers of the data endpoints (docs/visibility-api.md#pending-workloads-endpoints,
#snapshots-identity-and-cost, #pending-position), from one snapshot.

An `Answer` is decided (ETag, item count) before anything is rendered, so a 304 costs
O(1) and a page costs O(limit): items are O(limit) slices of the view taken only when
the body is written. A request reads the snapshot reference once; the LocalQueue
lookup, the view and the page all come from that one snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from scheduler.runtime.pages import ClusterQueueView, PageItem, build_view
from scheduler.runtime.snapshot import Snapshot
from visibility_server.http import status
from visibility_server.http.bodies import BodyCache
from visibility_server.http.etag import tag_of
from visibility_server.http.memo import RenderMemo
from visibility_server.http.negotiation import Media
from visibility_server.http.position import (
    Estimates,
    NotPendingLookup,
    not_pending_position,
    pending_position,
)
from visibility_server.http.query import PageQuery
from visibility_server.http.render import (
    STREAM_ABOVE_ITEMS,
    ListDocument,
    ListOrigin,
    cluster_queue_summary,
    encode,
    summary_document,
)
from visibility_server.http.routes import Kind, Route
from visibility_server.http.sources import AnswerSources
from visibility_server.http.table import table_document


@dataclass(slots=True)
class Answer:
    """A data answer, decided but not yet rendered."""

    etag: str | None
    count: int  # items to render (decides streaming)
    chunks: Callable[[], Iterator[bytes]]
    content_type: str


class _Selection:
    """The items of one page, taken only when rendered: O(limit) slices of the view."""

    def __init__(
        self, view: ClusterQueueView, page: PageQuery, total: int, local_queue: Route | None = None
    ) -> None:
        self._view = view
        self._page = page
        self._local_queue = local_queue
        self.offset = page.offset
        self.count = max(0, min(total, page.offset + page.limit) - page.offset)

    def __call__(self) -> list[PageItem]:
        offset, limit = self._page.offset, self._page.limit
        if self._local_queue is None:
            return self._view.page(offset, limit)
        lq = self._local_queue
        return self._view.local_queue_page(lq.namespace, lq.name, offset, limit)


@dataclass(frozen=True, slots=True)
class _Source:
    """A summary's origin and the page to take from it."""

    origin: ListOrigin
    select: _Selection


class Answers:
    """Decides data answers; `not_pending` classifies Workloads the snapshot does not list."""

    def __init__(self, sources: AnswerSources, not_pending: NotPendingLookup | None) -> None:
        self._sources = sources
        self._not_pending = not_pending
        self._bodies = BodyCache()
        self.memo = RenderMemo()

    def forget(self) -> None:
        """Drop every rendered body and item (the server is stopping)."""
        self._bodies.clear()
        self.memo = RenderMemo()

    def answer(
        self, route: Route, media: Media, pretty: bool, page: PageQuery, include: str
    ) -> Answer:
        """The answer of a data request, from one read of the snapshot reference."""
        snapshot = self._sources.snapshot()
        if not snapshot.synced:
            raise status.not_synced()
        api_version = f"{status.VISIBILITY_GROUP}/{route.version}"
        if route.kind is Kind.POSITION:
            return self._position(snapshot, route, api_version, media, pretty)

        source = self._page_source(snapshot, route, page, api_version)
        resource_version, select = source.origin.resource_version, source.select
        etag = tag_of(
            resource_version,
            route.version,
            page.offset,
            page.limit,
            media.value,
            pretty,
            include,
        )

        # Table cells carry ages computed from the clock when rendered, which the ETag
        # does not cover; every other summary is the same bytes for the same key.
        key = None
        if media is not Media.TABLE and select.count <= STREAM_ABOVE_ITEMS:
            # Plain strings and integers: the cache hashes its key several times per
            # request, and a dataclass or an enum hashes in Python.
            key = (
                route.kind.value,
                route.version,
                route.namespace,
                route.name,
                resource_version,
                page.offset,
                page.limit,
                media.value,
                pretty,
            )

        # Rendering is deferred: a 304 (the common case for pollers) costs O(1).
        def chunks() -> Iterator[bytes]:
            if key is not None:
                body = self._bodies.get(key)
                if body is None:
                    body = b"".join(self._render(route, source, media, pretty, include))
                    self._bodies.put(key, body)
                return iter((body,))
            return self._render(route, source, media, pretty, include)

        return Answer(etag, select.count, chunks, media.content_type)

    def _render(
        self, route: Route, source: _Source, media: Media, pretty: bool, include: str
    ) -> Iterator[bytes]:
        origin, select = source.origin, source.select
        if route.kind is Kind.CLUSTER_QUEUE and media is not Media.TABLE:
            rows = range(select.offset, select.offset + select.count)
            document = cluster_queue_summary(origin, rows, self.memo)
        else:
            document = self._document(media, origin, select(), include)
        return document.chunks(media, pretty)

    def _page_source(
        self, snapshot: Snapshot, route: Route, page: PageQuery, api_version: str
    ) -> _Source:
        """The view a summary reads, its resourceVersion, and the page to take from it."""
        if route.kind is Kind.CLUSTER_QUEUE:
            view = snapshot.view(route.name)
            if view is None:
                raise status.object_not_found("clusterqueue", route.name)
            origin = ListOrigin(api_version, view.digest, view)
            return _Source(origin, _Selection(view, page, len(view)))
        view = self._local_queue_view(snapshot, route)
        resource_version = view.local_queue_digest(route.namespace, route.name)
        members = len(view.local_queue_indexes(route.namespace, route.name))
        origin = ListOrigin(api_version, resource_version, view)
        return _Source(origin, _Selection(view, page, members, route))

    def _local_queue_view(self, snapshot: Snapshot, route: Route) -> ClusterQueueView:
        exists, view = snapshot.local_queue_view(route.namespace, route.name)
        if not exists:
            raise status.object_not_found("localqueue", route.name)
        if view is None:
            # The LocalQueue exists but its ClusterQueue does not: 200 with no items, as
            # upstream. An empty view of that name gives a stable resourceVersion that
            # stays the same if the ClusterQueue appears with nothing queued.
            cluster_queue = snapshot.local_queues.get((route.namespace, route.name), "")
            view = build_view(cluster_queue, ())
        return view

    def _document(
        self, media: Media, origin: ListOrigin, items: list[PageItem], include: str
    ) -> ListDocument:
        if media is Media.TABLE:
            now = int(self._sources.clock() * 1_000_000)
            return table_document(origin, items, include, now, self.memo)
        return summary_document(origin, items, self.memo)

    def _position(
        self, snapshot: Snapshot, route: Route, api_version: str, media: Media, pretty: bool
    ) -> Answer:
        namespace, name = route.namespace, route.name
        cluster_queue = snapshot.workloads.get((namespace, name))
        view = snapshot.view(cluster_queue) if cluster_queue is not None else None
        item = view.position_of(namespace, name) if view is not None else None
        if view is not None and item is not None:
            velocity = snapshot.velocities.get(view.name)
            now = self._sources.estimate_now()
            estimates = Estimates(velocity, now, self._sources.forecast(namespace, name))
            document = pending_position(api_version, view, item, estimates)
            body = encode(document, media, pretty)
            # The view digest covers positions and counts; why it waits and the
            # estimates are not part of it, so the body itself is hashed in as well.
            etag = tag_of(view.digest, namespace, name, route.version, media.value, body)
            return Answer(etag, 1, lambda: iter((body,)), media.content_type)
        state = self._not_pending(namespace, name) if self._not_pending is not None else None
        if state is None:
            raise status.object_not_found("workload", name)
        # Classified from the informer cache, not the snapshot: no snapshot identity, no ETag.
        body = encode(not_pending_position(api_version, namespace, name, state), media, pretty)
        return Answer(None, 1, lambda: iter((body,)), media.content_type)
